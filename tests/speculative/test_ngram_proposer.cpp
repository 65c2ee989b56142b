// NgramProposer tests: exact proposals on hand-built sequences (longest n first, latest vs
// earliest occurrence, overlap, truncation at the end and at out.size()), and the fast scan held
// to equality with the readable twin on random sequences over a tiny alphabet.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "speculative/ngram_proposer.h"

namespace tessera::speculative {
namespace {

using Tokens = std::vector<int32_t>;

NgramConfig config(int32_t min_n, int32_t max_n, int32_t k,
                   MatchPolicy policy = MatchPolicy::kLatest) {
  return NgramConfig{min_n, max_n, k, policy};
}

TEST(NgramProposer, VllmDocstringExample) {
  // [4,2,3] has no earlier match; [2,3] matches at 1 and is followed by 4, 2, 3 (only 3 left).
  const NgramProposer proposer(config(2, 3, 4));
  EXPECT_EQ(proposer.propose(Tokens{1, 2, 3, 4, 2, 3}), (Tokens{4, 2, 3}));
}

TEST(NgramProposer, LatestVersusEarliestOccurrence) {
  const Tokens tokens = {1, 2, 9, 1, 2, 8, 5, 1, 2};  // suffix [1,2] also at 0 and 3
  EXPECT_EQ(NgramProposer(config(2, 4, 4)).propose(tokens), (Tokens{8, 5, 1, 2}));
  EXPECT_EQ(NgramProposer(config(2, 4, 4, MatchPolicy::kEarliest)).propose(tokens),
            (Tokens{9, 1, 2, 8}));
}

TEST(NgramProposer, LongestNgramWinsOverLaterShorterMatch) {
  // n = 3: [1,2,3] at 1 -> 4, 9, 2, 3. The later [2,3] at 6 (n = 2) would propose 5, 1, 2, 3.
  const Tokens tokens = {7, 1, 2, 3, 4, 9, 2, 3, 5, 1, 2, 3};
  EXPECT_EQ(NgramProposer(config(2, 3, 4)).propose(tokens), (Tokens{4, 9, 2, 3}));
  EXPECT_EQ(NgramProposer(config(2, 2, 4)).propose(tokens), (Tokens{5, 1, 2, 3}));
}

TEST(NgramProposer, NoMatchOrTooShortGivesNothing) {
  const NgramProposer proposer(config(2, 4, 3));
  EXPECT_TRUE(proposer.propose(Tokens{1, 2, 3, 4, 5}).empty());
  EXPECT_TRUE(proposer.propose(Tokens{}).empty());
  EXPECT_TRUE(proposer.propose(Tokens{5}).empty());
  EXPECT_TRUE(proposer.propose(Tokens{5, 5}).empty());  // suffix [5,5] has no earlier window
  EXPECT_TRUE(proposer.propose(Tokens{3, 1, 2, 4, 1}).empty());  // [4,1] only as the suffix...
  // ...but min_n = 1 finds [1] at 1, followed by 2, 4, 1.
  EXPECT_EQ(NgramProposer(config(1, 4, 3)).propose(Tokens{3, 1, 2, 4, 1}), (Tokens{2, 4, 1}));
}

TEST(NgramProposer, OverlappingRuns) {
  // [1,1,1] at 0 overlaps the suffix; one token follows it.
  EXPECT_EQ(NgramProposer(config(2, 3, 3)).propose(Tokens{1, 1, 1, 1}), (Tokens{1}));
  // Earliest on a longer run proposes up to k.
  EXPECT_EQ(NgramProposer(config(2, 3, 3, MatchPolicy::kEarliest))
                .propose(Tokens{1, 1, 1, 1, 1, 1, 1}),
            (Tokens{1, 1, 1}));
}

TEST(NgramProposer, ProposalCappedByKAndByOutSize) {
  const Tokens tokens = {4, 5, 6, 7, 8, 9, 10, 4, 5};
  EXPECT_EQ(NgramProposer(config(2, 3, 2)).propose(tokens), (Tokens{6, 7}));
  const NgramProposer proposer(config(2, 3, 5));
  EXPECT_EQ(proposer.propose(tokens), (Tokens{6, 7, 8, 9, 10}));
  int32_t out[3] = {-1, -1, -1};
  EXPECT_EQ(proposer.propose(tokens, std::span<int32_t>(out, 1)), 1);
  EXPECT_EQ(out[0], 6);
  EXPECT_EQ(out[1], -1);
  EXPECT_EQ(proposer.propose(tokens, std::span<int32_t>(out, 0)), 0);
}

TEST(NgramProposer, ValidateConfig) {
  EXPECT_TRUE(validate_ngram_config(config(2, 4, 4)).ok());
  EXPECT_FALSE(validate_ngram_config(config(0, 4, 4)).ok());
  EXPECT_FALSE(validate_ngram_config(config(3, 2, 4)).ok());
  EXPECT_FALSE(validate_ngram_config(config(2, 4, 0)).ok());
}

TEST(NgramProposer, FastScanEqualsReference) {
  std::mt19937 gen(17);
  int num_nonempty = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int32_t alphabet = 2 + static_cast<int32_t>(gen() % 4);
    const int32_t length = static_cast<int32_t>(gen() % 60);
    Tokens tokens(length);
    for (auto& t : tokens) t = static_cast<int32_t>(gen() % alphabet);
    const int32_t min_n = 1 + static_cast<int32_t>(gen() % 3);
    const int32_t max_n = min_n + static_cast<int32_t>(gen() % 3);
    const int32_t k = 1 + static_cast<int32_t>(gen() % 6);
    for (MatchPolicy policy : {MatchPolicy::kLatest, MatchPolicy::kEarliest}) {
      const NgramConfig c = config(min_n, max_n, k, policy);
      const Tokens fast = NgramProposer(c).propose(tokens);
      ASSERT_EQ(fast, propose_ngram_ref(c, tokens)) << "trial " << trial;
      num_nonempty += fast.empty() ? 0 : 1;
    }
  }
  EXPECT_GT(num_nonempty, 3000);  // the comparison exercised matches, not just empty answers
}

TEST(NgramProposer, LongContextAllocationFreeShape) {
  // A 4096-token context over a 49152-token vocabulary with a planted repeat near the start:
  // the scan walks the whole context and finds it.
  std::mt19937 gen(5);
  Tokens tokens(4096);
  for (auto& t : tokens) t = static_cast<int32_t>(gen() % 49152);
  const Tokens tail = {tokens[10], tokens[11], tokens[12], tokens[13]};
  tokens.insert(tokens.end(), tail.begin(), tail.end());
  const NgramProposer proposer(config(2, 4, 4));
  int32_t out[4];
  ASSERT_EQ(proposer.propose(tokens, out), 4);
  EXPECT_EQ(Tokens(out, out + 4), (Tokens{tokens[14], tokens[15], tokens[16], tokens[17]}));
}

// Through the Proposer interface (what the SpecDecoder calls): one batch of requests, each looked
// up in its prompt ++ output with its own k, equal to propose() on the joined tokens; a miss is an
// empty result; the cost is one "forward" per draft position of the largest k; nothing to catch up.
TEST(NgramProposer, ProposeBatchMatchesProposePerRequest) {
  NgramProposer proposer(config(2, 4, 4));
  Proposer& as_proposer = proposer;
  const Tokens prompt_a = {1, 2, 3, 4, 5, 6, 1, 2};
  const Tokens output_a = {3};
  const Tokens prompt_b = {7, 8, 9};
  const Tokens output_b = {10, 11};  // no repeat: a miss
  const DraftRequest requests[] = {{1, prompt_a, output_a, 3, nullptr, 0}, {2, prompt_b, output_b, 2, nullptr, 0}};
  std::vector<DraftResult> results(2);
  results[1].tokens = {99};  // stale entries are overwritten
  ThreadPool pool(1);
  as_proposer.propose_batch(requests, pool, results);
  EXPECT_EQ(results[0].tokens, (Tokens{4, 5, 6}));  // after "1 2 3": 4 5 6 (k = 3)
  EXPECT_TRUE(results[0].probs.empty());
  EXPECT_TRUE(results[1].tokens.empty());
  EXPECT_EQ(as_proposer.last_cost().num_forwards, 3);
  EXPECT_EQ(as_proposer.last_cost().num_catch_up_tokens, 0);
  EXPECT_EQ(as_proposer.num_catch_up(requests[0]), 0);
}

}  // namespace
}  // namespace tessera::speculative
