#include "spec/speculator.h"

#include <algorithm>
#include <mutex>

namespace tessera::spec {

namespace {
std::mutex g_hooks_mutex;
SpecTestHooks g_hooks;  // guarded by g_hooks_mutex
}  // namespace

void set_spec_test_hooks(const SpecTestHooks& hooks) {
  std::lock_guard<std::mutex> lock(g_hooks_mutex);
  g_hooks = hooks;
}

SpecTestHooks spec_test_hooks() {
  std::lock_guard<std::mutex> lock(g_hooks_mutex);
  return g_hooks;
}

void apply_spec_test_hooks(SpeculatorConfig& config) {
  const SpecTestHooks h = spec_test_hooks();
  if (h.fixed_k) config.adaptive = false;
  config.draft_keep_probability = h.draft_keep_probability;
  config.draft_corruption_seed = h.seed;
}

void Speculator::corrupt_drafts(std::span<int32_t> drafts, int32_t vocab_size) {
  if (config_.draft_keep_probability >= 1.0) return;
  for (int32_t& t : drafts) {
    if (corruption_rng_.uniform() >= config_.draft_keep_probability) t = (t + 1) % vocab_size;
  }
}

int32_t Speculator::num_tokens_to_propose(int64_t seq_id, int32_t num_running) {
  if (config_.num_speculative_tokens <= 0 || num_running > config_.max_batch_for_spec) return 0;
  if (!config_.adaptive) return config_.num_speculative_tokens;
  SeqStats& s = seqs_[seq_id];
  if (s.next_backoff == 0) s.next_backoff = config_.initial_backoff_steps;
  if (s.backoff > 0) {
    --s.backoff;
    return 0;
  }
  const int32_t k = config_.num_speculative_tokens;
  // Full k while drafts are mostly accepted, half as acceptance falls toward the floor.
  if (s.alpha >= 0.6) return k;
  return std::max(1, k / 2);
}

void Speculator::record(int64_t seq_id, int32_t proposed, int32_t accepted) {
  if (proposed <= 0 || !config_.adaptive) return;
  SeqStats& s = seqs_[seq_id];
  s.num_misses = 0;
  const double rate = static_cast<double>(accepted) / proposed;
  s.alpha = (1.0 - config_.ema_weight) * s.alpha + config_.ema_weight * rate;
  if (s.alpha < config_.min_acceptance) {
    s.backoff = s.next_backoff;
    s.next_backoff = std::min(config_.max_backoff_steps, s.next_backoff * 2);
    s.alpha = config_.min_acceptance + 0.1;  // give it a fair retry after the back-off
  } else if (rate >= 0.5) {
    s.next_backoff = config_.initial_backoff_steps;
  }
}

void Speculator::record_miss(int64_t seq_id) {
  if (!config_.adaptive) return;
  SeqStats& s = seqs_[seq_id];
  if (++s.num_misses >= 4) {  // repeated misses: stop searching for a while
    s.backoff = s.next_backoff;
    s.next_backoff = std::min(config_.max_backoff_steps, std::max(1, s.next_backoff) * 2);
    s.num_misses = 0;
  }
}

bool Speculator::worth_catching_up(int32_t num_catch_up, int32_t num_remaining) const {
  if (!config_.adaptive) return true;
  return static_cast<int64_t>(num_catch_up) <=
         static_cast<int64_t>(config_.max_catch_up_per_remaining) * std::max(0, num_remaining);
}

bool Speculator::allow_step() {
  if (!config_.speed_guard) return true;
  if (phase_ == GuardPhase::kOff) {
    if (--off_steps_left_ > 0) return false;
    phase_ = GuardPhase::kProbe;
    phase_steps_ = 0;
    for (Rate& r : base_) r.tokens *= 0.5, r.seconds *= 0.5;  // load drifts: favour new probes
  }
  return phase_ == GuardPhase::kTrial;
}

void Speculator::record_step(bool speculated, int32_t num_seqs, int64_t tokens, double seconds) {
  if (!config_.speed_guard || seconds <= 0 || num_seqs <= 0) return;
  Rate& base = base_[std::min(num_seqs, kMaxGuardSeqs)];
  if (phase_ == GuardPhase::kProbe && !speculated) {
    base.tokens += static_cast<double>(tokens);
    base.seconds += seconds;
    if (++phase_steps_ >= config_.guard_probe_steps) {
      phase_ = GuardPhase::kTrial;
      phase_steps_ = unmeasured_steps_ = 0;
      trial_base_seconds_ = trial_seconds_ = 0;
    }
  } else if (phase_ == GuardPhase::kTrial) {
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
    if (trial_steps_ == 0) trial_steps_ = config_.guard_trial_steps;
    if (++phase_steps_ >= trial_steps_) {
      last_speedup_ = trial_base_seconds_ / trial_seconds_;
      phase_steps_ = 0;
      if (last_speedup_ >= config_.guard_min_speedup) {
        // It pays: re-measure the baseline, then speculate for a longer trial.
        phase_ = GuardPhase::kProbe;
        for (Rate& r : base_) r.tokens *= 0.5, r.seconds *= 0.5;
        next_off_steps_ = 64;
        trial_steps_ = std::min(trial_steps_ * 2, 512);
      } else {
        phase_ = GuardPhase::kOff;
        trial_steps_ = config_.guard_trial_steps;
        off_steps_left_ = next_off_steps_;
        next_off_steps_ = std::min(config_.guard_max_off_steps, next_off_steps_ * 2);
      }
    }
  }
}

void Speculator::record_overhead(double seconds) {
  if (config_.speed_guard && phase_ == GuardPhase::kTrial && seconds > 0) trial_seconds_ += seconds;
}

double Speculator::acceptance(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? 0.0 : it->second.alpha;
}

}  // namespace tessera::spec
