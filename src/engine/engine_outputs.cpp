#include "engine/engine_outputs.h"

#include <algorithm>
#include <chrono>

namespace tessera {

void emit_step_outputs(const sched::SchedulerOutput& out, const RunnerOutput& result,
                       std::span<const sched::RequestUpdate> updates,
                       std::span<const structured::SequenceEnd> ended, RequestMap& requests,
                       sched::Scheduler& scheduler, MetricsSnapshot& metrics, StepOutputs& step) {
  step.finished.clear();
  step.decoding.clear();
  step.finished_requests.clear();
  const Clock::time_point now = Clock::now();
  auto seconds_since = [](Clock::time_point t, Clock::time_point now) {
    return std::chrono::duration<double>(now - t).count();
  };
  // Logprobs by sequence id (when asked).
  auto logprobs_of = [&](int64_t seq_id) -> const SampledLogprobs* {
    for (size_t i = 0; i < out.seqs.size(); ++i) {
      if (out.seqs[i].seq_id == seq_id) return &result.logprobs[i];
    }
    return nullptr;
  };

  for (const sched::RequestUpdate& u : updates) {
    auto it = requests.find(u.request_id);
    if (it == requests.end()) continue;
    ActiveRequest& req = *it->second;
    SampleState& sample = req.samples[static_cast<size_t>(u.sample_index)];
    if (sample.finished) continue;
    RequestOutput ev;
    ev.sample_index = u.sample_index;
    bool stopped_by_string = false;
    const SampledLogprobs* lp = req.params.logprobs ? logprobs_of(u.seq_id) : nullptr;
    for (size_t t = 0; t < u.new_token_ids.size(); ++t) {
      const int32_t token = u.new_token_ids[t];
      sample.output_ids.push_back(token);
      ev.token_ids.push_back(token);
      if (lp) {
        // A parallel-sampling root's row holds one entry per sample.
        const size_t k = lp->tokens.size() == req.samples.size() && u.new_token_ids.size() == 1
                             ? static_cast<size_t>(u.sample_index) : t;
        if (k < lp->tokens.size()) {
          ev.logprobs.push_back({token, lp->tokens[k].logprob});
          std::vector<TokenLogprob> top;
          for (const auto& e : lp->tokens[k].top_logprobs) top.push_back({e.token_id, e.logprob});
          ev.top_logprobs.push_back(std::move(top));
        }
      }
      OutputProcessor::Delta d = sample.output->append(token);
      ev.text_delta += d.text;
      if (d.stop_matched) {
        stopped_by_string = true;
        break;
      }
    }
    metrics.generation_tokens += static_cast<int64_t>(ev.token_ids.size());
    if (!ev.token_ids.empty()) {
      if (!req.first_token) {
        req.first_token = now;
        metrics.time_to_first_token.observe(seconds_since(req.arrival, now));
      } else {
        metrics.inter_token_latency.observe(seconds_since(sample.last_token_time, now));
      }
      sample.last_token_time = now;
    }
    // A sequence a manager ended this step: an error, or a stop (as a stop string would).
    const auto end = std::find_if(ended.begin(), ended.end(),
                                  [&](const structured::SequenceEnd& e) { return e.seq_id == u.seq_id; });
    const bool end_error = end != ended.end() && end->status == sched::RequestStatus::kFinishedError;
    const bool end_stop = end != ended.end() && !end_error;
    if (end_error) {
      if (!u.finished()) scheduler.finish_request(u.seq_id, sched::RequestStatus::kFinishedError);
      ev.finish_reason = FinishReason::kError;
      ev.error = end->error;
    } else if (stopped_by_string || (end_stop && !u.finished())) {
      if (!u.finished()) scheduler.finish_request(u.seq_id, sched::RequestStatus::kFinishedStopped);
      ev.finish_reason = FinishReason::kStop;
      if (!stopped_by_string) ev.text_delta += sample.output->flush();
    } else if (u.finished()) {
      ev.finish_reason = sched::finish_reason_of(u.status);
      ev.text_delta += sample.output->flush();
    } else {
      step.decoding.emplace_back(u.seq_id, u.request_id);
    }
    ev.num_prompt_tokens = static_cast<int32_t>(req.prompt->size());
    ev.num_cached_prompt_tokens = req.num_cached_prompt_tokens;
    ev.num_output_tokens = static_cast<int32_t>(sample.output_ids.size());
    const bool final_event = ev.finish_reason != FinishReason::kNone;
    req.stream->push(std::move(ev));
    if (final_event) {
      sample.finished = true;
      step.finished.push_back(u.seq_id);
      if (++req.num_finished_samples == static_cast<int32_t>(req.samples.size())) {
        step.finished_requests.push_back(req.id);
      }
    }
  }
}

}  // namespace tessera
