// EngineImpl speculation: after each step, draft tokens for the next one.
//
//   step N:   verify drafts (runner)  ->  handle_updates  ->  propose_drafts (here)
//   step N+1: the scheduler runs each speculating sequence's k drafts as one (k + 1)-token chunk
//             in the same batch as everyone else; the runner's lookup hands the draft model's q
//             rows (draft_probs_of) to the RejectionSampler.
//
// Invariants:
//  - draft_probs_[seq] exists only while that sequence has sampled (non-greedy) draft-model drafts
//    waiting for verification; it is dropped as soon as the sequence gets logits (verified) or
//    finishes. Its rows correspond, in order, to the drafts handed to set_spec_token_ids; the
//    scheduler may run only a prefix of them, so the lookup slices the first num_spec_tokens rows.
//  - The Speculator decides per sequence and step whether to propose and how many (adaptive k,
//    back-off at low acceptance, off once the batch is large), for both proposers.
#include <algorithm>
#include <chrono>

#include "engine/engine_impl.h"

namespace tessera {

std::span<const float> EngineImpl::draft_probs_of(const sched::ScheduledSeq& s) const {
  if (s.num_spec_tokens == 0) return {};
  auto it = draft_probs_.find(s.seq_id);
  if (it == draft_probs_.end() || it->second.empty()) return {};
  const auto rows = static_cast<size_t>(s.num_spec_tokens) * static_cast<size_t>(info_.vocab_size);
  TESSERA_CHECK(rows <= it->second.size(), "seq {}: {} drafts scheduled, {} floats of q kept", s.seq_id,
                s.num_spec_tokens, it->second.size());
  return {it->second.data(), rows};
}

void EngineImpl::propose_drafts(const sched::SchedulerOutput& out,
                                const std::vector<sched::RequestUpdate>& updates,
                                const std::vector<std::pair<int64_t, int64_t>>& decoding) {
  if (!speculator_) return;
  // Verified or gone: drop the q rows of this step's drafts, forget finished sequences.
  for (const sched::ScheduledSeq& s : out.seqs) {
    if (s.needs_logits) draft_probs_.erase(s.seq_id);
  }
  auto forget = [&](int64_t seq_id) {
    draft_probs_.erase(seq_id);
    if (draft_) draft_->release(seq_id);
  };
  for (int64_t id : out.finished_ids) forget(id);
  for (const sched::RequestUpdate& u : updates) {
    if (u.finished()) forget(u.seq_id);
  }

  if (!speculator_->allow_step()) return;  // the wall-clock guard says speculation does not pay now
  // The guard times decode-only steps (this call included); in a step with prefill chunks it is
  // told this call's time separately (a draft catching up on a just-prefilled prompt).
  bool decode_only = true;
  for (const sched::ScheduledSeq& s : out.seqs) {
    decode_only &= s.needs_logits && static_cast<int32_t>(s.token_ids.size()) == s.num_spec_tokens + 1;
  }
  const auto propose_start = std::chrono::steady_clock::now();
  // On every way out: this call's time, kept for step() (the cost model's t(n) leaves it out) and
  // charged to the guard here when the step had prefill chunks.
  struct ProposeTimer {
    spec::Speculator& speculator;
    double& seconds;
    bool charge;
    std::chrono::steady_clock::time_point start;
    ~ProposeTimer() {
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (charge) speculator.record_overhead(seconds);
    }
  } timer{*speculator_, propose_seconds_, !decode_only, propose_start};
  const int32_t num_running = scheduler_->num_running();
  // Who could speculate, with the caps of their max_tokens and the context, then the plan.
  spec_candidates_.clear();
  spec_samples_.clear();
  for (const auto& [seq_id, request_id] : decoding) {
    auto it = requests_.find(request_id);
    if (it == requests_.end()) continue;
    ActiveRequest& req = *it->second;
    // The sample of this sequence: the one whose output was just extended.
    SampleState* sample = nullptr;
    for (const sched::RequestUpdate& u : updates) {
      if (u.seq_id == seq_id) sample = &req.samples[static_cast<size_t>(u.sample_index)];
    }
    if (!sample) continue;
    const auto num_output = static_cast<int32_t>(sample->output_ids.size());
    const auto num_total = static_cast<int32_t>(req.prompt_ids.size()) + num_output;
    const int32_t max_k = std::min(req.params.max_tokens - num_output - 1, info_.context_length - num_total - 1);
    if (max_k <= 0) continue;
    // Tokens the draft has not seen (prompt and output, its own KV and prefix cache aside) beyond
    // the one or two that every proposal feeds first (the last committed tokens).
    int32_t num_catch_up = 0;
    if (draft_) {
      const spec::DraftRequest probe{seq_id, req.prompt_ids, sample->output_ids, 0, nullptr, req.cache_extra_key};
      num_catch_up = std::max(0, num_total - draft_->num_reusable(probe) - 2);
    }
    spec_candidates_.push_back({seq_id, max_k, num_catch_up, req.params.max_tokens - num_output});
    spec_samples_.emplace_back(&req, sample);
  }
  spec_plan_.resize(spec_candidates_.size());
  speculator_->plan(spec_candidates_, num_running, spec_plan_);

  draft_requests_.clear();
  int32_t max_k = 0;
  for (size_t i = 0; i < spec_candidates_.size(); ++i) {
    const int32_t k = spec_plan_[i];
    if (k <= 0) continue;
    max_k = std::max(max_k, k);
    const int64_t seq_id = spec_candidates_[i].seq_id;
    ActiveRequest& req = *spec_samples_[i].first;
    const SampleState& sample = *spec_samples_[i].second;
    if (draft_) {
      draft_requests_.push_back({seq_id, req.prompt_ids, sample.output_ids, k, &req.params, req.cache_extra_key});
      continue;
    }
    spec_context_.assign(req.prompt_ids.begin(), req.prompt_ids.end());
    spec_context_.insert(spec_context_.end(), sample.output_ids.begin(), sample.output_ids.end());
    spec_drafts_.resize(static_cast<size_t>(k));
    const int32_t found = ngram_->propose(spec_context_, spec_drafts_);
    if (found <= 0) {
      speculator_->record_miss(seq_id);
      continue;
    }
    speculator_->corrupt_drafts({spec_drafts_.data(), static_cast<size_t>(found)}, info_.vocab_size);
    scheduler_->set_spec_token_ids(seq_id, {spec_drafts_.begin(), spec_drafts_.begin() + found});
  }
  if (!draft_) {
    // The n-gram lookups are the proposer's "forwards": microseconds, timed all the same.
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - propose_start).count();
    speculator_->record_proposer(max_k, seconds);
    return;
  }
  if (draft_requests_.empty()) return;

