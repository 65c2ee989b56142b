// Fast sampler. The readable twin is sampler_ref.cpp; tests require both to produce bitwise the
// same distributions and tokens, so the floating-point operations below (division by T,
// exp(l - l_max) in float, sums in double in a fixed order) mirror the reference exactly. Only
// the way candidates are found differs: nth_element + incremental partial sorts instead of one
// full sort of the vocabulary.
#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "util/check.h"

namespace tessera::sample {
namespace {

// First partial-sort chunk for top-p without top-k; grows 4x per round. LLM distributions are
// peaked, so a top_p of 0.9-0.95 is usually reached within the first few hundred tokens and the
// full 49k-entry sort is never paid.
constexpr int32_t kTopPFirstChunk = 64;

// Strict total order: larger value first, then lower id. Makes every sort result unique, so the
// fast path and the full sort of the reference agree on ties.
struct DescByValue {
  const float* values;
  bool operator()(int32_t a, int32_t b) const {
    return values[a] > values[b] || (values[a] == values[b] && a < b);
  }
};

}  // namespace

bool has_penalties(const SamplingParams& params) {
  return params.repetition_penalty != 1.0f || params.presence_penalty != 0.0f ||
         params.frequency_penalty != 0.0f;
}

Status validate_sampling_params(const SamplingParams& p, int32_t vocab_size) {
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature)) {
    return make_error(ErrorCode::kInvalidArgument, "temperature must be >= 0, got {}",
                      p.temperature);
  }
  if (p.top_k < -1) {
    return make_error(ErrorCode::kInvalidArgument, "top_k must be -1, 0 or positive, got {}",
                      p.top_k);
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return make_error(ErrorCode::kInvalidArgument, "top_p must be in (0, 1], got {}", p.top_p);
  }
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) {
    return make_error(ErrorCode::kInvalidArgument, "min_p must be in [0, 1], got {}", p.min_p);
  }
  if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty)) {
    return make_error(ErrorCode::kInvalidArgument, "repetition_penalty must be > 0, got {}",
                      p.repetition_penalty);
  }
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f)) {
    return make_error(ErrorCode::kInvalidArgument, "presence_penalty must be in [-2, 2], got {}",
                      p.presence_penalty);
  }
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "frequency_penalty must be in [-2, 2], got {}", p.frequency_penalty);
  }
  if (p.logprobs.has_value() && (*p.logprobs < 0 || *p.logprobs > vocab_size)) {
    return make_error(ErrorCode::kInvalidArgument, "logprobs must be in [0, {}], got {}",
                      vocab_size, *p.logprobs);
  }
  return ok_status();
}

int32_t argmax_lowest_id(const float* row, int32_t n) {
  // Pass 1 is a plain max reduction (vectorizes); pass 2 finds its first occurrence.
  float best = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < n; ++i) best = row[i] > best ? row[i] : best;
  for (int32_t i = 0; i < n; ++i) {
    if (row[i] == best) return i;
  }
  return 0;  // all NaN (or empty): a defined answer rather than garbage
}

int32_t pick_by_weight(const float* weights, int32_t n, double total, double u) {
  const double target = u * total;
  double cum = 0.0;
  int32_t last_positive = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (weights[i] <= 0.0f) continue;
    cum += weights[i];
    last_positive = i;
    if (cum > target) return i;
  }
  return last_positive;
}

SamplerWorkspace::SamplerWorkspace(int32_t vocab_size)
    : logits(vocab_size),
      weights(vocab_size),
      indices(vocab_size),
      touched(vocab_size),
      counts(vocab_size, 0),
      mark(vocab_size, 0) {}

Sampler::Sampler(int32_t vocab_size) : vocab_size_(vocab_size), ws_(vocab_size) {
  TESSERA_CHECK(vocab_size > 0, "vocab_size must be positive, got {}", vocab_size);
}

