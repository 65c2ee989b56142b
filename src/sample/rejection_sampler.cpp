// Rejection sampler: see rejection_sampler.h for the glossary and the draw accounting.
#include "sample/rejection_sampler.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "util/check.h"

namespace tessera::sample {
namespace {


// Draws from normalize(max(0, p - q)) with one uniform; q is a dense row, or null for a one-hot
// at `draft_token` (then the residual is p with the draft token removed). When the residual is
// empty (p <= q everywhere up to rounding, so a rejection had ~zero probability), falls back to p.
int32_t sample_residual(const float* p, const float* q, int32_t draft_token, int32_t n,
                        double u) {
  auto residual = [&](int32_t i) -> float {
    const float qi = q != nullptr ? q[i] : (i == draft_token ? 1.0f : 0.0f);
    return std::max(0.0f, p[i] - qi);
  };
  double total = 0.0;
  for (int32_t i = 0; i < n; ++i) total += residual(i);
  if (!(total > 0.0)) {
    double total_p = 0.0;
    for (int32_t i = 0; i < n; ++i) total_p += p[i];
    return pick_by_weight(p, n, total_p, u);
  }
  const double target = u * total;
  double cum = 0.0;
  int32_t last_positive = 0;
  for (int32_t i = 0; i < n; ++i) {
    const float r = residual(i);
    if (r <= 0.0f) continue;
    cum += r;
    last_positive = i;
    if (cum > target) return i;
  }
  return last_positive;
}

int32_t sample_row(const float* p, int32_t n, double u) {
  double total = 0.0;
  for (int32_t i = 0; i < n; ++i) total += p[i];
  return pick_by_weight(p, n, total, u);
}

}  // namespace

RejectionSampler::RejectionSampler(int32_t vocab_size, int32_t max_num_spec_tokens, RejectionFault fault)
    : vocab_size_(vocab_size),
      fault_(fault),
      max_num_spec_tokens_(max_num_spec_tokens),
      target_probs_(static_cast<size_t>(max_num_spec_tokens + 1) * vocab_size) {
  TESSERA_CHECK(vocab_size > 0 && max_num_spec_tokens >= 0, "bad sizes {} {}", vocab_size,
                max_num_spec_tokens);
}

RejectionResult RejectionSampler::verify_greedy(std::span<const int32_t> draft_token_ids,
                                                std::span<const int32_t> target_argmax,
                                                std::span<int32_t> out_tokens) {
  const size_t k = draft_token_ids.size();
  TESSERA_CHECK(target_argmax.size() == k + 1, "need k+1 = {} target rows, got {}", k + 1,
                target_argmax.size());
  TESSERA_CHECK(out_tokens.size() >= k + 1, "out_tokens holds {}, need {}", out_tokens.size(),
                k + 1);
  int32_t a = 0;
  while (static_cast<size_t>(a) < k && draft_token_ids[a] == target_argmax[a]) {
    out_tokens[a] = draft_token_ids[a];
    ++a;
  }
  out_tokens[a] = target_argmax[a];  // recovered (a < k) or bonus (a == k)
  return {a};
}

RejectionResult RejectionSampler::verify(std::span<const int32_t> draft_token_ids,
                                         std::span<const float> draft_probs,
                                         std::span<const float> target_probs, int32_t vocab_size,
                                         Rng& rng, std::span<int32_t> out_tokens, RejectionFault fault) {
  const size_t k = draft_token_ids.size();
  const size_t n = static_cast<size_t>(vocab_size);
  TESSERA_CHECK(draft_probs.empty() || draft_probs.size() == k * n,
                "draft_probs has {} floats, want 0 or k*vocab = {}", draft_probs.size(), k * n);
  TESSERA_CHECK(target_probs.size() == (k + 1) * n, "target_probs has {} floats, want {}",
                target_probs.size(), (k + 1) * n);
  TESSERA_CHECK(out_tokens.size() >= k + 1, "out_tokens holds {}, need {}", out_tokens.size(),
                k + 1);
  const bool one_hot_q = draft_probs.empty();
  for (size_t i = 0; i < k; ++i) {
    const int32_t x = draft_token_ids[i];
    TESSERA_CHECK(x >= 0 && x < vocab_size, "draft token {} outside vocab {}", x, vocab_size);
    const float* p = target_probs.data() + i * n;
    const float* q = one_hot_q ? nullptr : draft_probs.data() + i * n;
    const float qx = one_hot_q ? 1.0f : q[x];
    // Accept with probability min(1, p/q): u * q < p with u in [0, 1). A draft token its own
    // distribution gives zero mass is never accepted (it cannot come from q).
    const double u = rng.uniform();
    if ((qx > 0.0f && u * qx < p[x]) || fault == RejectionFault::kAcceptAll) {
      out_tokens[i] = x;
      continue;
    }
    out_tokens[i] = fault == RejectionFault::kResampleFromP
                        ? sample_row(p, vocab_size, rng.uniform())
                        : sample_residual(p, q, x, vocab_size, rng.uniform());
    return {static_cast<int32_t>(i)};
  }
  out_tokens[k] = sample_row(target_probs.data() + k * n, vocab_size, rng.uniform());
  return {static_cast<int32_t>(k)};
}

RejectionResult RejectionSampler::verify_logits(Sampler& sampler,
                                                std::span<const int32_t> draft_token_ids,
                                                std::span<const float> draft_probs,
                                                std::span<const float> target_logits,
                                                const SamplingParams& params,
                                                const SeenTokens& seen, Rng& rng,
                                                std::span<int32_t> out_tokens) {
  const size_t k = draft_token_ids.size();
  const size_t n = static_cast<size_t>(vocab_size_);
  TESSERA_CHECK(sampler.vocab_size() == vocab_size_, "sampler vocab {} != {}",
                sampler.vocab_size(), vocab_size_);
  TESSERA_CHECK(static_cast<int32_t>(k) <= max_num_spec_tokens_, "k = {} > max {}", k,
                max_num_spec_tokens_);
  TESSERA_CHECK(target_logits.size() == (k + 1) * n, "target_logits has {} floats, want {}",
                target_logits.size(), (k + 1) * n);
  TESSERA_CHECK(seen.pending.empty(), "seen.pending is filled from the drafts here");
  if (is_greedy(params)) {
    // Rows are scored lazily: nothing after the first mismatch is looked at.
    TESSERA_CHECK(out_tokens.size() >= k + 1, "out_tokens holds {}, need {}", out_tokens.size(),
                  k + 1);
    for (size_t i = 0; i <= k; ++i) {
      SeenTokens row_seen = seen;
      row_seen.pending = draft_token_ids.first(i);
      const int32_t best = sampler.argmax(target_logits.subspan(i * n, n), params, row_seen);
      out_tokens[i] = best;
      if (i == k || draft_token_ids[i] != best) return {static_cast<int32_t>(i)};
    }
  }
  for (size_t i = 0; i <= k; ++i) {
    SeenTokens row_seen = seen;
    row_seen.pending = draft_token_ids.first(i);
    sampler.compute_probs(target_logits.subspan(i * n, n), params, row_seen,
                          std::span<float>(target_probs_).subspan(i * n, n));
  }
  return verify(draft_token_ids, draft_probs,
                std::span<const float>(target_probs_).first((k + 1) * n), vocab_size_, rng,
                out_tokens, fault_);
}


double expected_tokens_per_step(double alpha, int32_t k) {
  if (alpha >= 1.0) return static_cast<double>(k + 1);
  return (1.0 - std::pow(alpha, k + 1)) / (1.0 - alpha);
}

}  // namespace tessera::sample
