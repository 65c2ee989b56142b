// EngineImpl::step: schedule -> execute -> update across plain-data boundaries, then the outputs.
#include <algorithm>
#include <chrono>

#include "engine/engine_impl.h"
#include "util/op_profile.h"

namespace tessera {

namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

bool EngineImpl::step() {
  profile::OpScope engine_scope(profile::Op::kEngineStep);  // --profile: the loop's own cost around the runner
  const Clock::time_point step_start = Clock::now();
  sched::SchedulerOutput out = scheduler_->schedule();
  if (out.seqs.empty()) {
    publish_kv_events();
    publish_metrics();
    return false;
  }
  const Clock::time_point now = Clock::now();
  for (const sched::ScheduledSeq& s : out.seqs) {
    auto it = requests_.find(s.request_id);
    if (it == requests_.end()) continue;
    ActiveRequest& req = *it->second;
    if (!req.first_scheduled) {
      req.first_scheduled = now;
      req.num_cached_prompt_tokens = s.start_position;  // a prefix-cache hit starts the seq ahead
      live_metrics_.request_queue_time.observe(seconds_between(req.arrival, now));
    }
  }

  start_grammar_masks(out);  // constrained rows' masks, computed while the forward runs
  // What sampling reads of each sequence that needs logits: views of its request's state, handed
  // down with the scheduler's output (sampling_[i] for out.seqs[i]).
  sampling_.assign(out.seqs.size(), SequenceSampling{});
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const sched::ScheduledSeq& s = out.seqs[i];
    if (!s.needs_logits) continue;
    auto it = requests_.find(s.request_id);
    TESSERA_CHECK(it != requests_.end(), "no state for request {}", s.request_id);
    SequenceSampling& ss = sampling_[i];
    ss = sampling_view_of(*it->second, s.sample_index);
    if (spec_) ss.draft_probs = spec_->draft_probs_of(s.seq_id, s.num_spec_tokens);  // draft-model q rows
    ss.allowed_tokens = grammar_masks_of(s);  // filled by the mask job: the runner waits for it
  }
  const RunnerOutput& result = runner_->execute(out, sampling_, &grammar_future_);
  wait_grammar_masks();
  fail_nonfinite_requests(out, result);
  const std::vector<sched::RequestUpdate> updates = scheduler_->update_from_output(out, result.sampled);
  live_metrics_.num_steps += 1;
  live_metrics_.lane_steps_used += static_cast<int64_t>(out.seqs.size());
  live_metrics_.lane_steps_total += config_.max_num_seqs;
  live_metrics_.padding_lane_steps += runner_->num_padding_lanes();
  std::vector<int64_t> finished;
  std::vector<std::pair<int64_t, int64_t>> decoding;
  handle_updates(out, result, updates, finished, decoding);
  if (spec_) {
    // Speculation's one call per step: verifications, forgetting, drafts for the next step, timing.
    const std::vector<speculative::SpecSequence> sequences = spec_sequences(decoding, updates);
    const speculative::SpecStepStats st = spec_->after_step(
        {&out, result.num_accepted_drafts, result.sampled.sampled_token_ids, updates, finished, sequences,
         step_start},
        *scheduler_, runner_->pool());
    live_metrics_.spec_propose_seconds += st.propose_seconds;
    live_metrics_.spec_catch_up_tokens += st.num_catch_up_tokens;
  }
  publish_kv_events();
  publish_metrics();
  return true;
}

void EngineImpl::publish_kv_events() {
  if (!config_.on_kv_events) return;
  std::vector<kv::BlockEvent> records = scheduler_->drain_block_events();
  if (records.empty()) return;
  KvEventBatch batch;
  batch.ts = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  batch.block_size = scheduler_->kv_cache().block_size();
  batch.events.reserve(records.size());
  for (kv::BlockEvent& r : records) {
    KvCacheEvent& e = batch.events.emplace_back();
    switch (r.kind) {
      case kv::BlockEventKind::kStored:
        e.kind = KvCacheEvent::Kind::kBlockStored;
        if (r.has_parent) e.parent_block_hash = r.parent_hash;
        e.token_ids = std::move(r.token_ids);
        break;
      case kv::BlockEventKind::kRemoved: e.kind = KvCacheEvent::Kind::kBlockRemoved; break;
      case kv::BlockEventKind::kAllCleared: e.kind = KvCacheEvent::Kind::kAllBlocksCleared; break;
    }
    e.block_hash = r.hash;
  }
  config_.on_kv_events(std::move(batch));
}

