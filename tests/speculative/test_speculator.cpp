// The Speculator's policies with exact step counts: adaptive k and back-off per sequence, the
// batch-size cut-off, and the wall-clock guard that switches speculation off when it does not pay.
#include <gtest/gtest.h>

#include "speculative/speculator.h"

namespace tessera::speculative {
namespace {

SpeculatorConfig config_without_guard() {
  SpeculatorConfig c;
  c.num_speculative_tokens = 4;
  c.max_batch_for_spec = 4;
  c.speed_guard = false;
  c.cost_model = false;  // the heuristic: exact counts without timing
  return c;
}

TEST(Speculator, FullKWhileAcceptedHalfKThenBackOff) {
  Speculator s(config_without_guard());
  EXPECT_EQ(s.num_tokens_to_propose(1, 1), 4);
  s.record(1, 4, 4);
  EXPECT_EQ(s.num_tokens_to_propose(1, 1), 4);
  // Acceptance collapses: alpha 0.79 -> 0.553 (half k) -> 0.387 (half k) -> 0.271 (< 0.3: back
  // off 4 steps; alpha restarts at 0.4, so half k after the back-off).
  s.record(1, 4, 0);
  EXPECT_EQ(s.num_tokens_to_propose(1, 1), 2);
  s.record(1, 4, 0);
  EXPECT_EQ(s.num_tokens_to_propose(1, 1), 2);
  s.record(1, 4, 0);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(s.num_tokens_to_propose(1, 1), 0) << i;
  EXPECT_EQ(s.num_tokens_to_propose(1, 1), 2);
}

TEST(Speculator, NoSpeculationInLargeBatches) {
  Speculator s(config_without_guard());
  EXPECT_EQ(s.num_tokens_to_propose(7, 4), 4);
  EXPECT_EQ(s.num_tokens_to_propose(7, 5), 0);
}

TEST(Speculator, GuardTurnsOffSpeculationThatIsSlower) {
  SpeculatorConfig c = config_without_guard();
  c.speed_guard = true;
  Speculator s(c);
  // Probe: 8 steps without speculation, 1 token per 10 ms.
  for (int i = 0; i < 8; ++i) {
    EXPECT_FALSE(s.allow_step());
    s.record_step(false, 1, 1, 0.010);
  }
  // Trial: 16 steps with speculation emitting 2 tokens per 40 ms: half the speed.
  for (int i = 0; i < 16; ++i) {
    EXPECT_TRUE(s.allow_step());
    s.record_step(true, 1, 2, 0.040);
  }
  EXPECT_DOUBLE_EQ(s.guard_speedup(), 0.5);
  // Off for 64 steps (baseline samples all), then a new trial at once.
  int off = 0;
  while (!s.allow_step() && off < 1000) {
    ++off;
    s.record_step(false, 1, 1, 0.010);
  }
  EXPECT_EQ(off, 64);
}

TEST(Speculator, GuardJudgesOnlySpeculativeStepsAgainstAnInterleavedBaseline) {
  SpeculatorConfig c = config_without_guard();
  c.speed_guard = true;
  Speculator s(c);
  for (int i = 0; i < 8; ++i) s.record_step(false, 1, 1, 0.010);  // probe: 10 ms per token
  // A trial in which nothing is proposed (the cost model declines): no verdict, ever.
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(s.allow_step()) << i;
    s.record_step(false, 1, 1, 0.010);
  }
  EXPECT_EQ(s.guard_speedup(), 0.0);
  // Then the machine gets busy: plain steps take 20 ms, speculative ones 3 tokens per 45 ms
  // (1.33x). Against the probe's 10 ms per token that would read 0.67x and switch speculation
  // off; the plain steps interleaved with the trial move the baseline (decay 0.9 per sample):
  // sum over the 16 trial steps of 3 x base rate / (16 x 45 ms) = 1.1001.
  Speculator busy(c);
  for (int i = 0; i < 8; ++i) busy.record_step(false, 1, 1, 0.010);
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(busy.allow_step()) << i;
    busy.record_step(false, 1, 1, 0.020);
    busy.record_step(true, 1, 3, 0.045);
  }
  EXPECT_NEAR(busy.guard_speedup(), 1.1001, 1e-4);
  EXPECT_TRUE(busy.allow_step());  // 16 fresh baseline samples: the next trial needs no probe
}

