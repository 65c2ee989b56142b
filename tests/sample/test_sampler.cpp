// Sampler tests: exact greedy picks and ties, exact surviving sets for top-k/top-p/min-p on a
// hand-built 6-token distribution, exact penalized logits, seed reproducibility and batch
// independence, empirical temperature frequencies, raw logprobs, and the fast path held to
// bitwise equality with the reference twin.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "sample/sampler.h"
#include "sample/sampler_ref.h"

namespace tessera::sample {
namespace {

SamplingParams greedy_params() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

std::vector<float> log_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

std::vector<int32_t> support(const std::vector<float>& probs) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] > 0.0f) ids.push_back(static_cast<int32_t>(i));
  }
  return ids;
}

// The 6-token distribution of the mask tests, deliberately not in id order:
//   id:    0     1     2     3     4     5
//   p:   0.10  0.40  0.04  0.25  0.06  0.15      rank order: 1, 3, 5, 0, 4, 2
const std::vector<double> kSix = {0.10, 0.40, 0.04, 0.25, 0.06, 0.15};
constexpr float kProbTolerance = 1e-6f;

TEST(Sampler, GreedyPicksArgmax) {
  Sampler sampler(5);
  Rng rng(1);
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 1.5f, 1.999f};
  EXPECT_EQ(sampler.sample(logits, greedy_params(), {}, rng), 1);
  const std::vector<float> negative = {-5.0f, -4.0f, -3.5f, -9.0f, -3.25f};
  EXPECT_EQ(sampler.sample(negative, greedy_params(), {}, rng), 4);
}

TEST(Sampler, GreedyTiesBreakToLowestIdAndConsumeNoDraws) {
  Sampler sampler(6);
  Rng rng(7);
  const auto before = rng.state();
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f, 3.0f};
  EXPECT_EQ(sampler.sample(logits, greedy_params(), {}, rng), 1);
  SamplingParams tiny = greedy_params();
  tiny.temperature = 0.5e-5f;  // below kGreedyTemperature: still greedy
  EXPECT_EQ(sampler.sample(logits, tiny, {}, rng), 1);
  EXPECT_EQ(rng.state(), before);
  const std::vector<float> all_equal(6, 0.5f);
  EXPECT_EQ(argmax_lowest_id(all_equal.data(), 6), 0);
}

// The vectorized argmax (16 lanes at a time, then a scalar tail) against a plain scan: the max
// planted in every lane of a 16-group, in the tail, twice (lowest id wins), among NaNs (never win),
// and +0 against -0 (compare equal: the first one wins).
TEST(Sampler, ArgmaxLowestIdMatchesAPlainScan) {
  auto plain = [](const std::vector<float>& row) {
    int32_t best = -1;
    for (size_t i = 0; i < row.size(); ++i) {
      if (!std::isnan(row[i]) && (best < 0 || row[i] > row[static_cast<size_t>(best)])) best = static_cast<int32_t>(i);
    }
    return best < 0 ? 0 : best;
  };
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-10.0f, 10.0f);
  for (int32_t n : {1, 15, 16, 17, 49152, 49159}) {
    std::vector<float> row(static_cast<size_t>(n));
    for (int32_t at : {0, 5, 15, 16, 31, n / 2, n - 1}) {
      if (at >= n) continue;
      for (float& x : row) x = u(rng);
      for (size_t i = 3; i < row.size(); i += 97) row[i] = std::numeric_limits<float>::quiet_NaN();
      row[static_cast<size_t>(at)] = 11.0f;
      SCOPED_TRACE(::testing::Message() << "n=" << n << " at=" << at);
      EXPECT_EQ(argmax_lowest_id(row.data(), n), at);
      EXPECT_EQ(argmax_lowest_id(row.data(), n), plain(row));
      if (at + 20 < n) {
        row[static_cast<size_t>(at + 20)] = 11.0f;  // a later tie loses
        EXPECT_EQ(argmax_lowest_id(row.data(), n), at);
      }
    }
  }
  std::vector<float> zeros(40, -1.0f);
  zeros[21] = -0.0f;
  zeros[33] = 0.0f;
  EXPECT_EQ(argmax_lowest_id(zeros.data(), 40), 21);
  std::vector<float> nans(20, std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(argmax_lowest_id(nans.data(), 20), 0);
}

