#include "speculative/speculator.h"

#include <algorithm>

#include "util/check.h"

namespace tessera::speculative {

Speculator::SeqStats& Speculator::stats_of(int64_t seq_id) {
  auto [it, inserted] = seqs_.try_emplace(seq_id);
  SeqStats& s = it->second;
  if (inserted) {
    s.accepted = global_alpha();  // one pseudo-test at the engine-wide α
    s.tested = 1.0;
    s.next_backoff = config_.initial_backoff_steps;
  }
  return s;
}

void Speculator::back_off(SeqStats& s) {
  s.backoff = s.next_backoff;
  s.next_backoff = std::min(config_.max_backoff_steps, std::max(1, s.next_backoff) * 2);
}

int32_t Speculator::num_tokens_to_propose(int64_t seq_id, int32_t num_running) {
  if (config_.num_speculative_tokens <= 0 || num_running > config_.max_batch_for_spec) return 0;
  if (!config_.adaptive) return config_.num_speculative_tokens;
  SeqStats& s = stats_of(seq_id);
  if (s.backoff > 0) {
    --s.backoff;
    return 0;
  }
  const int32_t k = config_.num_speculative_tokens;
  // Full k while drafts are mostly accepted, half as acceptance falls toward the floor.
  if (s.alpha >= 0.6) return k;
  return std::max(1, k / 2);
}

void Speculator::plan(std::span<const SpecCandidate> candidates, int32_t num_running, std::span<int32_t> ks) {
  TESSERA_CHECK(ks.size() >= candidates.size(), "{} plan slots for {} candidates", ks.size(), candidates.size());
  std::fill(ks.begin(), ks.end(), 0);
  if (config_.num_speculative_tokens <= 0 || num_running > config_.max_batch_for_spec) return;
  if (!config_.adaptive) {
    for (size_t i = 0; i < candidates.size(); ++i) {
      ks[i] = std::min(config_.num_speculative_tokens, candidates[i].max_k);
    }
    return;
  }
  if (!config_.cost_model) {
    plan_heuristic(candidates, num_running, ks);
    return;
  }
  // Nothing timed yet: a step without speculation measures t(b) first.
  if (!costs_.has_target_times()) return;
  eligible_.clear();
  for (size_t i = 0; i < candidates.size(); ++i) {
    SeqStats& s = stats_of(candidates[i].seq_id);
    bool eligible = false;
    ks[i] = plan_alone(candidates[i], s, num_running, eligible);
    if (eligible) {
      eligible_.push_back({i, s.accepted / s.tested,
                           std::min(config_.num_speculative_tokens, candidates[i].max_k)});
    }
  }
  // Jointly: the m best-α sequences speculate with k drafts each (fewer where capped); the
  // proposer runs k forwards for all of them, the target one step of num_running + Σ drafts.
  std::sort(eligible_.begin(), eligible_.end(), [](const Eligible& a, const Eligible& b) {
    return a.alpha != b.alpha ? a.alpha > b.alpha : a.index < b.index;
  });
  double best = config_.min_predicted_speedup;
  size_t best_m = 0;
  int32_t best_k = 0;
  for (size_t m = 1; m <= eligible_.size(); ++m) {
    plan_alphas_.resize(m);
    plan_drafts_.resize(m);
    for (int32_t k = 1; k <= config_.num_speculative_tokens; ++k) {
      for (size_t j = 0; j < m; ++j) {
        plan_alphas_[j] = eligible_[j].alpha;
        plan_drafts_[j] = std::min(k, eligible_[j].max_k);
      }
      const double speedup = costs_.predict_speedup(num_running, plan_alphas_, plan_drafts_);
      if (speedup > best) {
        best = speedup;
        best_m = m;
        best_k = k;
      }
    }
  }
  for (size_t j = 0; j < best_m; ++j) {
    ks[eligible_[j].index] = std::min(best_k, eligible_[j].max_k);
    seqs_[candidates[eligible_[j].index].seq_id].next_backoff = config_.initial_backoff_steps;
  }
}

int32_t Speculator::plan_alone(const SpecCandidate& c, SeqStats& s, int32_t num_running, bool& eligible) {
  eligible = false;
  if (s.backoff > 0) {
    --s.backoff;
    return 0;
  }
  const int32_t max_k = std::min(config_.num_speculative_tokens, c.max_k);
  if (max_k < 1) return 0;
  const double a = s.accepted / s.tested;
  const SpecCostModel::Choice alone = costs_.best_single(num_running, a, max_k);
  const bool probe = s.probe_due;
  if (!probe && alone.speedup < config_.min_predicted_speedup) {
    // Not even this sequence alone pays: back off, then probe once with a single draft (the
    // cheapest verification) to see whether its α has changed.
    back_off(s);
    s.probe_due = true;
    return 0;
  }
  if (c.num_catch_up > 0) {
    // The batch's time over the sequence's remaining steps, t(b) each without drafts, shrinks by
    // the predicted speed-up S (the batch's: at b > 1 the other sequences wait for the longer
    // step too): the saving R t(b) (1 - 1/S) must exceed the draft's catch-up.
    const int32_t k = probe ? 1 : alone.k;
    const double speedup = probe ? costs_.predict_speedup(num_running, {&a, 1}, {&k, 1}) : alone.speedup;
    const double saved = speedup > 0.0 ? c.num_remaining * costs_.target_step_seconds(num_running) * (1.0 - 1.0 / speedup)
                                       : 0.0;
    const double cost = c.num_catch_up * costs_.catch_up_seconds_per_token();
    if (saved < cost * config_.min_predicted_speedup) return 0;
  }
  if (probe) {
    s.probe_due = false;
    return 1;
  }
  eligible = true;
  return 0;
}

void Speculator::plan_heuristic(std::span<const SpecCandidate> candidates, int32_t num_running,
                                std::span<int32_t> ks) {
  for (size_t i = 0; i < candidates.size(); ++i) {
    const SpecCandidate& c = candidates[i];
    int32_t k = std::min(num_tokens_to_propose(c.seq_id, num_running), c.max_k);
    if (k > 0 && c.num_catch_up > 0 && !worth_catching_up(c.num_catch_up, c.num_remaining)) k = 0;
    ks[i] = std::max(0, k);
  }
}

void Speculator::record(int64_t seq_id, int32_t proposed, int32_t accepted) {
  if (proposed <= 0 || !config_.adaptive) return;
  SeqStats& s = stats_of(seq_id);
  s.num_misses = 0;
  // Per-position acceptance: drafts are tested in order until the first rejection.
  const double tested = accepted + (accepted < proposed ? 1 : 0);
  const double gw = config_.global_alpha_weight;
  global_accepted_ = (1.0 - gw) * global_accepted_ + gw * accepted;
  global_tested_ = (1.0 - gw) * global_tested_ + gw * tested;
  if (config_.cost_model) {
    const double w = config_.ema_weight;
    s.accepted = (1.0 - w) * s.accepted + w * accepted;
    s.tested = (1.0 - w) * s.tested + w * tested;
    return;
  }
  const double rate = static_cast<double>(accepted) / proposed;
  s.alpha = (1.0 - config_.ema_weight) * s.alpha + config_.ema_weight * rate;
  if (s.alpha < config_.min_acceptance) {
    back_off(s);
    s.alpha = config_.min_acceptance + 0.1;  // give it a fair retry after the back-off
  } else if (rate >= 0.5) {
    s.next_backoff = config_.initial_backoff_steps;
  }
}

void Speculator::record_miss(int64_t seq_id) {
  // The cost model prices a miss as what it is, a lookup (the proposer's time): no verification
  // ran, so nothing was lost and the next step may well find a match.
  if (!config_.adaptive || config_.cost_model) return;
  SeqStats& s = stats_of(seq_id);
  if (++s.num_misses >= 4) {  // repeated misses: stop searching for a while
    back_off(s);
    s.num_misses = 0;
  }
}

void Speculator::record_proposer(int32_t num_forwards, double seconds) {
  if (num_forwards > 0) costs_.record_proposer_forward(seconds / num_forwards);
}

bool Speculator::worth_catching_up(int32_t num_catch_up, int32_t num_remaining) const {
  if (!config_.adaptive) return true;
  return static_cast<int64_t>(num_catch_up) <=
         static_cast<int64_t>(config_.max_catch_up_per_remaining) * std::max(0, num_remaining);
}

bool Speculator::allow_step() {
  if (!config_.speed_guard) return true;
  if (phase_ == GuardPhase::kOff) {
    if (off_steps_left_ > 0) {
      --off_steps_left_;
      return false;
    }
    start_trial();  // the steps while off were baseline samples
  }
  return phase_ == GuardPhase::kTrial;
}

void Speculator::start_trial() {
  phase_ = GuardPhase::kTrial;
  phase_steps_ = trial_plain_steps_ = unmeasured_steps_ = 0;
  trial_base_seconds_ = trial_seconds_ = 0;
  if (trial_steps_ == 0) trial_steps_ = config_.guard_trial_steps;
}

void Speculator::record_step(bool speculated, int32_t num_seqs, int64_t tokens, double seconds) {
  if (!config_.speed_guard || seconds <= 0 || num_seqs <= 0) return;
  Rate& base = base_[std::min(num_seqs, kMaxGuardSeqs)];
  if (!speculated) {
    base.tokens = kBaseDecay * base.tokens + static_cast<double>(tokens);
    base.seconds = kBaseDecay * base.seconds + seconds;
    if (phase_ == GuardPhase::kTrial) ++trial_plain_steps_;
    if (phase_ == GuardPhase::kProbe && ++phase_steps_ >= config_.guard_probe_steps) start_trial();
    return;
  }
  if (phase_ != GuardPhase::kTrial) return;  // drafts proposed just before a verdict
  if (base.tokens <= 0) {
    // No baseline at this batch size: after a few such steps, go and measure one.
    if (++unmeasured_steps_ >= config_.guard_probe_steps) {
      phase_ = GuardPhase::kProbe;
      phase_steps_ = 0;
    }
    return;
  }
  trial_base_seconds_ += static_cast<double>(tokens) * base.seconds / base.tokens;
  trial_seconds_ += seconds;
  if (++phase_steps_ < trial_steps_) return;
  last_speedup_ = trial_base_seconds_ / trial_seconds_;
  if (last_speedup_ >= config_.guard_min_speedup) {
    // It pays: a trial twice as long, after a probe unless the baseline was refreshed meanwhile.
    next_off_steps_ = 64;
    trial_steps_ = std::min(trial_steps_ * 2, 512);
    const bool fresh = trial_plain_steps_ >= config_.guard_probe_steps;
    if (fresh) {
      start_trial();
    } else {
      phase_ = GuardPhase::kProbe;
      phase_steps_ = 0;
    }
  } else {
    phase_ = GuardPhase::kOff;
    trial_steps_ = config_.guard_trial_steps;
    off_steps_left_ = next_off_steps_;
    next_off_steps_ = std::min(config_.guard_max_off_steps, next_off_steps_ * 2);
  }
}

void Speculator::record_overhead(double seconds) {
  if (config_.speed_guard && phase_ == GuardPhase::kTrial && seconds > 0) trial_seconds_ += seconds;
}

double Speculator::acceptance(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? 0.0 : it->second.alpha;
}

double Speculator::alpha(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? global_alpha() : it->second.accepted / it->second.tested;
}

}  // namespace tessera::speculative