void EngineImpl::fail_nonfinite_requests(const sched::SchedulerOutput& out, const RunnerOutput& result) {
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    if (result.nonfinite_logits[i] == 0) continue;
    const sched::ScheduledSeq& s = out.seqs[i];
    if (spec_) spec_->remove(s.seq_id);
    auto it = requests_.find(s.request_id);
    if (it == requests_.end()) continue;  // another sample of it already failed this step
    scheduler_->abort_request(s.request_id, sched::RequestStatus::kFinishedError);
    ActiveRequest& req = *it->second;
    end_unfinished_samples(req, FinishReason::kError,
                           "the model produced non-finite logits (NaN or Inf) for this request");
    live_metrics_.num_requests_nonfinite += 1;
    finish_request_state(req);
    requests_.erase(it);
  }
}

std::vector<speculative::SpecSequence> EngineImpl::spec_sequences(const std::vector<std::pair<int64_t, int64_t>>& decoding,
                                                          const std::vector<sched::RequestUpdate>& updates) const {
  std::vector<speculative::SpecSequence> sequences;
  sequences.reserve(decoding.size());
  for (const auto& [seq_id, request_id] : decoding) {
    auto it = requests_.find(request_id);
    if (it == requests_.end()) continue;
    const ActiveRequest& req = *it->second;
    // The sample of this sequence: the one whose output was just extended.
    int32_t sample_index = -1;
    for (const sched::RequestUpdate& u : updates) {
      if (u.seq_id == seq_id) sample_index = u.sample_index;
    }
    if (sample_index < 0) continue;
    sequences.push_back(spec_sequence_of(req, seq_id, sample_index));
  }
  return sequences;
}

void EngineImpl::handle_updates(const sched::SchedulerOutput& out, const RunnerOutput& result,
                                const std::vector<sched::RequestUpdate>& updates, std::vector<int64_t>& finished,
                                std::vector<std::pair<int64_t, int64_t>>& decoding) {
  const Clock::time_point now = Clock::now();
  // Speculation outcomes of this step.
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const sched::ScheduledSeq& s = out.seqs[i];
    if (s.num_spec_tokens == 0 || !s.needs_logits) continue;
    const int32_t accepted = result.num_accepted_drafts[i];
    live_metrics_.spec_num_drafts += 1;
    live_metrics_.spec_num_draft_tokens += s.num_spec_tokens;
    live_metrics_.spec_num_accepted_tokens += accepted;
    for (int32_t p = 0; p < accepted && p < static_cast<int32_t>(live_metrics_.spec_accepted_per_position.size()); ++p) {
      live_metrics_.spec_accepted_per_position[static_cast<size_t>(p)] += 1;
    }
  }
  // Logprobs by sequence id (when asked).
  auto logprobs_of = [&](int64_t seq_id) -> const SampledLogprobs* {
    for (size_t i = 0; i < out.seqs.size(); ++i) {
      if (out.seqs[i].seq_id == seq_id) return &result.logprobs[i];
    }
    return nullptr;
  };

  for (const sched::RequestUpdate& u : updates) {
    auto it = requests_.find(u.request_id);
    if (it == requests_.end()) continue;
    ActiveRequest& req = *it->second;
    SampleState& sample = req.samples[static_cast<size_t>(u.sample_index)];
    if (sample.finished) continue;
    RequestOutput ev;
    ev.sample_index = u.sample_index;
    bool stopped_by_string = false;
    bool grammar_refused = false;
    const SampledLogprobs* lp = req.params.logprobs ? logprobs_of(u.seq_id) : nullptr;
    for (size_t t = 0; t < u.new_token_ids.size(); ++t) {
      const int32_t token = u.new_token_ids[t];
      sample.output_ids.push_back(token);
      ev.token_ids.push_back(token);
      // The masks only let allowed tokens through, so a refusal is an engine bug: end the sample
      // with an error rather than emit text outside the grammar.
      if (sample.grammar && !sample.grammar->accept_token(token)) grammar_refused = true;
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
    live_metrics_.generation_tokens += static_cast<int64_t>(ev.token_ids.size());
    if (!ev.token_ids.empty()) {
      if (!req.first_token) {
        req.first_token = now;
        live_metrics_.time_to_first_token.observe(seconds_between(req.arrival, now));
      } else {
        live_metrics_.inter_token_latency.observe(seconds_between(sample.last_token_time, now));
      }
      sample.last_token_time = now;
    }
    // A grammar with nothing left to match ends the sample (as a stop string would).
    const bool grammar_complete = sample.grammar && sample.grammar->is_complete();
    if (grammar_refused) {
      if (!u.finished()) scheduler_->finish_request(u.seq_id, sched::RequestStatus::kFinishedError);
      ev.finish_reason = FinishReason::kError;
      ev.error = "internal error: a sampled token is outside the request's grammar";
    } else if (stopped_by_string || (grammar_complete && !u.finished())) {
      if (!u.finished()) scheduler_->finish_request(u.seq_id, sched::RequestStatus::kFinishedStopped);
      ev.finish_reason = FinishReason::kStop;
      if (!stopped_by_string) ev.text_delta += sample.output->flush();
    } else if (u.finished()) {
      ev.finish_reason = sched::finish_reason_of(u.status);
      ev.text_delta += sample.output->flush();
    } else {
      decoding.emplace_back(u.seq_id, u.request_id);
    }
    ev.num_prompt_tokens = static_cast<int32_t>(req.prompt->size());
    ev.num_cached_prompt_tokens = req.num_cached_prompt_tokens;
    ev.num_output_tokens = static_cast<int32_t>(sample.output_ids.size());
    const bool final_event = ev.finish_reason != FinishReason::kNone;
    req.stream->push(std::move(ev));
    if (final_event) {
      sample.finished = true;
      finished.push_back(u.seq_id);
      if (++req.num_finished_samples == static_cast<int32_t>(req.samples.size())) {
        finish_request_state(req);
        requests_.erase(it);
      }
    }
  }
}

