// RejectionSampler tests: exact greedy outputs, greedy speculation == token-by-token greedy,
// losslessness (the emitted tokens are distributed as the target p although the drafts come from
// a different q), the same statistic catching two deliberately broken samplers, and the expected
// number of emitted tokens per step against (1 - a^(k+1)) / (1 - a).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "sample/rejection_sampler.h"
#include "sample/sampler.h"

namespace tessera::sample {
namespace {

constexpr int32_t kVocab = 8;
// Target p and a deliberately different draft q (q puts zero mass on token 4, where p has 0.10,
// and over-weights 2, 3 and 6), so both acceptance and the residual matter.
// Per-token acceptance alpha = sum_x min(p, q) = 0.55.
const std::vector<float> kP = {0.30f, 0.20f, 0.15f, 0.10f, 0.10f, 0.08f, 0.05f, 0.02f};
const std::vector<float> kQ = {0.05f, 0.10f, 0.30f, 0.25f, 0.00f, 0.10f, 0.15f, 0.05f};

// Chi-square bound: for N draws from p the statistic sum (n_i - N p_i)^2 / (N p_i) follows
// chi-square with V - 1 = 7 degrees of freedom; its 0.999 quantile is 24.32. A correct sampler
// exceeds it with probability 0.1% (the seeds are fixed, so the test is deterministic).
constexpr double kChiSquareBound = 24.32;
// Total variation: E[TV] ~ 0.5 * sum_i sqrt(2 p_i (1 - p_i) / (pi N)) ~ 0.0022 at N = 200k
// (~ sqrt(V / N) / 2); 0.01 is more than 4x that, while the broken samplers below are off by
// >= 0.15.
constexpr double kTvBound = 0.01;
constexpr int kTrials = 200000;

struct Fit {
  double chi_square = 0.0;
  double tv = 0.0;
};

Fit fit(const std::vector<int64_t>& counts, const std::vector<float>& p) {
  int64_t n = 0;
  for (int64_t c : counts) n += c;
  Fit f;
  for (size_t i = 0; i < p.size(); ++i) {
    const double expected = static_cast<double>(n) * p[i];
    f.chi_square += (counts[i] - expected) * (counts[i] - expected) / expected;
    f.tv += 0.5 * std::abs(static_cast<double>(counts[i]) / n - p[i]);
  }
  return f;
}

std::vector<float> repeat_rows(const std::vector<float>& row, int32_t num_rows) {
  std::vector<float> out;
  for (int32_t r = 0; r < num_rows; ++r) out.insert(out.end(), row.begin(), row.end());
  return out;
}

int32_t draw_from(const std::vector<float>& q, Rng& rng) {
  return pick_by_weight(q.data(), static_cast<int32_t>(q.size()), 1.0, rng.uniform());
}

enum class Variant {
  kCorrect,
  kAcceptAll,        // broken: accepts every draft token
  kResampleFromP,    // broken: on rejection draws from p instead of normalize(max(0, p - q))
};

RejectionResult run_variant(Variant v, std::span<const int32_t> draft, std::span<const float> q,
                            std::span<const float> p, Rng& rng, std::span<int32_t> out) {
  const size_t k = draft.size();
  switch (v) {
    case Variant::kCorrect:
      return RejectionSampler::verify(draft, q, p, kVocab, rng, out);
    case Variant::kAcceptAll:
      for (size_t i = 0; i < k; ++i) out[i] = draft[i];
      out[k] = pick_by_weight(p.data() + k * kVocab, kVocab, 1.0, rng.uniform());
      return {static_cast<int32_t>(k)};
    case Variant::kResampleFromP:
      for (size_t i = 0; i < k; ++i) {
        const float px = p[i * kVocab + draft[i]];
        const float qx = q[i * kVocab + draft[i]];
        if (rng.uniform() * qx < px) {
          out[i] = draft[i];
          continue;
        }
        out[i] = pick_by_weight(p.data() + i * kVocab, kVocab, 1.0, rng.uniform());
        return {static_cast<int32_t>(i)};
      }
      out[k] = pick_by_weight(p.data() + k * kVocab, kVocab, 1.0, rng.uniform());
      return {static_cast<int32_t>(k)};
  }
  return {};
}

// Runs kTrials speculative steps with k drafts drawn from q; returns the counts of the first
// emitted token of each step and of the first kTrials tokens of the concatenated output stream
// (which, for a lossless sampler with context-free rows, are i.i.d. draws from p).
struct Counts {
  std::vector<int64_t> first = std::vector<int64_t>(kVocab, 0);
  std::vector<int64_t> stream = std::vector<int64_t>(kVocab, 0);
};

Counts run_trials(Variant v, int32_t k, uint64_t seed) {
  const auto p_rows = repeat_rows(kP, k + 1);
  const auto q_rows = repeat_rows(kQ, k);
  Rng draft_rng(seed), verify_rng(seed + 1);
  std::vector<int32_t> draft(k), out(k + 1);
  Counts c;
  int64_t streamed = 0;
  for (int t = 0; t < kTrials; ++t) {
    for (int32_t i = 0; i < k; ++i) draft[i] = draw_from(kQ, draft_rng);
    const RejectionResult r = run_variant(v, draft, q_rows, p_rows, verify_rng, out);
    c.first[out[0]] += 1;
    for (int32_t i = 0; i < r.num_emitted() && streamed < kTrials; ++i, ++streamed) {
      c.stream[out[i]] += 1;
    }
  }
  return c;
}

TEST(RejectionSampler, GreedyExactOutputs) {
  std::vector<int32_t> out(8, -1);
  const std::vector<int32_t> draft = {5, 6, 7};
  auto r = RejectionSampler::verify_greedy(draft, std::vector<int32_t>{5, 6, 2, 9}, out);
  EXPECT_EQ(r.num_accepted, 2);
  EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + r.num_emitted()),
            (std::vector<int32_t>{5, 6, 2}));  // 2 accepted, 2 recovered
  r = RejectionSampler::verify_greedy(draft, std::vector<int32_t>{5, 6, 7, 9}, out);
  EXPECT_EQ(r.num_accepted, 3);
  EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + 4),
            (std::vector<int32_t>{5, 6, 7, 9}));  // all accepted, 9 bonus
  r = RejectionSampler::verify_greedy(draft, std::vector<int32_t>{1, 6, 7, 9}, out);
  EXPECT_EQ(r.num_accepted, 0);
  EXPECT_EQ(out[0], 1);
  r = RejectionSampler::verify_greedy({}, std::vector<int32_t>{4}, out);  // k = 0: plain decode
  EXPECT_EQ(r.num_accepted, 0);
  EXPECT_EQ(out[0], 4);
}