TEST(Sampler, TopKKeepsExactlyKTokens) {
  Sampler sampler(6);
  SamplingParams p;
  p.top_k = 3;
  const auto probs = sampler.compute_probs(log_of(kSix), p, {});
  EXPECT_EQ(support(probs), (std::vector<int32_t>{1, 3, 5}));
  EXPECT_NEAR(probs[1], 0.5f, kProbTolerance);     // 0.40 / 0.80
  EXPECT_NEAR(probs[3], 0.3125f, kProbTolerance);  // 0.25 / 0.80
  EXPECT_NEAR(probs[5], 0.1875f, kProbTolerance);  // 0.15 / 0.80
  // Ties at the boundary keep the lowest ids.
  p.top_k = 2;
  const std::vector<float> tied = {0.0f, 1.0f, 0.0f, 1.0f, 1.0f, 0.0f};
  EXPECT_EQ(support(sampler.compute_probs(tied, p, {})), (std::vector<int32_t>{1, 3}));
  // top_k 0, -1 and >= vocab mean "all".
  for (int32_t k : {0, -1, 6, 100}) {
    p.top_k = k;
    EXPECT_EQ(support(sampler.compute_probs(log_of(kSix), p, {})).size(), 6u) << k;
  }
}

TEST(Sampler, TopPKeepsSmallestPrefixReachingP) {
  Sampler sampler(6);
  SamplingParams p;
  // Mass before each token in rank order: 1: 0, 3: 0.40, 5: 0.65, 0: 0.80, 4: 0.90, 2: 0.96.
  const std::vector<std::pair<float, std::vector<int32_t>>> cases = {
      {0.30f, {1}}, {0.60f, {1, 3}}, {0.70f, {1, 3, 5}}, {0.85f, {0, 1, 3, 5}},
      {0.95f, {0, 1, 3, 4, 5}}, {0.99f, {0, 1, 2, 3, 4, 5}}};
  for (const auto& [top_p, expected] : cases) {
    p.top_p = top_p;
    const auto probs = sampler.compute_probs(log_of(kSix), p, {});
    EXPECT_EQ(support(probs), expected) << top_p;
  }
  p.top_p = 0.60f;
  const auto probs = sampler.compute_probs(log_of(kSix), p, {});
  EXPECT_NEAR(probs[1], 0.40f / 0.65f, kProbTolerance);
  EXPECT_NEAR(probs[3], 0.25f / 0.65f, kProbTolerance);
}

TEST(Sampler, TopPAppliesAfterTopK) {
  Sampler sampler(6);
  SamplingParams p;
  p.top_k = 3;
  p.top_p = 0.70f;  // alone it keeps {1,3,5}; over the top-3 (0.5, 0.3125, 0.1875) it keeps {1,3}
  EXPECT_EQ(support(sampler.compute_probs(log_of(kSix), p, {})), (std::vector<int32_t>{1, 3}));
}

TEST(Sampler, MinPDropsTokensBelowFractionOfMax) {
  Sampler sampler(6);
  SamplingParams p;
  p.min_p = 0.2f;  // threshold 0.08: drops 4 (0.06) and 2 (0.04)
  EXPECT_EQ(support(sampler.compute_probs(log_of(kSix), p, {})),
            (std::vector<int32_t>{0, 1, 3, 5}));
  p.min_p = 0.5f;  // threshold 0.20
  EXPECT_EQ(support(sampler.compute_probs(log_of(kSix), p, {})), (std::vector<int32_t>{1, 3}));
  p.min_p = 0.3f;  // threshold 0.12, after top-4 {1,3,5,0}: drops 0
  p.top_k = 4;
  const auto probs = sampler.compute_probs(log_of(kSix), p, {});
  EXPECT_EQ(support(probs), (std::vector<int32_t>{1, 3, 5}));
  EXPECT_NEAR(probs[1], 0.5f, kProbTolerance);
}

