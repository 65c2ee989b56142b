// The engine thread's per-request state, the views of it that go down with a step, and the
// messages client threads send it.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/lora_registry.h"
#include "engine/output_processor.h"
#include "engine/request_stream.h"
#include "runner/model_runner.h"
#include "sample/rng.h"
#include "sched/request.h"
#include "speculative/spec_decoder.h"
#include "structured/structured_outputs.h"
#include "tessera/engine.h"
#include "util/timer.h"

namespace tessera {

struct SampleState {
  std::vector<int32_t> output_ids;          // generated tokens of this sample
  std::unique_ptr<OutputProcessor> output;  // detokenizer + stop strings
  sample::Rng rng;
  bool finished = false;
  Clock::time_point last_token_time;
};

struct ActiveRequest {
  int64_t id = 0;
  SamplingParams params;                            // as submitted (validated)
  sched::PromptIds prompt;                          // the request's one copy of its prompt ids
  std::vector<SampleState> samples;                 // [n]
  std::vector<sample::Rng*> rng_ptrs;               // [n] into samples (the runner's sampling views)
  std::shared_ptr<RequestStreamImpl> stream;
  Clock::time_point arrival;
  std::optional<Clock::time_point> first_scheduled, first_token;
  int32_t num_cached_prompt_tokens = 0;
  int32_t num_finished_samples = 0;
  uint64_t cache_extra_key = 0;                     // kv::hash_cache_salt(cache salt), 0 = none
  std::shared_ptr<const LoadedLora> lora;  // the LoRA adapter it runs (held to its end), or null
  structured::Grammar grammar;  // structured output (compiled at submit), or null; its matchers are StructuredOutputs'
};

// What goes down per request (engine_requests.cpp); each shares the request's state, none copies it:
//   scheduler_request_of  the scheduler's NewRequest at admission (the prompt holder, stop data, n)
//   sampling_view_of      the runner's SequenceSampling of one sample (params, RNGs, prompt, output)
//   spec_sequence_of      the SpecDecoder's view of one decoding sample
sched::NewRequest scheduler_request_of(const ActiveRequest& req, std::vector<int32_t> eos_token_ids,
                                       std::string cache_salt);
SequenceSampling sampling_view_of(const ActiveRequest& req, int32_t sample_index);
speculative::SpecSequence spec_sequence_of(const ActiveRequest& req, int64_t seq_id, int32_t sample_index);

struct EngineMessage {
  enum class Kind { kAdd, kAbort } kind = Kind::kAdd;
  std::unique_ptr<ActiveRequest> request;  // kAdd
  int64_t request_id = 0;                  // both
  std::string cache_salt;                  // kAdd
};

using RequestMap = std::unordered_map<int64_t, std::unique_ptr<ActiveRequest>>;  // by request id

}  // namespace tessera
