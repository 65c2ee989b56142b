// Reference sampler: see sampler_ref.h. Written for reading, not for speed.
#include "sample/sampler_ref.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "util/check.h"

namespace tessera::sample {
namespace {

// Weights exp(l - l_max) of the surviving tokens, 0 for masked ones, and their total (double,
// summed in id order). This is the unnormalized final distribution.
struct DenseWeights {
  std::vector<float> w;  // [vocab]
  double total = 0.0;
};

DenseWeights final_weights_ref(std::span<const float> logits, const SamplingParams& params,
                               const SeenTokens& seen) {
  const int32_t n = static_cast<int32_t>(logits.size());
  // 1. penalties
  std::vector<float> l = apply_penalties_ref(logits, params, seen);
  // 2. temperature
  for (float& x : l) x = x / params.temperature;
  float l_max = *std::max_element(l.begin(), l.end());
  std::vector<float> w(n);
  for (int32_t i = 0; i < n; ++i) w[i] = std::exp(l[i] - l_max);

  // Rank every token: larger scaled logit first, lower id first among equals.
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
  std::vector<bool> keep(n, true);

  // 3. top-k: everything from rank top_k on is dropped.
  if (params.top_k > 0 && params.top_k < n) {
    for (int32_t r = params.top_k; r < n; ++r) keep[order[r]] = false;
  }
  // 4. top-p: probabilities over the top-k survivors; keep while the mass before is < top_p.
  if (params.top_p < 1.0f) {
    double z = 0.0;
    for (int32_t i = 0; i < n; ++i) {
      if (keep[i]) z += w[i];
    }
    double before = 0.0;
    for (int32_t r = 0; r < n; ++r) {
      const int32_t t = order[r];
      if (!keep[t]) continue;
      if (before < static_cast<double>(params.top_p)) {
        before += static_cast<double>(w[t]) / z;
      } else {
        keep[t] = false;
      }
    }
  }
  // 5. min-p: p / p_max = exp(l - l_max) = w.
  if (params.min_p > 0.0f) {
    for (int32_t i = 0; i < n; ++i) {
      if (w[i] < params.min_p) keep[i] = false;
    }
  }

  DenseWeights out{std::vector<float>(n, 0.0f), 0.0};
  for (int32_t i = 0; i < n; ++i) {
    if (keep[i]) {
      out.w[i] = w[i];
      out.total += w[i];
    }
  }
  return out;
}

}  // namespace

std::vector<float> apply_penalties_ref(std::span<const float> logits, const SamplingParams& params,
                                       const SeenTokens& seen) {
  const int32_t n = static_cast<int32_t>(logits.size());
  std::vector<float> l(logits.begin(), logits.end());
  std::vector<bool> seen_anywhere(n, false);  // prompt ∪ output ∪ pending
  std::vector<int32_t> output_count(n, 0);    // occurrences in output + pending
  for (int32_t t : seen.prompt) seen_anywhere[t] = true;
  for (int32_t t : seen.output) {
    seen_anywhere[t] = true;
    output_count[t] += 1;
  }
  for (int32_t t : seen.pending) {
    seen_anywhere[t] = true;
    output_count[t] += 1;
  }
  for (int32_t t = 0; t < n; ++t) {
    if (params.repetition_penalty != 1.0f && seen_anywhere[t]) {
      l[t] = l[t] > 0.0f ? l[t] / params.repetition_penalty : l[t] * params.repetition_penalty;
    }
    if (output_count[t] > 0 &&
        (params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f)) {
      l[t] -= params.frequency_penalty * static_cast<float>(output_count[t]);
      l[t] -= params.presence_penalty;
    }
  }
  return l;
}

std::vector<float> compute_probs_ref(std::span<const float> logits, const SamplingParams& params,
                                     const SeenTokens& seen) {
  const int32_t n = static_cast<int32_t>(logits.size());
  std::vector<float> probs(n, 0.0f);
  if (is_greedy(params)) {
    std::vector<float> l = apply_penalties_ref(logits, params, seen);
    probs[argmax_lowest_id(l.data(), n)] = 1.0f;
    return probs;
  }
  DenseWeights dw = final_weights_ref(logits, params, seen);
  for (int32_t i = 0; i < n; ++i) {
    if (dw.w[i] > 0.0f) probs[i] = static_cast<float>(dw.w[i] / dw.total);
  }
  return probs;
}

int32_t sample_ref(std::span<const float> logits, const SamplingParams& params,
                   const SeenTokens& seen, Rng& rng) {
  const int32_t n = static_cast<int32_t>(logits.size());
  if (is_greedy(params)) {
    std::vector<float> l = apply_penalties_ref(logits, params, seen);
    return argmax_lowest_id(l.data(), n);
  }
  DenseWeights dw = final_weights_ref(logits, params, seen);
  TESSERA_CHECK(dw.total > 0.0, "no token survived sampling filters");
  return pick_by_weight(dw.w.data(), n, dw.total, rng.uniform());
}

std::vector<double> raw_logprobs_ref(std::span<const float> logits) {
  double x_max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float x : logits) sum += std::exp(x - x_max);
  std::vector<double> out;
  for (float x : logits) out.push_back(x - (x_max + std::log(sum)));
  return out;
}

}  // namespace tessera::sample