void EngineImpl::publish_metrics() {
  const sched::SchedulerStats st = scheduler_->stats();
  MetricsSnapshot& m = live_metrics_;
  if (spec_) {
    const speculative::SpecCostModel& costs = spec_->costs();
    m.spec_step_seconds.resize(static_cast<size_t>(std::max(0, config_.num_speculative_tokens)) + 2);
    for (size_t n = 1; n < m.spec_step_seconds.size(); ++n) {
      m.spec_step_seconds[n] = costs.measured_target_step_seconds(static_cast<int32_t>(n));
    }
    m.spec_proposer_forward_seconds = costs.measured_proposer_forward_seconds();
    m.spec_catch_up_seconds_per_token = costs.measured_catch_up_seconds_per_token();
    m.spec_draft_prefix_hit_tokens = spec_->draft_prefix_hit_tokens();
  }
  m.num_requests_running = st.num_running;
  m.num_requests_waiting = st.num_waiting;
  m.kv_cache_usage = st.kv.usage;
  m.num_kv_blocks_total = st.kv.num_blocks_total;
  m.num_kv_blocks_free = st.kv.num_blocks_free;
  m.num_kv_blocks_cached = st.kv.num_blocks_cached;
  m.num_kv_blocks_used = st.kv.num_blocks_used;
  m.peak_num_kv_blocks_used = std::max(m.peak_num_kv_blocks_used, st.kv.num_blocks_used);
  m.peak_num_requests_running = std::max(m.peak_num_requests_running, st.num_running);
  m.num_waiting_uncached_tokens = st.num_waiting_uncached_tokens;
  m.prefix_cache_queries = st.kv.prefix_query_tokens;
  m.prefix_cache_hits = st.kv.prefix_hit_tokens;
  m.num_preemptions = st.num_preemptions;
  m.num_kv_evictions = st.kv.num_evictions;
  m.num_cow_copies = st.kv.num_cow_copies;
  m.num_kv_window_releases = st.kv.num_window_releases;
  std::lock_guard<std::mutex> lock(mutex_);
  published_metrics_ = m;
}

}  // namespace tessera
