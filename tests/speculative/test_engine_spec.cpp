// Speculative decoding through the public Engine on stories260K (F32, 512-token vocabulary):
//  - greedy output is identical with and without speculation, token for token, for the n-gram and
//    the draft-model proposer, at batch 1 and with 4 sequences sharing the batch;
//  - stories260K as its own draft accepts every greedy draft (alpha = 1: k + 1 tokens per step),
//    and every sampled one too (p == q: the kernels are batch-invariant);
//  - `tessera quantize` of stories260K to Q8_0 keeps the 172-wide FFN-down rows F32 and quantizes
//    the rest; that Q8_0 file works as a (different) draft with greedy output still identical;
//  - a draft config without a path is refused;
//  - with the cost model and the guard on (timing decides), greedy output is still identical.
#include <gtest/gtest.h>

#include <cstdlib>

#include "engine_harness.h"
#include "gguf/gguf.h"

namespace tessera {
namespace {

using testing::engine_config;
using testing::run_engine;

const std::string kStories = TESSERA_TESTDATA_DIR "/models/stories260K.gguf";
constexpr int32_t kMaxTokens = 60;

std::vector<std::vector<int32_t>> stories_prompts(size_t n) {
  auto engine = Engine::create(engine_config(kStories, "", "", 4));
  TESSERA_CHECK(engine.ok(), "engine");
  const std::vector<std::string> texts = {"Once upon a time", "Lily and Ben went to the park.",
                                          "The cat sat on the mat. The cat", "Tom had a red ball"};
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < n; ++i) out.push_back((*engine)->tokenize(texts[i % texts.size()], true, false));
  return out;
}

SamplingParams greedy_params() {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = kMaxTokens;
  return p;
}

struct SpecCase {
  std::string speculative;  // "ngram" | "draft"
  size_t num_prompts;       // 1 or 4 (all in the batch together)
  int32_t k;
};

class GreedyEquivalence : public ::testing::TestWithParam<SpecCase> {};

TEST_P(GreedyEquivalence, IdenticalTokens) {
  const SpecCase c = GetParam();
  const auto prompts = stories_prompts(c.num_prompts);
  const auto base = run_engine(engine_config(kStories, "", "", c.k), prompts, greedy_params());
  const auto spec = run_engine(engine_config(kStories, c.speculative, c.speculative == "draft" ? kStories : "", c.k),
                               prompts, greedy_params());
  ASSERT_EQ(base.tokens.size(), spec.tokens.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(base.tokens[i].size(), static_cast<size_t>(kMaxTokens)) << "prompt " << i;
    EXPECT_EQ(spec.tokens[i], base.tokens[i]) << "prompt " << i;
  }
  EXPECT_EQ(base.metrics.spec_num_drafts, 0);
  EXPECT_GT(spec.metrics.spec_num_drafts, 0);  // speculation did run
  EXPECT_LE(spec.metrics.spec_num_accepted_tokens, spec.metrics.spec_num_draft_tokens);
  // Fewer target steps than tokens: every verified step yields >= 1 token, more when accepted.
  if (c.speculative == "draft") {
    // Self-draft: every greedy draft is accepted.
    EXPECT_EQ(spec.metrics.spec_num_accepted_tokens, spec.metrics.spec_num_draft_tokens);
    EXPECT_LT(spec.metrics.num_steps, base.metrics.num_steps);
  }
}

INSTANTIATE_TEST_SUITE_P(Stories, GreedyEquivalence,
                         ::testing::Values(SpecCase{"ngram", 1, 4}, SpecCase{"ngram", 4, 3},
                                           SpecCase{"draft", 1, 4}, SpecCase{"draft", 4, 2},
                                           SpecCase{"draft", 1, 7}),
                         [](const auto& info) {
                           return info.param.speculative + "_b" + std::to_string(info.param.num_prompts) +
                                  "_k" + std::to_string(info.param.k);
                         });

// With the wall-clock choices on (cost model and guard, as users run it), whether and how much to
// speculate depends on timing; the tokens must not.
TEST(GreedyEquivalenceWallClock, IdenticalTokensWhateverTheCostModelDecides) {
  const auto prompts = stories_prompts(4);
  for (const std::string speculative : {"ngram", "draft"}) {
    for (size_t n : {size_t{1}, size_t{4}}) {
      const std::vector<std::vector<int32_t>> some(prompts.begin(), prompts.begin() + static_cast<std::ptrdiff_t>(n));
      EngineConfig off = engine_config(kStories, "", "", 3);
      EngineConfig on = engine_config(kStories, speculative, speculative == "draft" ? kStories : "", 3);
      off.speculative_speed_guard = on.speculative_speed_guard = true;
      const auto base = run_engine(off, some, greedy_params());
      const auto spec = run_engine(on, some, greedy_params());
      for (size_t i = 0; i < n; ++i) {
        EXPECT_EQ(spec.tokens[i], base.tokens[i]) << speculative << " batch " << n << " prompt " << i;
      }
    }
  }
}

TEST(SelfDraft, AlphaOneGivesKPlusOneTokensPerStep) {
  constexpr int32_t k = 4;
  const auto prompts = stories_prompts(1);
  SamplingParams p = greedy_params();
  p.max_tokens = 1 + 5 * (k + 1);  // prefill token, then 5 full verification steps
  const auto r = run_engine(engine_config(kStories, "draft", kStories, k), prompts, p);
  EXPECT_EQ(r.tokens[0].size(), static_cast<size_t>(p.max_tokens));
  EXPECT_EQ(r.metrics.spec_num_drafts, 5);
  EXPECT_EQ(r.metrics.spec_num_draft_tokens, 5 * k);
  EXPECT_EQ(r.metrics.spec_num_accepted_tokens, 5 * k);
  EXPECT_DOUBLE_EQ(testing::tokens_per_spec_step(r.metrics), k + 1.0);  // (1 - 1^(k+1))/(1 - 1) -> k+1
  ASSERT_EQ(r.metrics.spec_accepted_per_position.size(), static_cast<size_t>(k));
  for (int64_t n : r.metrics.spec_accepted_per_position) EXPECT_EQ(n, 5);
  EXPECT_EQ(r.metrics.num_steps, 1 + 5);
}

TEST(SelfDraft, SampledDraftsAreAcceptedBecausePEqualsQ) {
  const auto prompts = stories_prompts(4);
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_p = 0.95f;
  p.max_tokens = kMaxTokens;
  p.seed = 1234;
  const auto r = run_engine(engine_config(kStories, "draft", kStories, 3), prompts, p);
  ASSERT_GT(r.metrics.spec_num_draft_tokens, 30);
  // q rows reach the rejection sampler aligned with their drafts: min(1, p/q) = 1 everywhere.
  EXPECT_EQ(r.metrics.spec_num_accepted_tokens, r.metrics.spec_num_draft_tokens);
  for (const auto& t : r.tokens) EXPECT_EQ(t.size(), static_cast<size_t>(kMaxTokens));
}

TEST(DraftConfig, MissingDraftPathIsRefused) {
  auto e = Engine::create(engine_config(kStories, "draft", "", 4));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code, ErrorCode::kInvalidArgument);
  auto bad = Engine::create(engine_config(kStories, "draft", "/nonexistent.gguf", 4));
  EXPECT_FALSE(bad.ok());
}