  // Draft model: one batched proposal for every speculating sequence of the step.
  std::vector<spec::DraftResult> results = draft_->propose(draft_requests_, runner_->pool());
  const spec::DraftCallStats& call = draft_->last_call();
  if (call.num_catch_up_tokens <= 2 * call.num_seqs) {
    // Up to date: every forward was a drafting one.
    speculator_->record_proposer(call.num_catch_up_forwards + call.num_draft_forwards,
                                 call.catch_up_seconds + call.draft_seconds);
  } else {
    live_metrics_.spec_catch_up_tokens += call.num_catch_up_tokens;
    speculator_->record_catch_up(call.num_catch_up_tokens, call.catch_up_seconds);
    speculator_->record_proposer(call.num_draft_forwards, call.draft_seconds);
  }
  for (size_t i = 0; i < draft_requests_.size(); ++i) {
    const int64_t seq_id = draft_requests_[i].seq_id;
    spec::DraftResult& r = results[i];
    if (r.tokens.empty()) {
      speculator_->record_miss(seq_id);
      continue;
    }
    speculator_->corrupt_drafts(r.tokens, info_.vocab_size);  // test hook; no-op in production
    if (!scheduler_->set_spec_token_ids(seq_id, r.tokens)) continue;
    if (!r.probs.empty()) draft_probs_[seq_id] = std::move(r.probs);
  }
}

Status EngineImpl::create_draft_proposer(const EngineConfigs& d) {
  spec::SpeculatorConfig spc = d.speculator;
  if (config_.speculative == "ngram") {
    speculator_ = std::make_unique<spec::Speculator>(spc);
    TESSERA_TRY(spec::validate_ngram_config(d.ngram));
    ngram_ = std::make_unique<spec::NgramProposer>(d.ngram);
    return ok_status();
  }
  if (config_.draft_model_path.empty()) {
    return make_error(ErrorCode::kInvalidArgument, "speculative 'draft' needs a draft model path");
  }
  if (config_.num_speculative_tokens < 1) {
    return make_error(ErrorCode::kInvalidArgument, "num_speculative_tokens must be >= 1, got {}",
                      config_.num_speculative_tokens);
  }
  const spec::DraftProposerConfig& dc = d.draft;
  auto draft = spec::DraftProposer::load(config_.draft_model_path, *model_, dc);
  if (!draft) return draft.error();
  draft_ = std::move(*draft);
  // Until a draft forward is timed, assume decode cost in proportion to the weights streamed.
  spc.costs.draft_cost_prior = static_cast<double>(draft_->model().weight_bytes_per_pass()) /
                               static_cast<double>(std::max<size_t>(1, model_->weight_bytes_per_pass()));
  speculator_ = std::make_unique<spec::Speculator>(spc);
  return ok_status();
}

}  // namespace tessera