TEST(RejectionSampler, GreedyVerifyLogitsEqualsTokenByTokenGreedy) {
  // Rows where the argmax of row i is (3 * i + 1) % 8, except that a frequency penalty makes
  // a repeated token lose: the drafts count as pending output for later rows.
  constexpr int32_t k = 4;
  std::vector<float> rows((k + 1) * kVocab, 0.0f);
  for (int32_t i = 0; i <= k; ++i) {
    rows[i * kVocab + (3 * i + 1) % 8] = 2.0f;
    rows[i * kVocab + 1] = std::max(rows[i * kVocab + 1], 1.5f);  // runner-up everywhere: 1
  }
  rows[2 * kVocab + 1] = 2.5f;  // row 2 prefers 1 unless the draft 1 of row 0 is penalized
  SamplingParams g;
  g.temperature = 0.0f;
  g.frequency_penalty = 1.0f;
  Sampler sampler(kVocab);
  RejectionSampler rs(kVocab, k);
  Rng rng(1);
  // Token-by-token greedy with the drafts appended as they are accepted.
  std::vector<int32_t> expected;
  for (int32_t i = 0; i <= k; ++i) {
    const std::span<const float> row(rows.data() + i * kVocab, kVocab);
    expected.push_back(sampler.argmax(row, g, {{}, expected, {}}));
  }
  // Row 0: 1 (2.0); row 1: 4; row 2: 7 (1 would win at 2.5 but pays 1.0); row 3: 10 % 8 = 2; row 4: 13 % 8 = 5.
  EXPECT_EQ(expected, (std::vector<int32_t>{1, 4, 7, 2, 5}));
  std::vector<int32_t> out(k + 1);
  const std::vector<int32_t> good(expected.begin(), expected.begin() + k);
  auto r = rs.verify_logits(sampler, good, {}, rows, g, {}, rng, out);
  EXPECT_EQ(r.num_accepted, k);
  EXPECT_EQ(out, expected);
  const std::vector<int32_t> bad = {1, 4, 3, 2};
  r = rs.verify_logits(sampler, bad, {}, rows, g, {}, rng, out);
  EXPECT_EQ(r.num_accepted, 2);
  EXPECT_EQ(out[2], 7);
}

