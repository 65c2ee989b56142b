// Steady-state allocation test: this binary replaces the global operator new with a counting one
// and checks that, after one warm-up call, the hot paths allocate nothing: greedy (with and
// without penalties), full sampling with every filter, compute_probs into a span, logprobs into a
// reused SampleOutput, rejection verification, and n-gram proposals.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "../util/counting_new.h"
#include "sample/rejection_sampler.h"
#include "sample/sampler.h"

namespace tessera::sample {
namespace {

constexpr int32_t kVocab = 49152;

template <typename Fn>
int64_t allocations_in(Fn&& fn) {
  fn();  // warm-up: first use may size reusable buffers
  const int64_t before = tessera::testing::num_allocations();
  for (int i = 0; i < 3; ++i) fn();
  return tessera::testing::num_allocations() - before;
}

TEST(SampleAlloc, HotPathsAllocateNothing) {
  std::mt19937 gen(1);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(kVocab), rows(5 * kVocab), probs(kVocab);
  for (float& x : logits) x = normal(gen);
  for (float& x : rows) x = normal(gen);
  const std::vector<int32_t> prompt = {1, 2, 3, 400, 5000};
  const std::vector<int32_t> output = {7, 7, 123};
  const SeenTokens seen{prompt, output, {}};
  Sampler sampler(kVocab);
  RejectionSampler rejection(kVocab, 4);
  Rng rng(3);
  SampleOutput out;

  SamplingParams greedy;
  greedy.temperature = 0.0f;
  EXPECT_EQ(allocations_in([&] { sampler.sample(logits, greedy, seen, rng); }), 0);
  SamplingParams greedy_pen = greedy;
  greedy_pen.repetition_penalty = 1.2f;
  greedy_pen.presence_penalty = 0.5f;
  EXPECT_EQ(allocations_in([&] { sampler.sample(logits, greedy_pen, seen, rng); }), 0);

  SamplingParams full;
  full.temperature = 0.8f;
  full.top_k = 50;
  full.top_p = 0.9f;
  full.min_p = 0.01f;
  full.frequency_penalty = 0.3f;
  full.logprobs = 5;
  EXPECT_EQ(allocations_in([&] { sampler.sample(logits, full, seen, rng, &out); }), 0);
  SamplingParams top_p_only;
  top_p_only.top_p = 0.95f;
  EXPECT_EQ(allocations_in([&] { sampler.sample(logits, top_p_only, seen, rng); }), 0);
  EXPECT_EQ(allocations_in([&] { sampler.compute_probs(logits, full, seen, probs); }), 0);
  // The counter works: the vector-returning overload does allocate.
  EXPECT_GT(allocations_in([&] { probs = sampler.compute_probs(logits, full, seen); }), 0);

  const std::vector<int32_t> draft = {10, 20, 30, 40};
  std::vector<int32_t> emitted(5);
  EXPECT_EQ(allocations_in([&] {
              rejection.verify_logits(sampler, draft, {}, rows, full, seen, rng, emitted);
            }),
            0);
  EXPECT_EQ(allocations_in([&] {
              rejection.verify_logits(sampler, draft, {}, rows, greedy, seen, rng, emitted);
            }),
            0);
}

}  // namespace
}  // namespace tessera::sample
