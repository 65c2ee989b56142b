// DraftProposer on stories260K used as its own draft: greedy drafts equal the 200-token greedy
// continuation that llama.cpp produced (stories260K.golden.json), one sequence or many in a batch,
// after roll-backs of any length; the draft KV is rolled back to the common prefix; sampled drafts
// come with their q rows; a full draft cache skips the sequence; mismatched vocabularies refuse.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <fstream>
#include <numeric>

#include "speculative/draft_proposer.h"

namespace tessera::speculative {
namespace {

const std::string kStories = TESSERA_TESTDATA_DIR "/models/stories260K.gguf";
const std::string kGolden = TESSERA_TESTDATA_DIR "/models/stories260K.golden.json";
constexpr float kProbSumTolerance = 1e-4f;  // |sum(q row) - 1|

std::vector<int32_t> golden_greedy() {  // [200] greedy continuation of the prompt [1] (BOS)
  std::ifstream in(kGolden);
  return nlohmann::json::parse(in).at("cases").at(0).at("greedy_ids").get<std::vector<int32_t>>();
}

std::unique_ptr<LlamaModel> load_stories() {
  auto m = LlamaModel::load(kStories);
  TESSERA_CHECK(m.ok(), "cannot load {}", kStories);
  return std::move(*m);
}

DraftProposerConfig small_config(int32_t k) {
  DraftProposerConfig c;
  c.num_speculative_tokens = k;
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = 64;  // small: long catch-ups are split over several forwards
  c.max_model_len = 512;
  c.block_size = 16;
  c.kv_cache_bytes = int64_t{8} << 20;
  c.num_threads = 2;
  return c;
}

class DraftProposerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    greedy_ = golden_greedy();
    prompt_ = {1};
  }
  // Output = the first n golden tokens.
  std::span<const int32_t> output(size_t n) const { return std::span<const int32_t>(greedy_).first(n); }
  std::vector<int32_t> expected(size_t n, size_t k) const {
    return {greedy_.begin() + static_cast<std::ptrdiff_t>(n), greedy_.begin() + static_cast<std::ptrdiff_t>(n + k)};
  }

  std::vector<int32_t> greedy_, prompt_;
  ThreadPool pool_{2};
};

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

TEST_F(DraftProposerTest, GreedyDraftsFollowTheGoldenContinuation) {
  DraftProposer proposer(load_stories(), small_config(4));
  const SamplingParams p = greedy();
  // Output grows as a target with alpha = 1 would grow it: all 4 drafts + 1 bonus per step.
  for (size_t n = 0; n + 4 <= 120; n += 5) {
    DraftRequest r{7, prompt_, output(n), 4, &p};
    auto res = proposer.propose({&r, 1}, pool_);
    ASSERT_EQ(res.size(), 1u);
    EXPECT_EQ(res[0].tokens, expected(n, 4)) << "after " << n << " output tokens";
    EXPECT_TRUE(res[0].probs.empty());
    // The draft fed T (1 + n tokens) and d_1..d_3.
    EXPECT_EQ(proposer.num_computed(7), static_cast<int32_t>(1 + n + 3));
  }
}

TEST_F(DraftProposerTest, RollbackKeepsOnlyTheCommonPrefix) {
  DraftProposer proposer(load_stories(), small_config(4));
  const SamplingParams p = greedy();
  DraftRequest r{3, prompt_, output(10), 4, &p};
  ASSERT_EQ(proposer.propose({&r, 1}, pool_)[0].tokens, expected(10, 4));
  EXPECT_EQ(proposer.num_computed(3), 1 + 10 + 3);
  // Only 1 draft accepted, then a corrected token that differs from d_2: fed keeps T + d_1.
  std::vector<int32_t> out(greedy_.begin(), greedy_.begin() + 11);
  out.push_back(greedy_[12] == 5 ? 6 : 5);  // a token the draft did not propose
  r.output = out;
  auto res = proposer.propose({&r, 1}, pool_);
  EXPECT_EQ(res[0].tokens.size(), 4u);
  EXPECT_EQ(proposer.num_computed(3), static_cast<int32_t>(1 + out.size() + 3));
  // Going back to the golden path (a shorter, different history) recomputes from the fork point.
  r.output = output(40);
  EXPECT_EQ(proposer.propose({&r, 1}, pool_)[0].tokens, expected(40, 4));
  EXPECT_EQ(proposer.num_computed(3), 1 + 40 + 3);
  proposer.release(3);
  EXPECT_EQ(proposer.num_computed(3), 0);
  EXPECT_EQ(proposer.num_sequences(), 0);
}