TEST(Speculator, GuardKeepsSpeculationThatPays) {
  SpeculatorConfig c = config_without_guard();
  c.speed_guard = true;
  Speculator s(c);
  for (int i = 0; i < 8; ++i) s.record_step(false, 1, 1, 0.010);
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(s.allow_step());
    s.record_step(true, 1, 3, 0.015);  // 2x faster
  }
  EXPECT_DOUBLE_EQ(s.guard_speedup(), 2.0);
  // A short re-probe, then a trial twice as long.
  for (int i = 0; i < 8; ++i) {
    EXPECT_FALSE(s.allow_step());
    s.record_step(false, 1, 1, 0.010);
  }
  for (int i = 0; i < 32; ++i) {
    ASSERT_TRUE(s.allow_step()) << i;
    s.record_step(true, 1, 3, 0.015);
  }
  EXPECT_FALSE(s.allow_step());
}

TEST(Speculator, GuardComparesLikeBatchSizes) {
  // Probe at batch 8 (8 tokens per 20 ms = 400 tok/s); then the batch shrinks to 1, where plain
  // decode makes 1 token per 10 ms and speculation 3 per 15 ms (2x). An engine-wide tokens/s
  // comparison would call that 0.5x and switch speculation off; per batch size it is 2x.
  SpeculatorConfig c = config_without_guard();
  c.speed_guard = true;
  Speculator s(c);
  for (int i = 0; i < 8; ++i) s.record_step(false, 8, 8, 0.020);
  // Trial steps at batch 1 have no baseline: 8 of them send the guard back to probing.
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(s.allow_step());
    s.record_step(true, 1, 3, 0.015);
  }
  EXPECT_FALSE(s.allow_step());
  for (int i = 0; i < 8; ++i) s.record_step(false, 1, 1, 0.010);
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(s.allow_step());
    s.record_step(true, 1, 3, 0.015);
  }
  EXPECT_DOUBLE_EQ(s.guard_speedup(), 2.0);
  // A trial (now 32 speculative steps) mixing batch 8 without drafts and batch 1 with them: the
  // batch-8 steps refresh their own baseline and leave the verdict to the batch-1 ones.
  for (int i = 0; i < 8; ++i) s.record_step(false, 1, 1, 0.010);
  for (int i = 0; i < 32; ++i) {
    ASSERT_TRUE(s.allow_step());
    s.record_step(false, 8, 8, 0.020);
    s.record_step(true, 1, 3, 0.015);
  }
  EXPECT_NEAR(s.guard_speedup(), 2.0, 1e-12);
}

TEST(Speculator, GuardChargesProposerOverheadOfPrefillSteps) {
  // A trial that is 2x per decode step but whose draft catch-up after a prefill took as long as
  // the 16 steps' baseline (16 x 30 ms): 480 ms / (240 + 480) ms, switched off.
  SpeculatorConfig c = config_without_guard();
  c.speed_guard = true;
  Speculator s(c);
  s.record_overhead(1.0);  // probing: nothing proposed, nothing charged
  for (int i = 0; i < 8; ++i) s.record_step(false, 1, 1, 0.010);
  ASSERT_TRUE(s.allow_step());
  s.record_overhead(0.480);
  for (int i = 0; i < 16; ++i) s.record_step(true, 1, 3, 0.015);
  EXPECT_NEAR(s.guard_speedup(), 480.0 / 720.0, 1e-12);
  EXPECT_FALSE(s.allow_step());
}

TEST(Speculator, DraftCatchUpMustPayBack) {
  SpeculatorConfig c = config_without_guard();
  Speculator s(c);  // 4 catch-up tokens allowed per remaining token
  EXPECT_TRUE(s.worth_catching_up(40, 10));
  EXPECT_FALSE(s.worth_catching_up(41, 10));
  EXPECT_FALSE(s.worth_catching_up(110, 8));  // batch 8's tail: a 110-token context, 8 to go
  EXPECT_TRUE(s.worth_catching_up(1, 1));     // an up-to-date draft is always worth it
  c.adaptive = false;
  EXPECT_TRUE(Speculator(c).worth_catching_up(1000, 1));
}

}  // namespace
}  // namespace tessera::speculative
