// One step's results into each request's stream: the tokens the scheduler appended to each sample
// (sched::RequestUpdate), their logprobs, the detokenized text with stop strings
// (OutputProcessor), TTFT and inter-token latencies, and the end of a sample: the scheduler's
// finish (length, EOS, stop token), a stop string, or a sequence a manager ended
// (structured::SequenceEnd: its grammar completed or refused a token).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/engine_requests.h"
#include "runner/model_runner.h"
#include "sched/scheduler.h"
#include "structured/structured_outputs.h"

namespace tessera {


// What the step's outputs left for the engine (cleared and refilled by emit_step_outputs).
struct StepOutputs {
  std::vector<int64_t> finished;                      // sequences whose sample ended this step
  std::vector<std::pair<int64_t, int64_t>> decoding;  // (seq id, request id) of samples still running
  std::vector<int64_t> finished_requests;             // requests whose every sample has ended
};

// Pushes one RequestOutput per update of a live, unfinished sample; finishes in the scheduler the
// sequences that end here but not there (stop strings, manager ends). Reads `out` and `result`
// for logprobs; counts tokens and latencies into `metrics`.
void emit_step_outputs(const sched::SchedulerOutput& out, const RunnerOutput& result,
                       std::span<const sched::RequestUpdate> updates,
                       std::span<const structured::SequenceEnd> ended, RequestMap& requests,
                       sched::Scheduler& scheduler, MetricsSnapshot& metrics, StepOutputs& step);

}  // namespace tessera