TEST_F(DraftProposerTest, CatchUpAcrossPromptAndOutputIsOneForward) {
  DraftProposer proposer(load_stories(), small_config(3));
  const SamplingParams p = greedy();
  // T = BOS + golden[0, 14) split as a 5-token prompt and a 10-token output.
  const std::vector<int32_t> prompt = {1, greedy_[0], greedy_[1], greedy_[2], greedy_[3]};
  const std::vector<int32_t> out(greedy_.begin() + 4, greedy_.begin() + 14);
  DraftRequest r{5, prompt, out, 3, &p};
  EXPECT_EQ(proposer.propose({&r, 1}, pool_)[0].tokens, expected(14, 3));
  const DraftCallStats& call = proposer.last_call();
  EXPECT_EQ(call.num_seqs, 1);
  EXPECT_EQ(call.num_catch_up_tokens, 15);
  EXPECT_EQ(call.num_catch_up_forwards, 1);  // not split where the prompt ends
  EXPECT_EQ(call.num_draft_forwards, 2);     // d_2, d_3
  // All 3 accepted + bonus: the next call feeds d_3 and the bonus token, then drafts.
  const std::vector<int32_t> out2(greedy_.begin() + 4, greedy_.begin() + 18);
  r.output = out2;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(proposer.propose({&r, 1}, pool_)[0].tokens, expected(18, 3));
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(proposer.last_call().num_catch_up_tokens, 2);
  EXPECT_EQ(proposer.last_call().num_catch_up_forwards, 1);
  // The call's timings (the spec cost model's input) are of its forwards: a catch-up forward and
  // two draft forwards ran, and both phases lie inside the call.
  EXPECT_GT(proposer.last_call().catch_up_seconds, 0.0);
  EXPECT_GT(proposer.last_call().draft_seconds, 0.0);
  EXPECT_LE(proposer.last_call().catch_up_seconds + proposer.last_call().draft_seconds, wall);
}

TEST_F(DraftProposerTest, PrefixCacheServesCommittedBlocksOnly) {
  DraftProposer proposer(load_stories(), small_config(4));
  const SamplingParams p = greedy();
  DraftRequest a{1, prompt_, output(30), 4, &p};  // T = 31 tokens, drafts fed at 31..33
  ASSERT_EQ(proposer.propose({&a, 1}, pool_)[0].tokens, expected(30, 4));
  EXPECT_EQ(proposer.stats().num_prefix_hit_tokens, 0);
  // Only block 0 ([0, 16)) is all committed tokens; block 1 holds position 31, a draft.
  DraftRequest b{2, prompt_, output(40), 4, &p};  // T = 41 tokens
  EXPECT_EQ(proposer.propose({&b, 1}, pool_)[0].tokens, expected(40, 4));
  EXPECT_EQ(proposer.stats().num_prefix_hit_tokens, 16);
  EXPECT_EQ(proposer.last_call().num_catch_up_tokens, 41 - 16);
  // b cached [0, 32): a third sequence with the same T starts there; another cache salt does not.
  DraftRequest c{3, prompt_, output(40), 4, &p};
  EXPECT_EQ(proposer.num_reusable(c), 32);
  EXPECT_EQ(proposer.num_reusable(b), 41 + 3);  // b itself: T and d_1..d_3 are in its KV
  EXPECT_EQ(proposer.propose({&c, 1}, pool_)[0].tokens, expected(40, 4));
  EXPECT_EQ(proposer.last_call().num_catch_up_tokens, 41 - 32);
  proposer.check_integrity();
  DraftRequest d{4, prompt_, output(40), 4, &p, /*cache_extra_key=*/77};
  EXPECT_EQ(proposer.propose({&d, 1}, pool_)[0].tokens, expected(40, 4));
  EXPECT_EQ(proposer.last_call().num_catch_up_tokens, 41);
  EXPECT_EQ(proposer.stats().num_prefix_hit_tokens, 16 + 32);
  // Released sequences leave their blocks cached (allocatable); the pool stays consistent.
  for (int64_t id = 1; id <= 4; ++id) proposer.release(id);
  EXPECT_EQ(proposer.num_sequences(), 0);
  proposer.check_integrity();
}