TEST(Sampler, PenaltiesGiveExactLogits) {
  const std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 1.0f};
  const std::vector<int32_t> prompt = {0, 1};
  const std::vector<int32_t> output = {3, 3, 4};
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  // 0: prompt, 2 / 2 = 1;  1: prompt, -1 * 2 = -2;  2: unseen;
  // 3: output x2, 3 / 2 - 0.5 * 2 - 0.25 = 0.25;  4: output x1, -2 * 2 - 0.5 - 0.25 = -4.75
  const std::vector<float> expected = {1.0f, -2.0f, 0.5f, 0.25f, -4.75f, 1.0f};
  EXPECT_EQ(apply_penalties_ref(logits, p, {prompt, output, {}}), expected);
  // The same through the fast path: softmax of `expected`, and the greedy pick is a tie between
  // 0 and 5 at 1.0, broken to 0.
  Sampler sampler(6);
  const auto probs = sampler.compute_probs(logits, p, {prompt, output, {}});
  double z = 0.0;
  for (float x : expected) z += std::exp(static_cast<double>(x));
  for (int32_t i = 0; i < 6; ++i) {
    EXPECT_NEAR(probs[i], std::exp(static_cast<double>(expected[i])) / z, kProbTolerance) << i;
  }
  EXPECT_EQ(sampler.argmax(logits, p, {prompt, output, {}}), 0);
  // Pending tokens count as output: moving the last output token to pending changes nothing.
  const std::vector<int32_t> head = {3, 3};
  const std::vector<int32_t> tail = {4};
  EXPECT_EQ(sampler.compute_probs(logits, p, {prompt, head, tail}), probs);
}

TEST(Sampler, PresenceAndFrequencyIgnorePromptTokens) {
  const std::vector<float> logits = {2.0f, -1.0f, 0.5f};
  SamplingParams p;
  p.frequency_penalty = 1.0f;
  p.presence_penalty = 1.0f;
  const std::vector<int32_t> prompt = {0, 0, 1};
  const std::vector<int32_t> output = {1};
  EXPECT_EQ(apply_penalties_ref(logits, p, {prompt, output, {}}),
            (std::vector<float>{2.0f, -3.0f, 0.5f}));
  // Greedy honours the penalties: 0 wins before, and a frequency penalty on 0 flips it to 2.
  Sampler sampler(3);
  SamplingParams g = greedy_params();
  EXPECT_EQ(sampler.argmax(logits, g, {prompt, {}, {}}), 0);
  g.frequency_penalty = 1.0f;
  const std::vector<int32_t> zeros = {0, 0};
  EXPECT_EQ(sampler.argmax(logits, g, {prompt, zeros, {}}), 2);  // 2 - 2 = 0 < 0.5
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferent) {
  constexpr int32_t kVocab = 50;
  constexpr int kDraws = 100;
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> logits(kVocab);
  for (float& x : logits) x = normal(gen);
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_p = 0.95f;
  Sampler sampler(kVocab);
  auto draw = [&](uint64_t seed) {
    Rng rng(seed);
    std::vector<int32_t> tokens;
    for (int i = 0; i < kDraws; ++i) tokens.push_back(sampler.sample(logits, p, {}, rng));
    return tokens;
  };
  const auto a = draw(42);
  EXPECT_EQ(draw(42), a);
  EXPECT_NE(draw(43), a);
  // Batch independence: interleaving another request (other logits, other rng) between this
  // request's draws changes nothing.
  Rng rng_a(42), rng_b(5);
  std::vector<float> other(kVocab, 0.0f);
  std::vector<int32_t> interleaved;
  for (int i = 0; i < kDraws; ++i) {
    interleaved.push_back(sampler.sample(logits, p, {}, rng_a));
    sampler.sample(other, p, {}, rng_b);
  }
  EXPECT_EQ(interleaved, a);
  // Rng::for_request: the request's seed wins over the engine's.
  SamplingParams seeded = p;
  seeded.seed = 42;
  EXPECT_EQ(Rng::for_request(seeded, 999).state(), Rng(42).state());
  EXPECT_EQ(Rng::for_request(p, 999).state(), Rng(999).state());
}

