// Draft-model speculation on the real SmolLM2-135M-Instruct (LABEL model): the Q4_1 target with a
// Q8_0 draft made by `tessera quantize` gives token-for-token the same greedy output as the target
// alone, at batch 1 and with 4 chat requests in the batch; a draft with another vocabulary
// (stories260K) is refused with a clear error.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "engine_harness.h"

namespace tessera {
namespace {

using testing::engine_config;
using testing::run_engine;

const std::string kTarget = TESSERA_PROJECT_TESTDATA_DIR "/../../models/SmolLM2-135M-Instruct.Q4_1.gguf";
const std::string kStories = TESSERA_TESTDATA_DIR "/models/stories260K.gguf";
constexpr int32_t kMaxTokens = 32;

std::string quantized_draft(const std::string& type) {
  const std::string out = ::testing::TempDir() + "/smollm2." + type + ".gguf";
  const std::string cmd = std::string(TESSERA_BIN) + " quantize " + kTarget + " " + out + " " + type + " >/dev/null 2>&1";
  TESSERA_CHECK(std::system(cmd.c_str()) == 0, "{} failed", cmd);
  return out;
}

std::vector<std::vector<int32_t>> chat_prompts(size_t n) {
  auto engine = Engine::create(engine_config(kTarget, "", "", 4));
  TESSERA_CHECK(engine.ok(), "engine");
  const std::vector<std::string> questions = {
      "Repeat exactly: the quick brown fox jumps over the lazy dog.",
      "What is the capital of France?",
      "Rewrite in plain words: The meeting has been postponed until further notice.",
      "List three colors."};
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < n; ++i) {
    auto prompt = (*engine)->chat_prompt(chat_template_input({{"user", questions[i % questions.size()]}}), false);
    TESSERA_CHECK(prompt.ok(), "template");
    out.push_back(std::move(prompt->ids));
  }
  return out;
}

TEST(SmolLM2Draft, Q8_0DraftKeepsGreedyOutputIdentical) {
  const std::string draft = quantized_draft("Q8_0");
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = kMaxTokens;
  for (size_t n : {size_t{1}, size_t{4}}) {
    const auto prompts = chat_prompts(n);
    const auto base = run_engine(engine_config(kTarget, "", "", 4), prompts, p);
    const auto spec = run_engine(engine_config(kTarget, "draft", draft, 4), prompts, p);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(spec.tokens[i], base.tokens[i]) << "batch " << n << " prompt " << i;
    const auto& m = spec.metrics;
    ASSERT_GT(m.spec_num_draft_tokens, 0);
    const double alpha = static_cast<double>(m.spec_num_accepted_tokens) / static_cast<double>(m.spec_num_draft_tokens);
    std::printf("batch %zu: drafts %lld, draft tokens %lld, accepted %lld (%.2f), %.2f tokens per target step\n", n,
                static_cast<long long>(m.spec_num_drafts), static_cast<long long>(m.spec_num_draft_tokens),
                static_cast<long long>(m.spec_num_accepted_tokens), alpha, testing::tokens_per_spec_step(m));
    EXPECT_GT(alpha, 0.5);  // Q8_0 of the same weights: drafts mostly right
  }
}

TEST(SmolLM2Draft, OtherVocabularyIsRefused) {
  auto e = Engine::create(engine_config(kTarget, "draft", kStories, 4));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(e.error().message.find("vocabulary"), std::string::npos) << e.error().message;
}

}  // namespace
}  // namespace tessera