TEST(Quantize, StoriesQ8_0KeepsNarrowRowsF32AndServesAsDraft) {
  const std::string out = ::testing::TempDir() + "/stories260K.q8_0.gguf";
  const std::string cmd = std::string(TESSERA_BIN) + " quantize " + kStories + " " + out + " Q8_0 >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto q = gguf::GgufFile::open(out);
  ASSERT_TRUE(q.ok()) << q.error().message;
  int num_q8 = 0, num_f32_matrices = 0;
  for (const gguf::TensorInfo& t : q->tensors()) {
    if (t.dims.size() < 2) {
      EXPECT_EQ(t.type, DType::F32) << t.name;  // norms stay F32
    } else if (t.dims[0] % 32 != 0) {
      EXPECT_EQ(t.type, DType::F32) << t.name;  // 172-wide rows cannot be blocked by 32
      ++num_f32_matrices;
    } else {
      EXPECT_EQ(t.type, DType::Q8_0) << t.name;
      ++num_q8;
    }
  }
  EXPECT_EQ(num_f32_matrices, 5);  // ffn_down of each of the 5 layers
  EXPECT_EQ(num_q8, 5 * 6 + 2);    // q k v o gate up per layer, embeddings and output
  // The Q8_0 model as the draft of the F32 target: outputs unchanged, most drafts accepted.
  const auto prompts = stories_prompts(4);
  const auto base = run_engine(engine_config(kStories, "", "", 4), prompts, greedy_params());
  const auto spec = run_engine(engine_config(kStories, "draft", out, 4), prompts, greedy_params());
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(spec.tokens[i], base.tokens[i]) << "prompt " << i;
  EXPECT_GT(spec.metrics.spec_num_accepted_tokens, spec.metrics.spec_num_draft_tokens / 2);
}

}  // namespace
}  // namespace tessera