const float* Sampler::penalized_row(std::span<const float> logits, const SamplingParams& params,
                                    const SeenTokens& seen) {
  TESSERA_CHECK(static_cast<int32_t>(logits.size()) == vocab_size_,
                "logits row has {} entries, vocab is {}", logits.size(), vocab_size_);
  const bool repetition = params.repetition_penalty != 1.0f;
  const bool output_penalty = params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f;
  const bool has_output = !seen.output.empty() || !seen.pending.empty();
  if (!(repetition && (!seen.prompt.empty() || has_output)) && !(output_penalty && has_output)) {
    return logits.data();
  }
  float* row = ws_.logits.data();
  std::copy(logits.begin(), logits.end(), row);

  int32_t num_touched = 0;
  auto touch = [&](int32_t t) {
    TESSERA_CHECK(t >= 0 && t < vocab_size_, "seen token {} outside vocab {}", t, vocab_size_);
    if (ws_.mark[t] == 0) {
      ws_.mark[t] = 1;
      ws_.touched[num_touched++] = t;
    }
  };
  if (repetition) {
    for (int32_t t : seen.prompt) touch(t);
  }
  for (auto part : {seen.output, seen.pending}) {
    for (int32_t t : part) {
      touch(t);
      ws_.counts[t] += 1;
    }
  }
  const float r = params.repetition_penalty;
  for (int32_t j = 0; j < num_touched; ++j) {
    const int32_t t = ws_.touched[j];
    float x = row[t];
    if (repetition) x = x > 0.0f ? x / r : x * r;
    const int32_t c = ws_.counts[t];
    if (c > 0) {
      x -= params.frequency_penalty * static_cast<float>(c);
      x -= params.presence_penalty;
    }
    row[t] = x;
    ws_.mark[t] = 0;
    ws_.counts[t] = 0;
  }
  return row;
}

Sampler::Survivors Sampler::prepare(std::span<const float> logits, const SamplingParams& params,
                                    const SeenTokens& seen) {
  const int32_t n = vocab_size_;
  const float* row = penalized_row(logits, params, seen);
  float* l = ws_.logits.data();
  float* w = ws_.weights.data();
  int32_t* idx = ws_.indices.data();
  const float temperature = params.temperature;
  for (int32_t i = 0; i < n; ++i) l[i] = row[i] / temperature;  // in place when row == l
  float l_max = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < n; ++i) l_max = l[i] > l_max ? l[i] : l_max;
  TESSERA_CHECK(std::isfinite(l_max), "logits row has no finite maximum");

  const DescByValue desc{l};
  const bool top_k_on = params.top_k > 0 && params.top_k < n;
  const bool top_p_on = params.top_p < 1.0f;
  const bool min_p_on = params.min_p > 0.0f;

  if (!top_k_on && !top_p_on && !min_p_on) {  // dense: every token survives
    double total = 0.0;
    for (int32_t i = 0; i < n; ++i) {
      w[i] = std::exp(l[i] - l_max);
      total += w[i];
    }
    std::iota(idx, idx + n, 0);
    return {n, total};
  }

  // Steps 3-4 leave candidates in idx[0, num), in (l desc, id asc) order when top_p_on.
  int32_t num = n;
  std::iota(idx, idx + n, 0);
  if (top_k_on) {
    num = params.top_k;
    std::nth_element(idx, idx + num - 1, idx + n, desc);
    for (int32_t j = 0; j < num; ++j) w[idx[j]] = std::exp(l[idx[j]] - l_max);
  } else {
    for (int32_t i = 0; i < n; ++i) w[i] = std::exp(l[i] - l_max);
  }

  if (top_p_on) {
    double z = 0.0;  // softmax denominator over the top-k survivors, summed in id order
    if (top_k_on) {
      std::sort(idx, idx + num);
      for (int32_t j = 0; j < num; ++j) z += w[idx[j]];
      std::sort(idx, idx + num, desc);
    } else {
      for (int32_t i = 0; i < n; ++i) z += w[i];
    }
    const double top_p = params.top_p;
    double cum = 0.0;  // mass strictly before the current token
    int32_t kept = -1;
    int32_t num_sorted = top_k_on ? num : 0;
    int32_t chunk = kTopPFirstChunk;
    for (int32_t j = 0; kept < 0; ++j) {
      if (j == num) {
        kept = num;
        break;
      }
      if (j == num_sorted) {  // extend the sorted prefix (only without top-k)
        const int32_t end = std::min(num, num_sorted + chunk);
        if (end < num) std::nth_element(idx + num_sorted, idx + end, idx + num, desc);
        std::sort(idx + num_sorted, idx + end, desc);
        num_sorted = end;
        chunk *= 4;
      }
      if (cum < top_p) {
        cum += static_cast<double>(w[idx[j]]) / z;
      } else {
        kept = j;
      }
    }
    num = kept;
  }

  if (min_p_on) {
    const float min_p = params.min_p;
    int32_t out = 0;
    for (int32_t j = 0; j < num; ++j) {
      if (!(w[idx[j]] < min_p)) idx[out++] = idx[j];
    }
    num = out;
  }

  if (num == n) {
    std::iota(idx, idx + n, 0);  // nothing dropped: back to id order without a sort
  } else {
    std::sort(idx, idx + num);
  }
  double total = 0.0;
  for (int32_t j = 0; j < num; ++j) total += w[idx[j]];
  return {num, total};
}