TEST(RejectionSampler, SamplingVerifyLogitsEqualsManualPipeline) {
  // verify_logits = compute_probs per row (drafts before the row counted as pending output) +
  // verify(), draw for draw.
  constexpr int32_t k = 3;
  std::mt19937 gen(8);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> rows((k + 1) * kVocab);
  for (float& x : rows) x = normal(gen);
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 5;
  p.frequency_penalty = 0.7f;
  const std::vector<int32_t> prompt = {1, 2};
  const std::vector<int32_t> output = {3};
  const std::vector<int32_t> draft = {0, 6, 6};
  const auto q_rows = repeat_rows(kQ, k);
  Sampler sampler(kVocab);
  RejectionSampler rs(kVocab, k);
  std::vector<float> p_rows;
  for (int32_t i = 0; i <= k; ++i) {
    const SeenTokens seen{prompt, output, std::span<const int32_t>(draft).first(i)};
    const auto row = sampler.compute_probs(
        std::span<const float>(rows).subspan(i * kVocab, kVocab), p, seen);
    p_rows.insert(p_rows.end(), row.begin(), row.end());
  }
  for (uint64_t seed = 0; seed < 200; ++seed) {
    Rng a(seed), b(seed);
    std::vector<int32_t> out_a(k + 1), out_b(k + 1);
    const auto ra = rs.verify_logits(sampler, draft, q_rows, rows, p, {prompt, output, {}}, a,
                                     out_a);
    const auto rb = RejectionSampler::verify(draft, q_rows, p_rows, kVocab, b, out_b);
    ASSERT_EQ(ra.num_accepted, rb.num_accepted) << seed;
    ASSERT_EQ(out_a, out_b) << seed;
    ASSERT_EQ(a.state(), b.state()) << seed;
  }
}

TEST(RejectionSampler, IdenticalDraftAndTargetAlwaysAccepts) {
  constexpr int32_t k = 3;
  const auto rows = repeat_rows(kP, k + 1);
  Rng rng(5);
  std::vector<int32_t> out(k + 1);
  for (int t = 0; t < 1000; ++t) {
    const std::vector<int32_t> draft = {0, 4, 7};
    auto r = RejectionSampler::verify(draft, repeat_rows(kP, k), rows, kVocab, rng, out);
    ASSERT_EQ(r.num_accepted, k);
  }
}

TEST(RejectionSampler, LosslessWithDraftDistribution) {
  for (int32_t k : {1, 3}) {
    const Counts c = run_trials(Variant::kCorrect, k, 100 + k);
    const Fit first = fit(c.first, kP), stream = fit(c.stream, kP);
    EXPECT_LT(first.chi_square, kChiSquareBound) << "k=" << k;
    EXPECT_LT(first.tv, kTvBound) << "k=" << k;
    EXPECT_LT(stream.chi_square, kChiSquareBound) << "k=" << k;
    EXPECT_LT(stream.tv, kTvBound) << "k=" << k;
  }
}