TEST(Sampler, TemperatureFrequenciesMatchSoftmax) {
  // N draws of a 5-token distribution at T = 0.7. Each empirical frequency is within
  // kZ standard errors sqrt(p(1-p)/N) of softmax(l / T) (false alarm ~1e-5 per token for a
  // correct sampler; with the fixed seed the test is deterministic anyway). A sampler that
  // ignored T (softmax(l)) would miss token 0 by > 0.05, about 30 standard errors.
  constexpr int kDraws = 100000;
  constexpr double kZ = 4.5;
  const std::vector<float> logits = {1.0f, 0.0f, -0.5f, 0.5f, -2.0f};
  SamplingParams p;
  p.temperature = 0.7f;
  Sampler sampler(5);
  Rng rng(2024);
  std::vector<int> counts(5, 0);
  for (int i = 0; i < kDraws; ++i) counts[sampler.sample(logits, p, {}, rng)] += 1;
  double z = 0.0;
  for (float x : logits) z += std::exp(x / 0.7);
  for (int i = 0; i < 5; ++i) {
    const double expected = std::exp(logits[i] / 0.7) / z;
    const double sigma = std::sqrt(expected * (1.0 - expected) / kDraws);
    EXPECT_NEAR(static_cast<double>(counts[i]) / kDraws, expected, kZ * sigma) << i;
  }
}

TEST(Sampler, LogprobsAreRawModelLogprobs) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f, 0.0f};
  SamplingParams p;
  p.temperature = 0.5f;  // must not change reported logprobs (raw_logprobs convention)
  p.repetition_penalty = 1.5f;
  p.logprobs = 3;
  const std::vector<int32_t> prompt = {1};
  Sampler sampler(6);
  Rng rng(11);
  SampleOutput out;
  const int32_t token = sampler.sample(logits, p, {prompt, {}, {}}, rng, &out);
  const auto ref = raw_logprobs_ref(logits);
  EXPECT_EQ(out.token_id, token);
  EXPECT_NEAR(out.logprob, ref[token], 1e-6);
  ASSERT_EQ(out.top_logprobs.size(), 3u);
  EXPECT_EQ(out.top_logprobs[0].token_id, 1);  // tie at 3.0 with 3: lower id first
  EXPECT_EQ(out.top_logprobs[1].token_id, 3);
  EXPECT_EQ(out.top_logprobs[2].token_id, 2);
  for (const auto& e : out.top_logprobs) EXPECT_NEAR(e.logprob, ref[e.token_id], 1e-6);
  // Greedy with logprobs = 0: only the chosen token, rank counts ties (vLLM's rank).
  SamplingParams g = greedy_params();
  g.logprobs = 0;
  sampler.sample(logits, g, {}, rng, &out);
  EXPECT_EQ(out.token_id, 1);
  EXPECT_EQ(out.rank, 2);
  EXPECT_TRUE(out.top_logprobs.empty());
  EXPECT_NEAR(out.logprob, ref[1], 1e-6);
}

TEST(Sampler, ValidateRejectsBadParams) {
  SamplingParams p;
  EXPECT_TRUE(validate_sampling_params(p, 10).ok());
  auto bad = [&](auto mutate) {
    SamplingParams q;
    mutate(q);
    return !validate_sampling_params(q, 10).ok();
  };
  EXPECT_TRUE(bad([](SamplingParams& q) { q.temperature = -0.1f; }));
  EXPECT_TRUE(bad([](SamplingParams& q) { q.top_p = 0.0f; }));
  EXPECT_TRUE(bad([](SamplingParams& q) { q.top_p = 1.5f; }));
  EXPECT_TRUE(bad([](SamplingParams& q) { q.top_k = -2; }));
  EXPECT_TRUE(bad([](SamplingParams& q) { q.min_p = 1.1f; }));
  EXPECT_TRUE(bad([](SamplingParams& q) { q.repetition_penalty = 0.0f; }));
  EXPECT_TRUE(bad([](SamplingParams& q) { q.presence_penalty = 2.5f; }));
  EXPECT_TRUE(bad([](SamplingParams& q) { q.logprobs = 11; }));
  EXPECT_FALSE(bad([](SamplingParams& q) { q.top_k = -1; }));
}

