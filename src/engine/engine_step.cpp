// EngineImpl::step: one engine step, schedule -> views -> managers -> forward -> sample -> update
// -> outputs, across plain-data boundaries (see engine_impl.h for the picture).
#include <chrono>

#include "engine/engine_impl.h"
#include "util/op_profile.h"

namespace tessera {

bool EngineImpl::step() {
  profile::LoopScope loop_scope;  // --profile: the loop's own cost, the runner's part left out
  const Clock::time_point step_start = Clock::now();
  const sched::SchedulerOutput out = scheduler_->schedule();
  if (disk_) {  // ended sequences: their held-back sliding-window blocks (engine_disk_tier.h)
    disk_->end_sequences(out.finished_ids);
    disk_->end_sequences(out.preempted_ids);
  }
  if (out.seqs.empty()) {
    loop_scope.cancel();
    publish();
    return false;
  }
  note_first_scheduled(out);
  structured_->start_masks(out);  // constrained rows' masks, on its worker while the forward runs
  build_sampling_views(out);
  loop_scope.runner_begin();
  runner_->forward(out, loras_->adapters_of(out, requests_));
  const std::span<const std::span<const uint64_t>> masks = structured_->wait_masks();
  for (size_t i = 0; i < out.seqs.size(); ++i) sampling_[i].allowed_tokens = masks[i];
  const RunnerOutput& result = runner_->sample(out, sampling_);
  loop_scope.runner_end();
  fail_nonfinite_requests(out, result);
  const std::vector<sched::RequestUpdate> updates = scheduler_->update_from_output(out, result.sampled);
  const std::vector<structured::SequenceEnd>& ended = structured_->commit(updates);
  metrics_->observe_step(out, result, config_.max_num_seqs, runner_->num_padding_lanes());
  emit_step_outputs(out, result, updates, ended, requests_, *scheduler_, metrics_->live(), step_outputs_);
  for (int64_t id : step_outputs_.finished_requests) {
    auto it = requests_.find(id);
    finish_request_state(*it->second);
    requests_.erase(it);
  }
  if (spec_) after_step_speculation(out, result, updates, step_start);
  publish();
  return true;
}

void EngineImpl::note_first_scheduled(const sched::SchedulerOutput& out) {
  const Clock::time_point now = Clock::now();
  for (const sched::ScheduledSeq& s : out.seqs) {
    auto it = requests_.find(s.request_id);
    if (it == requests_.end()) continue;
    ActiveRequest& req = *it->second;
    if (!req.first_scheduled) {
      req.first_scheduled = now;
      req.num_cached_prompt_tokens = s.start_position;  // a prefix-cache hit starts the seq ahead
      metrics_->live().request_queue_time.observe(std::chrono::duration<double>(now - req.arrival).count());
    }
  }
}

void EngineImpl::build_sampling_views(const sched::SchedulerOutput& out) {
  sampling_.assign(out.seqs.size(), SequenceSampling{});
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const sched::ScheduledSeq& s = out.seqs[i];
    if (!s.needs_logits) continue;
    auto it = requests_.find(s.request_id);
    TESSERA_CHECK(it != requests_.end(), "no state for request {}", s.request_id);
    SequenceSampling& ss = sampling_[i];
    ss = sampling_view_of(*it->second, s.sample_index);
    if (spec_) ss.draft_probs = spec_->draft_probs_of(s.seq_id, s.num_spec_tokens);  // draft-model q rows
  }
}

void EngineImpl::after_step_speculation(const sched::SchedulerOutput& out, const RunnerOutput& result,
                                        const std::vector<sched::RequestUpdate>& updates,
                                        Clock::time_point step_start) {
  // The samples still decoding, as the SpecDecoder reads them (spans into requests_).
  std::vector<speculative::SpecSequence> sequences;
  sequences.reserve(step_outputs_.decoding.size());
  for (const auto& [seq_id, request_id] : step_outputs_.decoding) {
    auto it = requests_.find(request_id);
    if (it == requests_.end()) continue;
    int32_t sample_index = -1;  // the sample whose output was just extended
    for (const sched::RequestUpdate& u : updates) {
      if (u.seq_id == seq_id) sample_index = u.sample_index;
    }
    // A draft model drafts only for the base model: it has no adapter, so its guesses at an adapted
    // request's tokens would be the base model's (still lossless after verification, but mostly
    // rejected: a forward for nothing). N-gram drafts come from the request's own text and stay on.
    if (it->second->lora && config_.speculative == "draft") continue;
    if (sample_index >= 0) sequences.push_back(spec_sequence_of(*it->second, seq_id, sample_index));
  }
  const speculative::SpecStepStats st = spec_->after_step(
      {&out, result.num_accepted_drafts, result.sampled.sampled_token_ids, updates, step_outputs_.finished, sequences,
       step_start},
      *scheduler_, runner_->pool());
  metrics_->live().spec_propose_seconds += st.propose_seconds;
  metrics_->live().spec_catch_up_tokens += st.num_catch_up_tokens;
}

void EngineImpl::publish() {
  if (config_.on_kv_events || !config_.kv_cache_dir.empty()) {  // the pool records for either
    std::vector<kv::BlockEvent> records = scheduler_->drain_block_events();
    if (disk_) disk_->observe_pool_events(records, *kv_);  // writes of newly cached blocks
    if (config_.on_kv_events) {
      std::optional<KvEventBatch> batch = kv_event_batch(records, scheduler_->kv_cache().block_size(),
                                                         disk_ ? disk_->drain_events() : std::vector<KvCacheEvent>{});
      if (batch) {
        loras_->name_events(records, batch->events);
        config_.on_kv_events(std::move(*batch));
      }
    }
  }
  loras_->count(requests_, metrics_->live().lora_requests);
  metrics_->publish(scheduler_->stats(), spec_.get());
}

}  // namespace tessera
