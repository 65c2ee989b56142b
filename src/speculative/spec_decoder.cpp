// SpecDecoder: see spec_decoder.h.
#include "speculative/spec_decoder.h"

#include <algorithm>

#include "util/check.h"

namespace tessera::speculative {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A step whose every sequence ran exactly its last token plus its drafts: the guard and the cost
// model time only these (prefill chunks would skew the rates).
bool is_decode_only(const sched::SchedulerOutput& out) {
  bool decode_only = true;
  for (const sched::ScheduledSeq& s : out.seqs) {
    decode_only &= s.needs_logits && static_cast<int32_t>(s.token_ids.size()) == s.num_spec_tokens + 1;
  }
  return decode_only;
}
}  // namespace

Result<std::unique_ptr<SpecDecoder>> SpecDecoder::create(const SpecDecoderConfig& config, const LlamaModel& target) {
  SpeculatorConfig spc = config.speculator;
  if (config.proposer == "ngram") {
    TESSERA_TRY(validate_ngram_config(config.ngram));
    return std::unique_ptr<SpecDecoder>(new SpecDecoder(config, std::make_unique<Speculator>(spc),
                                                        std::make_unique<NgramProposer>(config.ngram), nullptr));
  }
  if (config.proposer != "draft") {
    return make_error(ErrorCode::kInvalidArgument, "speculative '{}' must be ngram or draft", config.proposer);
  }
  if (config.draft_model_path.empty()) {
    return make_error(ErrorCode::kInvalidArgument, "speculative 'draft' needs a draft model path");
  }
  if (config.draft.num_speculative_tokens < 1) {
    return make_error(ErrorCode::kInvalidArgument, "num_speculative_tokens must be >= 1, got {}",
                      config.draft.num_speculative_tokens);
  }
  auto draft = DraftProposer::load(config.draft_model_path, target, config.draft);
  if (!draft) return draft.error();
  // Until a draft forward is timed, assume decode cost in proportion to the weights streamed.
  spc.costs.draft_cost_prior = static_cast<double>((*draft)->model().weight_bytes_per_pass()) /
                               static_cast<double>(std::max<size_t>(1, target.weight_bytes_per_pass()));
  DraftProposer* raw = draft->get();
  return std::unique_ptr<SpecDecoder>(
      new SpecDecoder(config, std::make_unique<Speculator>(spc), std::move(*draft), raw));
}

SpecDecoder::SpecDecoder(const SpecDecoderConfig& config, std::unique_ptr<Speculator> speculator,
                         std::unique_ptr<Proposer> proposer, DraftProposer* draft)
    : config_(config), speculator_(std::move(speculator)), proposer_(std::move(proposer)), draft_(draft) {}

std::span<const float> SpecDecoder::draft_probs_of(int64_t seq_id, int32_t num_spec_tokens) const {
  if (num_spec_tokens == 0) return {};
  auto it = draft_probs_.find(seq_id);
  if (it == draft_probs_.end() || it->second.empty()) return {};
  const auto rows = static_cast<size_t>(num_spec_tokens) * static_cast<size_t>(config_.vocab_size);
  TESSERA_CHECK(rows <= it->second.size(), "seq {}: {} drafts scheduled, {} floats of q kept", seq_id,
                num_spec_tokens, it->second.size());
  return {it->second.data(), rows};
}

void SpecDecoder::forget(int64_t seq_id) {
  draft_probs_.erase(seq_id);
  proposer_->release(seq_id);
}

SpecStepStats SpecDecoder::after_step(const SpecStep& step, sched::Scheduler& scheduler, ThreadPool& pool) {
  const sched::SchedulerOutput& out = *step.out;
  // This step's verifications feed the acceptance estimates; then the ended samples' go.
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const sched::ScheduledSeq& s = out.seqs[i];
    if (s.num_spec_tokens == 0 || !s.needs_logits) continue;
    speculator_->record(s.seq_id, s.num_spec_tokens, step.num_accepted[i]);
  }
  for (int64_t seq_id : step.finished) speculator_->remove(seq_id);

  SpecStepStats stats;
  stats.propose_seconds = propose(step, scheduler, pool, stats);

  if (is_decode_only(out)) {
    // Decode-only steps feed the speed guard and, without the proposer's time, the cost model's
    // t(n) for n tokens in the step.
    bool speculated = false;
    int64_t emitted = 0;
    int32_t num_tokens = 0;
    for (size_t i = 0; i < out.seqs.size(); ++i) {
      speculated |= out.seqs[i].num_spec_tokens > 0;
      emitted += static_cast<int64_t>(step.sampled[i].size());
      num_tokens += static_cast<int32_t>(out.seqs[i].token_ids.size());
    }
    const double seconds = seconds_since(step.start);
    const auto num_seqs = static_cast<int32_t>(out.seqs.size());
    if (speculated) {
      speculator_->record_step(true, num_seqs, emitted, seconds);
    } else {
      // A step without drafts is a baseline sample of plain decode; drafts proposed in it (a draft
      // catching up before its first proposal) are speculation's cost, not the baseline's.
      speculator_->record_overhead(stats.propose_seconds);
      speculator_->record_step(false, num_seqs, emitted, seconds - stats.propose_seconds);
    }
    speculator_->record_target_step(num_tokens, seconds - stats.propose_seconds);
  }
  return stats;
}

