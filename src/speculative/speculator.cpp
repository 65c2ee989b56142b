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
  // Plans compare against t(b), b = num_running: until a step of b sequences without drafts was
  // timed, run one (t(b) interpolated from other sizes would misprice the base of every plan).
  if (costs_.measured_target_step_seconds(num_running) <= 0.0) return;
  eligible_.clear();
  for (size_t i = 0; i < candidates.size(); ++i) {
    const SpecCandidate& c = candidates[i];
    SeqStats& s = stats_of(c.seq_id);
    if (s.backoff > 0) {
      --s.backoff;
      continue;
    }
    const int32_t max_k = std::min(config_.num_speculative_tokens, c.max_k);
    if (max_k < 1) continue;
    const double a = s.accepted / s.tested;
    if (s.probe_due) {
      // After a back-off, one single-draft probe (the cheapest verification) refreshes α, if the
      // draft's catch-up pays back at the speed-up that one draft would give alone — and only
      // when some α could make speculating pay: where even α = 1 does not (a draft forward that
      // costs more than the tokens it could add to a wide step), a probe only costs a forward.
      if (costs_.best_single(num_running, 1.0, max_k).speedup < config_.min_predicted_speedup) {
        back_off(s);
        continue;
      }
      const int32_t one = 1;
      if (!catch_up_pays(c, num_running, costs_.predict_speedup(num_running, {&a, 1}, {&one, 1}), 1)) continue;
      s.probe_due = false;
      ks[i] = 1;
      if (num_verifications_ == 0 && c.num_catch_up > 0) explorer_ = c.seq_id;
      continue;
    }
    eligible_.push_back({i, a, max_k, true});
  }
  // Jointly, per sequence: the k_i of the best predicted speed-up S of the whole step (the
  // proposer runs max k_i forwards for all of them, the target one step of num_running + Σ k_i
  // tokens). A sequence whose draft must first catch up joins only if its share of the batch's
  // saving pays for that (catch_up_pays); without it the step is planned again.
  for (int pass = 0; pass < 2; ++pass) {
    const double speedup = plan_jointly(num_running);
    int32_t num_speculating = 0;
    for (const Eligible& e : eligible_) num_speculating += e.in && e.k > 0;
    bool dropped = false;
    for (Eligible& e : eligible_) {
      if (e.in && e.k > 0 && !catch_up_pays(candidates[e.index], num_running, speedup, num_speculating)) {
        e.in = false;
        dropped = true;
      }
    }
    if (!dropped) break;
  }
  for (Eligible& e : eligible_) {
    SeqStats& s = seqs_[candidates[e.index].seq_id];
    if (!e.in) continue;  // its catch-up does not pay this step: no verdict on its α
    if (e.k > 0) {
      ks[e.index] = e.k;
      if (num_verifications_ == 0 && candidates[e.index].num_catch_up > 0) explorer_ = candidates[e.index].seq_id;
      s.next_backoff = config_.initial_backoff_steps;
    } else {
      // Left out of the best plan: back off, then probe once with a single draft.
      back_off(s);
      s.probe_due = true;
    }
  }
}

double Speculator::plan_jointly(int32_t num_running) {
  plan_alphas_.clear();
  plan_max_ks_.clear();
  for (const Eligible& e : eligible_) {
    plan_alphas_.push_back(e.alpha);
    plan_max_ks_.push_back(e.in ? e.max_k : 0);
  }
  plan_drafts_.resize(eligible_.size());
  const double speedup =
      costs_.best_plan(num_running, plan_alphas_, plan_max_ks_, config_.min_predicted_speedup, plan_drafts_);
  for (size_t j = 0; j < eligible_.size(); ++j) eligible_[j].k = plan_drafts_[j];
  return speedup;
}

bool Speculator::catch_up_pays(const SpecCandidate& c, int32_t num_running, double speedup,
                               int32_t num_speculating) const {
  if (c.num_catch_up <= 0) return true;
  // The batch's time over the sequence's remaining steps, t(b) each without drafts, shrinks by
  // the step's predicted speed-up S: R t(b) (1 - 1/S), of which this sequence's share is 1/m of
  // the m speculating; it must exceed the draft's catch-up, c t_c (with the planning margin).
  const int32_t b = std::max(1, num_running);
  const double plain = c.num_remaining * costs_.target_step_seconds(b);  // R t(b)
  const double cost = c.num_catch_up * costs_.catch_up_seconds_per_token() * config_.min_predicted_speedup;
  // Before any verification α is only the prior, and without a first catch-up no α is ever
  // measured: a sequence may then explore when its catch-up costs at most a share of its plain
  // decode time (what is learnt, α, t_d and t_c, serves every later request).
  // One sequence explores (several catching up at once would multiply the price of the lesson).
  if (num_verifications_ == 0 && (explorer_ < 0 || explorer_ == c.seq_id) &&
      cost <= config_.explore_catch_up_share * plain) {
    return true;
  }
  const double saved = speedup > 1.0 ? plain * (1.0 - 1.0 / speedup) / std::max(1, num_speculating) : 0.0;
  return saved >= cost;
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
  ++num_verifications_;
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
