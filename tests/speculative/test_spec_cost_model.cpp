// The cost model with exact numbers: measured times -> predicted t(n), t_d, t_c and speed-ups;
// then the Speculator's plan() from given times and α: the chosen k, off, the back-off and its
// single-draft probe, the draft catch-up that must pay back, and several sequences planned jointly.
#include <gtest/gtest.h>

#include <vector>

#include "speculative/speculator.h"

namespace tessera::speculative {
namespace {

constexpr double kMs = 1e-3;
constexpr double kExact = 1e-12;  // sums of a few doubles

TEST(SpecCostModel, InterpolatesAndExtrapolatesStepTimes) {
  SpecCostModel m;
  EXPECT_FALSE(m.has_target_times());
  EXPECT_EQ(m.target_step_seconds(1), 0.0);
  m.record_target_step(1, 10 * kMs);
  // One size measured: extra tokens at prior_token_cost (0.1) x t(1)/1 each.
  EXPECT_NEAR(m.target_step_seconds(3), 12 * kMs, kExact);
  m.record_target_step(3, 16 * kMs);
  EXPECT_NEAR(m.target_step_seconds(2), 13 * kMs, kExact);  // halfway between t(1) and t(3)
  EXPECT_NEAR(m.target_step_seconds(5), 22 * kMs, kExact);  // along t(1)..t(3): 3 ms per token
  m.record_target_step(1, 20 * kMs);                        // EMA, weight 0.2: 0.8 x 10 + 0.2 x 20
  EXPECT_NEAR(m.measured_target_step_seconds(1), 12 * kMs, kExact);
  EXPECT_EQ(m.measured_target_step_seconds(2), 0.0);
  // Sizes below the smallest measured cost what it costs; unrecordable sizes are ignored.
  SpecCostModel only_big;
  only_big.record_target_step(4, 20 * kMs);
  only_big.record_target_step(SpecCostModel::kMaxStepTokens + 1, 1.0);
  EXPECT_NEAR(only_big.target_step_seconds(1), 20 * kMs, kExact);
}

TEST(SpecCostModel, ProposerAndCatchUpPriorsUntilMeasured) {
  SpecCostConfig c;
  c.draft_cost_prior = 0.3;  // a draft streaming 30% of the target's weight bytes
  SpecCostModel m(c);
  m.record_target_step(1, 10 * kMs);
  EXPECT_NEAR(m.proposer_forward_seconds(), 3 * kMs, kExact);
  EXPECT_NEAR(m.catch_up_seconds_per_token(), 0.45 * kMs, kExact);  // 0.15 x t_d
  m.record_proposer_forward(5 * kMs);
  m.record_catch_up(100, 0.1);
  EXPECT_NEAR(m.proposer_forward_seconds(), 5 * kMs, kExact);
  EXPECT_NEAR(m.catch_up_seconds_per_token(), 1 * kMs, kExact);
}

TEST(SpecCostModel, PredictsSpeedupOfTheIssueFormula) {
  SpecCostModel m;
  m.record_target_step(1, 10 * kMs);
  m.record_target_step(2, 11 * kMs);
  m.record_target_step(3, 16 * kMs);
  m.record_proposer_forward(1 * kMs);
  EXPECT_NEAR(expected_tokens(0.8, 2), 2.44, kExact);
  EXPECT_EQ(expected_tokens(0.5, 0), 1.0);
  EXPECT_EQ(expected_tokens(1.0, 3), 4.0);
  // Batch 1: E(α, k) t(1) / (k t_d + t(k + 1)).
  const double alpha = 0.8;
  const int32_t k2 = 2;
  EXPECT_NEAR(m.predict_speedup(1, {&alpha, 1}, {&k2, 1}), 2.44 * 10 / (2 + 16), kExact);
  // k = 1: 1.8 x 10 / 12 = 1.5 beats k = 2's 1.356 (the third token costs 5 ms here).
  const SpecCostModel::Choice c = m.best_single(1, alpha, 4);
  EXPECT_EQ(c.k, 1);
  EXPECT_NEAR(c.speedup, 1.5, kExact);
  // Batch 2, one sequence speculating: (1 + E) / (t_d + t(3)) against 2 / t(2).
  const int32_t k1 = 1;
  EXPECT_NEAR(m.predict_speedup(2, {&alpha, 1}, {&k1, 1}), (2.8 / 17) / (2.0 / 11), kExact);
}

// A Speculator that plans by the cost model (no guard: allow_step() is not consulted here).
SpeculatorConfig cost_model_config(double alpha_prior) {
  SpeculatorConfig c;
  c.num_speculative_tokens = 4;
  c.speed_guard = false;
  c.cost_model = true;
  c.alpha_prior = alpha_prior;
  return c;
}

void record_times(Speculator& s, const std::vector<double>& ms_by_tokens, double proposer_ms) {
  for (size_t n = 1; n <= ms_by_tokens.size(); ++n) {
    s.record_target_step(static_cast<int32_t>(n), ms_by_tokens[n - 1] * kMs);
  }
  s.record_proposer(1, proposer_ms * kMs);
}

int32_t plan_one(Speculator& s, const SpecCandidate& c, int32_t num_running = 1) {
  int32_t k = -1;
  s.plan({&c, 1}, num_running, {&k, 1});
  return k;
}

TEST(SpeculatorPlan, NothingBeforeTheFirstTimedStep) {
  Speculator s(cost_model_config(0.9));
  EXPECT_EQ(plan_one(s, {1, 4, 0, 100}), 0);
  record_times(s, {10}, 0);
  EXPECT_EQ(plan_one(s, {1, 4, 0, 100}), 4);  // t(n > 1) at the prior: 1 ms per extra token
}

TEST(SpeculatorPlan, PicksTheBestKOrNone) {
  // t(1..3) = 10, 11, 16 ms, t_d = 1 ms. α = 0.7: k = 1 gives 1.7 x 10 / 12 = 1.417, k = 2
  // 2.19 x 10 / 18 = 1.217 (k = 3, 4 extrapolate at 5 ms per token: worse).
  Speculator a(cost_model_config(0.7));
  record_times(a, {10, 11, 16}, 1);
  EXPECT_EQ(plan_one(a, {1, 4, 0, 100}), 1);
  // A cheaper third token (t(3) = 13, t(4) = 20): α = 0.9 takes k = 2 (2.71 x 10 / 15 = 1.807;
  // k = 1: 1.583, k = 3: 3.439 x 10 / 23 = 1.495).
  Speculator b(cost_model_config(0.9));
  record_times(b, {10, 11, 13, 20}, 1);
  EXPECT_EQ(plan_one(b, {1, 4, 0, 100}), 2);
  // ... unless max_tokens leaves room for one draft only.
  EXPECT_EQ(plan_one(b, {2, 1, 0, 2}), 1);
  // A draft as slow as 8 ms per forward: at best 1.9 x 10 / 19 = 1.0 < 1.05: off.
  Speculator c(cost_model_config(0.9));
  record_times(c, {10, 11, 13, 20}, 8);
  EXPECT_EQ(plan_one(c, {1, 4, 0, 100}), 0);
}

TEST(SpeculatorPlan, LowAlphaBacksOffThenProbesWithOneDraft) {
  Speculator s(cost_model_config(0.7));
  record_times(s, {10, 12, 14}, 0);
  // Per-position α after three verifications of one rejected draft: 0.7 x 0.7^3 = 0.2401 (the
  // tested count stays 1): k = 1 predicts 1.2401 x 10 / 12 = 1.033 < 1.05.
  for (int i = 0; i < 3; ++i) s.record(1, 1, 0);
  EXPECT_NEAR(s.alpha(1), 0.2401, 1e-12);
  EXPECT_EQ(plan_one(s, {1, 4, 0, 100}), 0);            // declined: back off 4 steps
  for (int i = 0; i < 4; ++i) EXPECT_EQ(plan_one(s, {1, 4, 0, 100}), 0) << i;
  EXPECT_EQ(plan_one(s, {1, 4, 0, 100}), 1);            // the probe: one draft
  s.record(1, 1, 0);                                    // rejected: α = 0.168
  EXPECT_EQ(plan_one(s, {1, 4, 0, 100}), 0);            // declined: back off 8 steps
  int32_t off = 0;
  while (plan_one(s, {1, 4, 0, 100}) == 0 && off < 100) ++off;
  EXPECT_EQ(off, 8);                                    // then the probe
  s.record(1, 1, 1);                                    // accepted: α = 0.7 x 0.16807 + 0.3
  EXPECT_NEAR(s.alpha(1), 0.417649, 1e-12);
  EXPECT_EQ(plan_one(s, {1, 4, 0, 100}), 1);            // 1.4176 x 10 / 12 = 1.18
}

TEST(SpeculatorPlan, NoProbeWhereEvenPerfectDraftsCannotPay) {
  // Batch 8, t(8, 9, 16) = 60, 62, 90 ms, α = 0.3: one draft (8.3 / 62 against 8 / 60 ms:
  // 1.004x) is left out and backs off 4 steps. With n-gram (t_d = 0) the single-draft probe
  // follows, since α = 1 would pay (9 / 62 ms: 1.089x)...
  auto first_draft_step = [](double proposer_ms) {
    SpeculatorConfig c = cost_model_config(0.3);
    c.max_batch_for_spec = 16;
    Speculator s(c);
    s.record_target_step(8, 60 * kMs);
    s.record_target_step(9, 62 * kMs);
    s.record_target_step(16, 90 * kMs);
    s.record_proposer(1, proposer_ms * kMs);
    for (int step = 0; step < 40; ++step) {
      if (plan_one(s, {1, 4, 0, 100}, 8) > 0) return step;
    }
    return -1;
  };
  EXPECT_EQ(first_draft_step(0), 5);
  // ... while a draft forward of 12 ms for the batch loses even at α = 1 (9 / 74 ms: 0.91x): no
  // probe, only longer back-offs (its cost would be a forward for nothing).
  EXPECT_EQ(first_draft_step(12), -1);
}

TEST(SpeculatorPlan, ProposerMissesCostNothingAndDoNotBackOff) {
  Speculator s(cost_model_config(0.7));
  record_times(s, {10, 11, 16}, 0);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(plan_one(s, {1, 4, 0, 100}), 1) << i;
    s.record_miss(1);  // the n-gram found no match: no verification ran
  }
}

TEST(SpeculatorPlan, DraftCatchUpMustPayBackOverTheRemainingTokens) {
  Speculator s(cost_model_config(0.7));
  record_times(s, {10, 11, 16}, 1);
  s.record_catch_up(100, 0.1);  // 1 ms per token
  // k = 1 saves 10 - 12 / 1.7 = 2.941 ms per token. 40 tokens to go: 117.6 ms saved >= 50 tokens
  // x 1 ms x 1.05; 15 to go: 44.1 ms < 52.5 ms.
  EXPECT_EQ(plan_one(s, {1, 4, 50, 40}), 1);
  EXPECT_EQ(plan_one(s, {2, 4, 50, 15}), 0);
  EXPECT_EQ(plan_one(s, {2, 4, 0, 15}), 1);  // up to date: nothing to earn back
  // Batch 2, memory-bound verification: k = 3 alone gives the batch 1.374x ((1 + 2.533) / 13.5 ms
  // against 2 / 10.5 ms), so R remaining steps save R x 10.5 ms x (1 - 1/1.374) = 2.858 R ms, not
  // the 5.17 R ms this sequence alone would see: the other sequence waits for the longer steps.
  Speculator b(cost_model_config(0.7));
  record_times(b, {10, 10.5, 11, 11.5, 12}, 0.5);
  b.record_catch_up(100, 0.1);
  EXPECT_EQ(plan_one(b, {1, 4, 50, 15}, 2), 0);  // 42.9 ms < 52.5 ms
  EXPECT_EQ(plan_one(b, {2, 4, 50, 20}, 2), 3);  // 57.2 ms
}

TEST(SpeculatorPlan, SequencesOfABatchArePlannedTogether) {
  // Memory-bound verification (0.5 ms per extra token), t_d = 0.5 ms, batch 2, both at α = 0.9:
  // everyone at k = 4 wins, (2 x 4.0951) / (2 + t(10) = 14.5) against 2 / t(2) = 10.5.
  Speculator s(cost_model_config(0.9));
  record_times(s, {10, 10.5, 11, 11.5, 12}, 0.5);
  const std::vector<SpecCandidate> both = {{1, 4, 0, 100}, {2, 4, 0, 100}};
  std::vector<int32_t> ks(2, -1);
  s.plan(both, 2, ks);
  EXPECT_EQ(ks, (std::vector<int32_t>{4, 4}));
  // Above max_batch_for_spec (4) nobody speculates.
  s.plan(both, 5, ks);
  EXPECT_EQ(ks, (std::vector<int32_t>{0, 0}));
}

SpecCostModel model_of(const std::vector<std::pair<int32_t, double>>& ms_by_tokens, double proposer_ms) {
  SpecCostModel m;
  for (const auto& [n, ms] : ms_by_tokens) m.record_target_step(n, ms * kMs);
  m.record_proposer_forward(proposer_ms * kMs);
  return m;
}

// best_plan: the ks (0 included) of the best predicted speed-up of a whole step, per sequence.
TEST(SpecCostModel, BestPlanGivesEachSequenceItsOwnK) {
  constexpr double kClose = 1e-9;
  std::vector<int32_t> ks(8, -1);
  // Batch 1, n-gram (t_d = 0), t(1, 2, 3, 5) = 30, 33, 36.5, 44 ms: the k that pays grows with α.
  const SpecCostModel one = model_of({{1, 30}, {2, 33}, {3, 36.5}, {5, 44}}, 0);
  auto plan1 = [&](double alpha) {
    const int32_t max_k = 4;
    const double s = one.best_plan(1, {&alpha, 1}, {&max_k, 1}, 1.05, {ks.data(), 1});
    return std::make_pair(ks[0], s);
  };
  EXPECT_EQ(plan1(0.1).first, 0);  // k = 1: 1.1 x 30 / 33 = 1.0 < 1.05: none
  EXPECT_EQ(plan1(0.1).second, 1.0);
  EXPECT_EQ(plan1(0.3).first, 1);  // 1.3 x 30 / 33 = 1.1818; k = 2: 1.39 x 30 / 36.5 = 1.142
  EXPECT_NEAR(plan1(0.3).second, 1.3 * 30 / 33, kClose);
  EXPECT_EQ(plan1(0.5).first, 2);  // 1.75 x 30 / 36.5 = 1.438
  EXPECT_NEAR(plan1(0.5).second, 1.75 * 30 / 36.5, kClose);
  EXPECT_EQ(plan1(0.7).first, 4);  // 2.7731 x 30 / 44 = 1.891
  // Batch 2, t(2, 3, 4, 6, 10) = 32, 35, 38, 44, 56 ms: α = 0.9 takes 4 drafts, α = 0.3 none
  // (its first draft, 0.3 tokens for 3 ms, would lower the step's rate); α = 0.6 one.
  const SpecCostModel two = model_of({{2, 32}, {3, 35}, {4, 38}, {6, 44}, {10, 56}}, 0);
  const std::vector<int32_t> max4 = {4, 4, 4, 4, 4, 4, 4, 4};
  const std::vector<double> a93 = {0.9, 0.3}, a96 = {0.9, 0.6};
  EXPECT_NEAR(two.best_plan(2, a93, {max4.data(), 2}, 1.05, ks), (2 + 3.0951) / 44 / (2.0 / 32), kClose);
  EXPECT_EQ((std::vector<int32_t>{ks[0], ks[1]}), (std::vector<int32_t>{4, 0}));
  two.best_plan(2, a96, {max4.data(), 2}, 1.05, ks);
  EXPECT_EQ((std::vector<int32_t>{ks[0], ks[1]}), (std::vector<int32_t>{4, 1}));
  // Batch 8, verification compute-bound (t(8, 16, 24, 40) = 60, 90, 120, 180 ms: 3.75 ms per
  // token): six sequences at α = 0.95 take 4 drafts, the two at α = 0.2 none; at α = 0.5 for all,
  // every draft widens everyone's step more than it yields: no speculation.
  const SpecCostModel eight = model_of({{8, 60}, {16, 90}, {24, 120}, {40, 180}}, 0);
  const std::vector<double> mixed = {0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.2, 0.2};
  EXPECT_NEAR(eight.best_plan(8, mixed, max4, 1.05, ks), 1.457314375, kClose);
  EXPECT_EQ(ks, (std::vector<int32_t>{4, 4, 4, 4, 4, 4, 0, 0}));
  const std::vector<double> half(8, 0.5);
  EXPECT_EQ(eight.best_plan(8, half, max4, 1.05, ks), 1.0);
  EXPECT_EQ(ks, (std::vector<int32_t>(8, 0)));
  // A draft model, t_d = 8 ms per forward for the batch: the proposer's depth is priced, so at
  // α = 0.9 and 0.5 both stop at 2 drafts (4 forwards would cost 32 ms).
  const SpecCostModel draft = model_of({{2, 32}, {3, 34}, {4, 36}, {6, 40}, {10, 48}}, 8);
  const std::vector<double> a99 = {0.9, 0.9}, a95 = {0.9, 0.5};
  EXPECT_NEAR(draft.best_plan(2, a99, {max4.data(), 2}, 1.05, ks), 2 * 4.0951 / (32 + 48) / (2.0 / 32), kClose);
  EXPECT_EQ((std::vector<int32_t>{ks[0], ks[1]}), (std::vector<int32_t>{4, 4}));
  EXPECT_NEAR(draft.best_plan(2, a95, {max4.data(), 2}, 1.05, ks), (2 + 0.9 + 0.81 + 0.5 + 0.25) / (16 + 40) / (2.0 / 32),
              kClose);
  EXPECT_EQ((std::vector<int32_t>{ks[0], ks[1]}), (std::vector<int32_t>{2, 2}));
}

TEST(SpeculatorPlan, WaitsForAPlainStepAtEachBatchSize) {
  Speculator s(cost_model_config(0.9));
  record_times(s, {10}, 0);
  EXPECT_EQ(plan_one(s, {1, 4, 0, 100}), 4);
  // Two sequences: t(2) not measured yet, so no plan has a base; one plain step measures it.
  const std::vector<SpecCandidate> both = {{1, 4, 0, 100}, {2, 4, 0, 100}};
  std::vector<int32_t> ks(2, -1);
  s.plan(both, 2, ks);
  EXPECT_EQ(ks, (std::vector<int32_t>{0, 0}));
  s.record_target_step(2, 10.5 * kMs);
  s.plan(both, 2, ks);
  EXPECT_EQ(ks, (std::vector<int32_t>{4, 4}));  // t(3..10) along the prior: 0.525 ms per token
}

TEST(SpeculatorPlan, FirstDraftCatchUpExploresThenAlphaDecides) {
  // α prior 0.5, t(1..3) = 10, 11, 16 ms, t_d = 1 ms, t_c = 1 ms: k = 1 predicts 1.5 x 10 / 12
  // = 1.25. 30 tokens of catch-up cost 31.5 ms (x 1.05); 15 tokens to go save 150 x 0.2 = 30 ms.
  Speculator s(cost_model_config(0.5));
  record_times(s, {10, 11, 16}, 1);
  s.record_catch_up(100, 0.1);
  // No verification yet: exploring is allowed at 31.5 <= 0.25 x 150 ms of plain decode.
  EXPECT_EQ(plan_one(s, {1, 4, 30, 15}), 1);
  EXPECT_EQ(plan_one(s, {3, 4, 30, 15}), 0);  // one explorer at a time (30 ms saved < 31.5)
  EXPECT_EQ(plan_one(s, {1, 4, 30, 15}), 1);  // the explorer again (its drafts not verified yet)
  s.record(1, 1, 0);  // rejected: engine-wide α 0.45, this sequence's 0.35
  // Now α decides: k = 1 at 0.45 saves 150 x (1 - 12 / 14.5) = 25.9 ms < 31.5: no catch-up.
  EXPECT_EQ(plan_one(s, {2, 4, 30, 15}), 0);
  // The sequence already caught up speculates while its α pays: 1.35 x 10 / 12 = 1.125.
  EXPECT_EQ(plan_one(s, {1, 4, 0, 14}), 1);
}

}  // namespace
}  // namespace tessera::speculative