int32_t Sampler::argmax(std::span<const float> logits, const SamplingParams& params,
                        const SeenTokens& seen) {
  return argmax_lowest_id(penalized_row(logits, params, seen), vocab_size_);
}

int32_t Sampler::sample(std::span<const float> logits, const SamplingParams& params,
                        const SeenTokens& seen, Rng& rng, SampleOutput* out) {
  int32_t token = 0;
  if (is_greedy(params)) {
    token = argmax(logits, params, seen);
  } else {
    const Survivors s = prepare(logits, params, seen);
    TESSERA_CHECK(s.num > 0 && s.total > 0.0, "no token survived sampling filters");
    const double target = rng.uniform() * s.total;
    const int32_t* idx = ws_.indices.data();
    const float* w = ws_.weights.data();
    double cum = 0.0;
    token = -1;
    int32_t last_positive = idx[0];
    for (int32_t j = 0; j < s.num; ++j) {
      if (w[idx[j]] <= 0.0f) continue;
      cum += w[idx[j]];
      last_positive = idx[j];
      if (cum > target) {
        token = idx[j];
        break;
      }
    }
    if (token < 0) token = last_positive;
  }
  if (out != nullptr) {
    out->token_id = token;
    out->top_logprobs.clear();
    if (params.logprobs.has_value()) fill_logprobs(logits, *params.logprobs, out);
  }
  return token;
}

void Sampler::fill_logprobs(std::span<const float> logits, int32_t num_top, SampleOutput* out) {
  const int32_t n = vocab_size_;
  const float* x = logits.data();
  float x_max = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < n; ++i) x_max = x[i] > x_max ? x[i] : x_max;
  double sum = 0.0;
  for (int32_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - x_max);
  const double lse = x_max + std::log(sum);
  const float chosen = x[out->token_id];
  out->logprob = static_cast<float>(chosen - lse);
  int32_t rank = 0;
  for (int32_t i = 0; i < n; ++i) rank += x[i] >= chosen ? 1 : 0;
  out->rank = rank;

  num_top = std::min(num_top, n);
  if (num_top <= 0) return;
  int32_t* idx = ws_.indices.data();
  std::iota(idx, idx + n, 0);
  const DescByValue desc{x};
  if (num_top < n) std::nth_element(idx, idx + num_top - 1, idx + n, desc);
  std::sort(idx, idx + num_top, desc);
  for (int32_t j = 0; j < num_top; ++j) {
    out->top_logprobs.push_back({idx[j], static_cast<float>(x[idx[j]] - lse)});
  }
}

void Sampler::compute_probs(std::span<const float> logits, const SamplingParams& params,
                            const SeenTokens& seen, std::span<float> probs) {
  TESSERA_CHECK(static_cast<int32_t>(probs.size()) == vocab_size_, "probs has {} entries, vocab {}",
                probs.size(), vocab_size_);
  std::fill(probs.begin(), probs.end(), 0.0f);
  if (is_greedy(params)) {
    probs[argmax(logits, params, seen)] = 1.0f;
    return;
  }
  const Survivors s = prepare(logits, params, seen);
  TESSERA_CHECK(s.num > 0 && s.total > 0.0, "no token survived sampling filters");
  for (int32_t j = 0; j < s.num; ++j) {
    const int32_t t = ws_.indices[j];
    probs[t] = static_cast<float>(ws_.weights[t] / s.total);
  }
}

std::vector<float> Sampler::compute_probs(std::span<const float> logits,
                                          const SamplingParams& params, const SeenTokens& seen) {
  std::vector<float> probs(vocab_size_);
  compute_probs(logits, params, seen, probs);
  return probs;
}

}  // namespace tessera::sample