TEST(RejectionSampler, LosslessWithNgramOneHotDraft) {
  // n-gram drafts have no q: always proposing token 2 must still give p for the first token.
  constexpr int32_t k = 2;
  const auto rows = repeat_rows(kP, k + 1);
  const std::vector<int32_t> draft = {2, 2};
  Rng rng(77);
  std::vector<int32_t> out(k + 1);
  std::vector<int64_t> first(kVocab, 0);
  int64_t accepted_first = 0;
  for (int t = 0; t < kTrials; ++t) {
    auto r = RejectionSampler::verify(draft, {}, rows, kVocab, rng, out);
    first[out[0]] += 1;
    accepted_first += r.num_accepted > 0 ? 1 : 0;
  }
  const Fit f = fit(first, kP);
  EXPECT_LT(f.chi_square, kChiSquareBound);
  EXPECT_LT(f.tv, kTvBound);
  // Acceptance probability of a one-hot draft is p(x) = 0.15; binomial sd ~ 0.0008.
  EXPECT_NEAR(static_cast<double>(accepted_first) / kTrials, 0.15, 0.004);
}

TEST(RejectionSampler, BrokenSamplersAreDetected) {
  for (Variant v : {Variant::kAcceptAll, Variant::kResampleFromP}) {
    const Counts c = run_trials(v, 1, 300);
    const Fit f = fit(c.first, kP);
    EXPECT_GT(f.chi_square, kChiSquareBound) << static_cast<int>(v);
    EXPECT_GT(f.tv, kTvBound) << static_cast<int>(v);
  }
}

TEST(RejectionSampler, ExpectedTokensPerStepFormula) {
  EXPECT_NEAR(expected_tokens_per_step(0.8, 4), 3.3616, 1e-12);  // the "~3.36" of the brief
  EXPECT_NEAR(expected_tokens_per_step(0.5, 2), 1.75, 1e-12);
  EXPECT_EQ(expected_tokens_per_step(1.0, 4), 5.0);
  EXPECT_EQ(expected_tokens_per_step(0.0, 4), 1.0);
}

TEST(RejectionSampler, MeanEmittedMatchesFormula) {
  // A draft closer to p: q' = (p + q) / 2, so alpha = sum min(p, q') = 0.775 (hand-summed).
  std::vector<float> q_mix(kVocab);
  double alpha_theory = 0.0;
  for (int32_t i = 0; i < kVocab; ++i) {
    q_mix[i] = 0.5f * (kP[i] + kQ[i]);
    alpha_theory += std::min(kP[i], q_mix[i]);
  }
  EXPECT_NEAR(alpha_theory, 0.775, 1e-6);
  constexpr int kSteps = 100000;
  for (int32_t k : {2, 4}) {
    const auto p_rows = repeat_rows(kP, k + 1);
    const auto q_rows = repeat_rows(q_mix, k);
    Rng draft_rng(k), verify_rng(1000 + k);
    std::vector<int32_t> draft(k), out(k + 1);
    int64_t accepted = 0, tested = 0, emitted = 0;
    for (int t = 0; t < kSteps; ++t) {
      for (int32_t i = 0; i < k; ++i) draft[i] = draw_from(q_mix, draft_rng);
      const auto r = RejectionSampler::verify(draft, q_rows, p_rows, kVocab, verify_rng, out);
      accepted += r.num_accepted;
      tested += r.num_accepted + (r.num_accepted < k ? 1 : 0);  // the rejected one was tested too
      emitted += r.num_emitted();
    }
    const double alpha = static_cast<double>(accepted) / tested;
    const double mean = static_cast<double>(emitted) / kSteps;
    // alpha: binomial sd sqrt(a (1 - a) / tested) < 0.0015. Mean emitted: per-step sd < (k+1)/2,
    // so the standard error is < 0.008 at 100k steps; 0.03 is > 3.5 of them.
    EXPECT_NEAR(alpha, alpha_theory, 0.005) << "k=" << k;
    EXPECT_NEAR(mean, expected_tokens_per_step(alpha, k), 0.03) << "k=" << k;
  }
}

}  // namespace
}  // namespace tessera::sample
