// SpecCostModel: see spec_cost_model.h.
#include "speculative/spec_cost_model.h"

#include <algorithm>
#include <cmath>

namespace tessera::speculative {

double expected_tokens(double alpha, int32_t k) {
  if (k <= 0 || alpha <= 0.0) return 1.0;
  if (alpha >= 1.0) return static_cast<double>(k + 1);
  return (1.0 - std::pow(alpha, k + 1)) / (1.0 - alpha);
}

void SpecCostModel::record_target_step(int32_t num_tokens, double seconds) {
  if (num_tokens < 1 || num_tokens > kMaxStepTokens || !(seconds > 0.0)) return;
  Ema& e = target_[static_cast<size_t>(num_tokens)];
  if (!e.set) ++num_measured_;
  e.add(seconds, config_.ema_weight);
}

void SpecCostModel::record_proposer_forward(double seconds) {
  if (seconds >= 0.0) proposer_forward_.add(seconds, config_.ema_weight);
}

void SpecCostModel::record_catch_up(int32_t num_tokens, double seconds) {
  if (num_tokens > 0 && seconds > 0.0) catch_up_per_token_.add(seconds / num_tokens, config_.ema_weight);
}

double SpecCostModel::measured_target_step_seconds(int32_t num_tokens) const {
  if (num_tokens < 1 || num_tokens > kMaxStepTokens) return 0.0;
  const Ema& e = target_[static_cast<size_t>(num_tokens)];
  return e.set ? e.value : 0.0;
}

double SpecCostModel::target_step_seconds(int32_t n) const {
  if (num_measured_ == 0 || n < 1) return 0.0;
  if (const double t = measured_target_step_seconds(n); t > 0.0) return t;
  // Nearest measured sizes below (lo, and the one below it, lo2) and above (hi).
  int32_t lo = 0, lo2 = 0, hi = 0;
  for (int32_t m = 1; m <= kMaxStepTokens; ++m) {
    if (!target_[static_cast<size_t>(m)].set) continue;
    if (m < n) {
      lo2 = lo;
      lo = m;
    } else if (hi == 0) {
      hi = m;
    }
  }
  auto t = [&](int32_t m) { return target_[static_cast<size_t>(m)].value; };
  if (lo == 0) return t(hi);  // smaller than anything measured: no cheaper than the smallest
  if (hi != 0) return t(lo) + (t(hi) - t(lo)) * (n - lo) / static_cast<double>(hi - lo);
  const double slope = lo2 != 0 ? std::max(0.0, (t(lo) - t(lo2)) / (lo - lo2))
                                : config_.prior_token_cost * t(lo) / lo;
  return t(lo) + slope * (n - lo);
}

double SpecCostModel::proposer_forward_seconds() const {
  if (proposer_forward_.set) return proposer_forward_.value;
  return config_.draft_cost_prior * target_step_seconds(1);
}

double SpecCostModel::catch_up_seconds_per_token() const {
  if (catch_up_per_token_.set) return catch_up_per_token_.value;
  return config_.catch_up_cost_prior * proposer_forward_seconds();
}

double SpecCostModel::predict_speedup(int32_t num_seqs, std::span<const double> alphas,
                                      std::span<const int32_t> drafts) const {
  const double base = target_step_seconds(num_seqs);
  if (base <= 0.0 || num_seqs < 1) return 0.0;
  double tokens = num_seqs;
  int32_t num_tokens = num_seqs, max_k = 0;
  for (size_t i = 0; i < drafts.size() && i < alphas.size(); ++i) {
    tokens += expected_tokens(alphas[i], drafts[i]) - 1.0;
    num_tokens += std::max(0, drafts[i]);
    max_k = std::max(max_k, drafts[i]);
  }
  if (max_k == 0) return 1.0;
  const double time = max_k * proposer_forward_seconds() + target_step_seconds(num_tokens);
  return (tokens / time) / (num_seqs / base);
}

SpecCostModel::Choice SpecCostModel::best_single(int32_t num_seqs, double alpha, int32_t max_k) const {
  Choice best;
  for (int32_t k = 1; k <= max_k; ++k) {
    const double s = predict_speedup(num_seqs, {&alpha, 1}, {&k, 1});
    if (s > best.speedup) best = {k, s};
  }
  return best;
}

double SpecCostModel::best_plan(int32_t num_seqs, std::span<const double> alphas, std::span<const int32_t> max_ks,
                                double min_speedup, std::span<int32_t> ks) const {
  const size_t n = std::min(alphas.size(), max_ks.size());
  std::fill(ks.begin(), ks.begin() + static_cast<std::ptrdiff_t>(std::min(n, ks.size())), 0);
  const double base = target_step_seconds(num_seqs);
  if (base <= 0.0 || num_seqs < 1 || n == 0) return 1.0;
  // Every draft's marginal tokens, largest first; within a sequence α^j falls with j, so (ties
  // by j) any prefix gives each sequence its first drafts, k_i = how many of its entries it holds.
  gains_.clear();
  int32_t depth = 0;
  for (size_t i = 0; i < n; ++i) {
    const double a = std::clamp(alphas[i], 0.0, 1.0);
    double g = 1.0;
    for (int32_t j = 1; j <= max_ks[i]; ++j) {
      g *= a;
      gains_.push_back({g, static_cast<int32_t>(i), j});
    }
    depth = std::max(depth, max_ks[i]);
  }
  std::stable_sort(gains_.begin(), gains_.end(), [](const Gain& x, const Gain& y) {
    return x.tokens != y.tokens ? x.tokens > y.tokens : x.j < y.j;
  });
  const double t_d = proposer_forward_seconds();
  double best = min_speedup;
  int32_t best_depth = 0, best_count = 0;
  for (int32_t d = 1; d <= depth; ++d) {
    double tokens = num_seqs;
    int32_t count = 0;
    for (const Gain& g : gains_) {
      if (g.j > d) continue;
      tokens += g.tokens;
      ++count;
      // The deepest sequence holds d drafts once any j = d entry is in (the proposer runs d forwards).
      const double time = d * t_d + target_step_seconds(num_seqs + count);
      const double speedup = (tokens / time) / (num_seqs / base);
      if (speedup > best) {
        best = speedup;
        best_depth = d;
        best_count = count;
      }
    }
  }
  if (best_count == 0) return 1.0;
  int32_t taken = 0;
  for (const Gain& g : gains_) {
    if (taken == best_count) break;
    if (g.j > best_depth) continue;
    if (static_cast<size_t>(g.seq) < ks.size()) ks[static_cast<size_t>(g.seq)] = std::max(ks[static_cast<size_t>(g.seq)], g.j);
    ++taken;
  }
  return best;
}

}  // namespace tessera::speculative
