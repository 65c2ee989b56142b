// Fast sampler. The readable twin is sampler_ref.cpp; tests require both to produce bitwise the
// same distributions and tokens, so the floating-point operations below (division by T,
// exp(l - l_max) in float, sums in double in a fixed order) mirror the reference exactly. Only
// the way candidates are found differs: a bounded heap for top-k, threshold batches sorted one
// at a time for top-p, and a max + first-match scan for greedy, instead of one full sort of the
// vocabulary.
//
// Cost on a 49152-entry row: greedy without penalties reads the row twice (max, then the first
// position of the max) with no copy; penalties add one copy of the row plus O(seen tokens);
// sampling adds a division and an exp per entry (the dominant cost), top-k O(V + k log k),
// top-p usually one extra scan and a sort of the first batch.
#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "util/check.h"

namespace tessera::sample {
namespace {

// Top-p without top-k visits tokens in descending order in batches cut by weight thresholds
// w = exp(l - l_max) >= threshold (relative to the most likely token), each batch found by a
// linear scan and sorted on its own. LLM distributions are peaked, so top_p of 0.9-0.95 is
// usually reached in the first batch (tens to hundreds of tokens) and the 49k-entry sort is never
// paid. Thresholds are consistent with the (l desc, id asc) order because exp is monotone.
constexpr float kTopPThresholds[] = {1e-2f, 1e-4f, 1e-8f, 0.0f};

// Max of a row, 16 lanes at a time in four SSE vectors (GCC vector extensions: maxps on the
// baseline ISA, no dispatch needed); NaN entries never win. Which lane holds which element does
// not change the result: max is exact (the one ambiguity, +0 vs -0, compares equal in
// argmax_lowest_id).
using Floats4 = float __attribute__((vector_size(16)));

inline Floats4 load4(const float* p) {
  Floats4 x;
  std::memcpy(&x, p, sizeof x);
  return x;
}

float row_max(const float* row, int32_t n) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  Floats4 m[4];
  for (Floats4& v : m) v = Floats4{kNegInf, kNegInf, kNegInf, kNegInf};
  int32_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int k = 0; k < 4; ++k) {
      const Floats4 x = load4(row + i + 4 * k);
      m[k] = x > m[k] ? x : m[k];
    }
  }
  float best = kNegInf;
  for (const Floats4& v : m)
    for (int j = 0; j < 4; ++j) best = v[j] > best ? v[j] : best;
  for (; i < n; ++i) best = row[i] > best ? row[i] : best;
  return best;
}

// Strict total order: larger value first, then lower id. Makes every sort result unique, so the
// fast path and the full sort of the reference agree on ties.
struct DescByValue {
  const float* values;
  bool operator()(int32_t a, int32_t b) const {
    return values[a] > values[b] || (values[a] == values[b] && a < b);
  }
};