TEST_F(DraftProposerTest, BatchedSequencesEqualOneAtATime) {
  DraftProposer batched(load_stories(), small_config(3));
  DraftProposer single(load_stories(), small_config(3));
  const SamplingParams p = greedy();
  // Different lengths (catch-ups of 1..91 tokens, split by the 64-token budget), different k.
  std::vector<size_t> lens = {0, 17, 90, 45};
  const std::vector<int32_t> ks = {3, 1, 2, 3};
  std::vector<DraftRequest> reqs;
  for (size_t i = 0; i < lens.size(); ++i) {
    reqs.push_back({static_cast<int64_t>(100 + i), prompt_, output(lens[i]), ks[i], &p});
  }
  for (int round = 0; round < 3; ++round) {
    auto res = batched.propose(reqs, pool_);
    for (size_t i = 0; i < reqs.size(); ++i) {
      auto one = single.propose({&reqs[i], 1}, pool_);
      EXPECT_EQ(res[i].tokens, one[0].tokens) << "seq " << i << " round " << round;
      EXPECT_EQ(res[i].tokens, expected(lens[i], static_cast<size_t>(ks[i]))) << "seq " << i;
      lens[i] += static_cast<size_t>(ks[i]) + 1;  // all accepted + bonus
      reqs[i].output = output(lens[i]);
    }
  }
  EXPECT_GT(batched.stats().num_forwards, 0);
  EXPECT_EQ(batched.stats().num_cache_full, 0);
}

TEST_F(DraftProposerTest, SampledDraftsComeWithTheirDistributions) {
  DraftProposer proposer(load_stories(), small_config(4));
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 20;
  DraftRequest r{9, prompt_, output(30), 4, &p};
  auto res = proposer.propose({&r, 1}, pool_);
  const size_t vocab = 512;
  ASSERT_EQ(res[0].tokens.size(), 4u);
  ASSERT_EQ(res[0].probs.size(), 4 * vocab);
  for (size_t j = 0; j < 4; ++j) {
    std::span<const float> row(res[0].probs.data() + j * vocab, vocab);
    EXPECT_NEAR(std::accumulate(row.begin(), row.end(), 0.0), 1.0, kProbSumTolerance);
    EXPECT_GT(row[static_cast<size_t>(res[0].tokens[j])], 0.0f) << "draft " << j << " has q = 0";
    EXPECT_LE(std::count_if(row.begin(), row.end(), [](float q) { return q > 0.0f; }), 20);  // top-k
  }
}

TEST_F(DraftProposerTest, FullDraftCacheSkipsTheSequence) {
  DraftProposerConfig c = small_config(4);
  c.max_model_len = 64;
  c.kv_cache_bytes = 0;  // the floor: one full-length sequence (4 blocks of 16) + 1
  DraftProposer proposer(load_stories(), c);
  EXPECT_EQ(proposer.num_free_blocks(), 5);
  const SamplingParams p = greedy();
  std::vector<DraftRequest> reqs = {{1, prompt_, output(50), 4, &p}, {2, prompt_, output(30), 4, &p}};
  auto res = proposer.propose(reqs, pool_);
  EXPECT_EQ(res[0].tokens, expected(50, 4));  // 54 positions: 4 blocks
  EXPECT_TRUE(res[1].tokens.empty());          // needs 3 more blocks, 1 left
  EXPECT_EQ(proposer.stats().num_cache_full, 1);
  EXPECT_EQ(proposer.num_computed(2), 0);
  proposer.release(1);
  EXPECT_EQ(proposer.num_free_blocks(), 5);
  // Near the context limit k shrinks so positions stay below max_model_len.
  DraftRequest last{1, prompt_, output(61), 4, &p};
  EXPECT_EQ(proposer.propose({&last, 1}, pool_)[0].tokens, expected(61, 3));  // L = 62: k = 64 - 62 + 1
}

TEST(DraftVocab, SameModelIsCompatible) {
  auto a = load_stories();
  auto b = load_stories();
  EXPECT_TRUE(check_vocab_compatible(*a, *b).ok());
  auto loaded = DraftProposer::load(kStories, *a, small_config(2));
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_EQ((*loaded)->config().max_model_len, 512);
}

TEST(DraftVocab, MissingFileIsAnError) {
  auto a = load_stories();
  auto loaded = DraftProposer::load("/nonexistent/draft.gguf", *a, small_config(2));
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.error().message.find("loading draft model"), std::string::npos);
}

}  // namespace
}  // namespace tessera::speculative