// ---- fast path vs reference twin: bitwise equality ----

struct Case {
  const char* name;
  float temperature;
  int32_t top_k;
  float top_p;
  float min_p;
  float repetition_penalty;
  float frequency_penalty;
};

TEST(Sampler, FastPathEqualsReferenceBitwise) {
  const std::vector<Case> cases = {
      {"greedy", 0.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f},
      {"greedy_penalized", 0.0f, 0, 1.0f, 0.0f, 1.3f, 0.4f},
      {"plain", 1.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f},
      {"hot", 1.7f, 0, 1.0f, 0.0f, 1.0f, 0.0f},
      {"top_k", 0.8f, 40, 1.0f, 0.0f, 1.0f, 0.0f},
      {"top_p", 0.8f, 0, 0.9f, 0.0f, 1.0f, 0.0f},
      {"top_p_flat", 3.0f, 0, 0.99f, 0.0f, 1.0f, 0.0f},  // forces several partial-sort rounds
      {"min_p", 1.0f, 0, 1.0f, 0.05f, 1.0f, 0.0f},
      {"all", 0.7f, 100, 0.8f, 0.02f, 1.2f, 0.3f},
  };
  for (int32_t vocab : {7, 1000, 49152}) {
    std::mt19937 gen(vocab);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    std::vector<float> logits(vocab);
    for (float& x : logits) x = normal(gen);
    logits[vocab / 2] = logits[vocab / 3];  // a tie
    std::vector<int32_t> prompt, output;
    for (int i = 0; i < 30; ++i) prompt.push_back(static_cast<int32_t>(gen() % vocab));
    for (int i = 0; i < 20; ++i) output.push_back(static_cast<int32_t>(gen() % vocab));
    Sampler sampler(vocab);
    for (const Case& c : cases) {
      SamplingParams p;
      p.temperature = c.temperature;
      p.top_k = c.top_k;
      p.top_p = c.top_p;
      p.min_p = c.min_p;
      p.repetition_penalty = c.repetition_penalty;
      p.frequency_penalty = c.frequency_penalty;
      const SeenTokens seen{prompt, output, {}};
      EXPECT_EQ(sampler.compute_probs(logits, p, seen), compute_probs_ref(logits, p, seen))
          << c.name << " vocab " << vocab;
      Rng fast(9), ref(9);
      for (int i = 0; i < 20; ++i) {
        ASSERT_EQ(sampler.sample(logits, p, seen, fast), sample_ref(logits, p, seen, ref))
            << c.name << " vocab " << vocab << " draw " << i;
      }
    }
  }
}

TEST(Sampler, FastPathEqualsReferenceWithUnderflowAndInfinities) {
  // Weights that underflow to 0 and -inf logits push top-p through its last threshold batch.
  constexpr int32_t kVocab = 4096;
  std::vector<float> logits(kVocab);
  for (int32_t i = 0; i < kVocab; ++i) {
    logits[i] = i % 3 == 0 ? -200.0f : (i % 7 == 0 ? -std::numeric_limits<float>::infinity()
                                                   : 0.001f * static_cast<float>(i % 101));
  }
  Sampler sampler(kVocab);
  for (float top_p : {0.5f, 0.9999999f}) {
    for (float min_p : {0.0f, 0.5f}) {
      SamplingParams p;
      p.top_p = top_p;
      p.min_p = min_p;
      const auto fast = sampler.compute_probs(logits, p, {});
      EXPECT_EQ(fast, compute_probs_ref(logits, p, {})) << top_p << " " << min_p;
      EXPECT_EQ(fast[0], 0.0f);  // -200: weight underflows to exactly 0
      EXPECT_EQ(fast[7], 0.0f);  // -inf
      Rng a(4), b(4);
      for (int i = 0; i < 50; ++i) {
        ASSERT_EQ(sampler.sample(logits, p, {}, a), sample_ref(logits, p, {}, b));
      }
    }
  }
}

}  // namespace
}  // namespace tessera::sample