// The best k ids of values[0, n) under (value desc, id asc), left in idx[0, k) in heap order.
// A bounded heap whose top is the worst kept id: O(n) compares plus O(log k) per replacement.
// Ids arrive in increasing order, so a later id only enters with a strictly larger value.
void select_top_k(const float* values, int32_t n, int32_t k, int32_t* idx) {
  const DescByValue desc{values};
  std::iota(idx, idx + k, 0);
  std::make_heap(idx, idx + k, desc);
  float worst = values[idx[0]];
  for (int32_t i = k; i < n; ++i) {
    if (values[i] > worst) {
      std::pop_heap(idx, idx + k, desc);
      idx[k - 1] = i;
      std::push_heap(idx, idx + k, desc);
      worst = values[idx[0]];
    }
  }
}

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
  const float best = row_max(row, n);
  const Floats4 target{best, best, best, best};
  int32_t i = 0;
  for (; i + 16 <= n; i += 16) {  // skip 16 at a time to the first group holding the max
    const auto hit = (load4(row + i) == target) | (load4(row + i + 4) == target) |
                     (load4(row + i + 8) == target) | (load4(row + i + 12) == target);
    if ((hit[0] | hit[1] | hit[2] | hit[3]) != 0) break;
  }
  for (; i < n; ++i) {
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
  const float l_max = row_max(l, n);
  TESSERA_CHECK(std::isfinite(l_max), "logits row has no finite maximum");

  const DescByValue desc{l};
  const bool top_k_on = params.top_k > 0 && params.top_k < n;
  const bool top_p_on = params.top_p < 1.0f;
  const bool min_p_on = params.min_p > 0.0f;

  if (!top_k_on) {
    for (int32_t i = 0; i < n; ++i) w[i] = std::exp(l[i] - l_max);
  }
  if (!top_k_on && !top_p_on) {
    if (!min_p_on) {  // dense: every token survives
      double total = 0.0;
      for (int32_t i = 0; i < n; ++i) total += w[i];
      return {n, total, true};
    }
    // min-p alone: one scan, already in id order.
    const float min_p = params.min_p;
    int32_t num = 0;
    double total = 0.0;
    for (int32_t i = 0; i < n; ++i) {
      if (!(w[i] < min_p)) {
        idx[num++] = i;
        total += w[i];
      }
    }
    return {num, total, false};
  }

  // Steps 3-4 leave candidates in idx[0, num), in (l desc, id asc) order when top_p_on.
  int32_t num = n;
  if (top_k_on) {
    num = params.top_k;
    select_top_k(l, n, num, idx);
    for (int32_t j = 0; j < num; ++j) w[idx[j]] = std::exp(l[idx[j]] - l_max);
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
    auto walk = [&](int32_t begin, int32_t end) -> int32_t {  // first dropped position, or -1
      for (int32_t j = begin; j < end; ++j) {
        if (!(cum < top_p)) return j;
        cum += static_cast<double>(w[idx[j]]) / z;
      }
      return -1;
    };
    int32_t kept = -1;
    if (top_k_on) {
      kept = walk(0, num);
    } else {
      int32_t num_found = 0;
      float upper = std::numeric_limits<float>::infinity();  // this batch: threshold <= w < upper
      for (float threshold : kTopPThresholds) {
        const int32_t begin = num_found;
        for (int32_t i = 0; i < n; ++i) {
          if (w[i] >= threshold && w[i] < upper) idx[num_found++] = i;
        }
        std::sort(idx + begin, idx + num_found, desc);
        kept = walk(begin, num_found);
        if (kept >= 0) break;
        upper = threshold;
      }
      TESSERA_CHECK(kept >= 0 || num_found == n, "top-p batches lost tokens: {} of {}", num_found,
                    n);
    }
    if (kept >= 0) num = kept;
  }

  if (min_p_on) {
    const float min_p = params.min_p;
    int32_t out = 0;
    for (int32_t j = 0; j < num; ++j) {
      if (!(w[idx[j]] < min_p)) idx[out++] = idx[j];
    }
    num = out;
  }

  double total = 0.0;
  if (num == n) {  // nothing dropped (top-p kept everything): dense again
    for (int32_t i = 0; i < n; ++i) total += w[i];
    return {n, total, true};
  }
  std::sort(idx, idx + num);
  for (int32_t j = 0; j < num; ++j) total += w[idx[j]];
  return {num, total, false};
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
    if (s.dense) {
      token = pick_by_weight(ws_.weights.data(), vocab_size_, s.total, rng.uniform());
    } else {
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
  const float x_max = row_max(x, n);
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
  select_top_k(x, n, num_top, idx);
  std::sort(idx, idx + num_top, DescByValue{x});
  for (int32_t j = 0; j < num_top; ++j) {
    out->top_logprobs.push_back({idx[j], static_cast<float>(x[idx[j]] - lse)});
  }
}

void Sampler::logprobs_of(std::span<const float> logits, int32_t token_id,
                          const SamplingParams& params, SampleOutput* out) {
  TESSERA_CHECK(token_id >= 0 && token_id < vocab_size_, "token {} outside the vocabulary", token_id);
  out->token_id = token_id;
  out->top_logprobs.clear();
  fill_logprobs(logits, params.logprobs.value_or(0), out);
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
  const float* w = ws_.weights.data();
  if (s.dense) {
    for (int32_t t = 0; t < vocab_size_; ++t) probs[t] = static_cast<float>(w[t] / s.total);
    return;
  }
  for (int32_t j = 0; j < s.num; ++j) {
    const int32_t t = ws_.indices[j];
    probs[t] = static_cast<float>(w[t] / s.total);
  }
}

std::vector<float> Sampler::compute_probs(std::span<const float> logits,
                                          const SamplingParams& params, const SeenTokens& seen) {
  std::vector<float> probs(vocab_size_);
  compute_probs(logits, params, seen, probs);
  return probs;
}

}  // namespace tessera::sample