double SpecDecoder::propose(const SpecStep& step, sched::Scheduler& scheduler, ThreadPool& pool,
                            SpecStepStats& stats) {
  const sched::SchedulerOutput& out = *step.out;
  // Verified or gone: drop the q rows of this step's drafts, forget finished sequences.
  for (const sched::ScheduledSeq& s : out.seqs) {
    if (s.needs_logits) draft_probs_.erase(s.seq_id);
  }
  for (int64_t id : out.finished_ids) forget(id);
  for (const sched::RequestUpdate& u : step.updates) {
    if (u.finished()) forget(u.seq_id);
  }

  if (!speculator_->allow_step()) return 0.0;  // the wall-clock guard says speculation does not pay now
  // The guard times decode-only steps (this call included); in a step with prefill chunks it is
  // told this call's time separately (a draft catching up on a just-prefilled prompt).
  const bool decode_only = is_decode_only(out);
  const Clock::time_point start = Clock::now();
  double seconds = 0.0;
  // On every way out: this call's time, returned (the cost model's t(n) leaves it out) and
  // charged to the guard here when the step had prefill chunks.
  struct ProposeTimer {
    Speculator& speculator;
    double& seconds;
    bool charge;
    Clock::time_point start;
    ~ProposeTimer() {
      seconds = seconds_since(start);
      if (charge) speculator.record_overhead(seconds);
    }
  };
  {
    ProposeTimer timer{*speculator_, seconds, !decode_only, start};
    draft(step, scheduler, pool, stats);
  }
  return seconds;
}

void SpecDecoder::draft(const SpecStep& step, sched::Scheduler& scheduler, ThreadPool& pool, SpecStepStats& stats) {
  // Who could speculate, with the caps of their max_tokens and the context, then the plan.
  candidates_.clear();
  candidate_seqs_.clear();
  for (const SpecSequence& seq : step.decoding) {
    const auto num_output = static_cast<int32_t>(seq.output.size());
    const auto num_total = static_cast<int32_t>(seq.prompt.size()) + num_output;
    const int32_t max_tokens = seq.params->max_tokens;
    const int32_t max_k = std::min(max_tokens - num_output - 1, config_.max_model_len - num_total - 1);
    if (max_k <= 0) continue;
    const DraftRequest probe{seq.seq_id, seq.prompt, seq.output, 0, nullptr, seq.cache_extra_key};
    candidates_.push_back({seq.seq_id, max_k, proposer_->num_catch_up(probe), max_tokens - num_output});
    candidate_seqs_.push_back(&seq);
  }
  plan_.resize(candidates_.size());
  speculator_->plan(candidates_, scheduler.num_running(), plan_);

  requests_.clear();
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const int32_t k = plan_[i];
    if (k <= 0) continue;
    const SpecSequence& seq = *candidate_seqs_[i];
    requests_.push_back({seq.seq_id, seq.prompt, seq.output, k, seq.params, seq.cache_extra_key});
  }
  if (requests_.empty()) return;

  // One batched proposal for every speculating sequence of the step.
  if (results_.size() < requests_.size()) results_.resize(requests_.size());
  const std::span<DraftResult> results(results_.data(), requests_.size());
  proposer_->propose_batch(requests_, pool, results);
  const ProposeCost cost = proposer_->last_cost();
  if (cost.num_catch_up_tokens > 0) {
    stats.num_catch_up_tokens += cost.num_catch_up_tokens;
    speculator_->record_catch_up(cost.num_catch_up_tokens, cost.catch_up_seconds);
  }
  speculator_->record_proposer(cost.num_forwards, cost.forward_seconds);
  for (size_t i = 0; i < requests_.size(); ++i) {
    const int64_t seq_id = requests_[i].seq_id;
    DraftResult& r = results[i];
    if (r.tokens.empty()) {
      speculator_->record_miss(seq_id);
      continue;
    }
    if (config_.draft_filter) config_.draft_filter(seq_id, r.tokens);
    if (!scheduler.set_spec_token_ids(seq_id, r.tokens)) continue;
    if (!r.probs.empty()) draft_probs_[seq_id] = std::move(r.probs);
  }
}

}  // namespace tessera::speculative
