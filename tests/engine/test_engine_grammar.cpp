// Structured outputs in the engine (SmolLM2): a batch mixing constrained and unconstrained rows
// leaves the unconstrained ones bit-identical to running them alone; constrained outputs are in
// their language, with n > 1 and with n-gram speculation; a complete grammar stops the request;
// what cannot be enforced is refused at submit.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "engine_harness.h"

namespace tessera::testing {
namespace {

const std::string kModel = TESSERA_PROJECT_TESTDATA_DIR "/../../models/SmolLM2-135M-Instruct.Q4_1.gguf";

SamplingParams params(float temperature, int32_t max_tokens, uint64_t seed, int32_t n = 1) {
  SamplingParams p;
  p.temperature = temperature;
  p.max_tokens = max_tokens;
  p.seed = seed;
  p.n = n;
  return p;
}

TEST(EngineGrammar, MixedBatchSpeculationAndSamples) {
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "no " << kModel;
  for (const char* speculative : {"", "ngram"}) {
    EngineConfig c = base_config(kModel);
    c.speculative = speculative;
    c.speculative_speed_guard = false;
    auto engine = make_engine(c);
    ASSERT_NE(engine, nullptr);
    const auto prompt = engine->tokenize("The list of numbers 1, 2, 3, 4, 5, 6, 7, 8, 9", true, false);
    TestRequest free_greedy{prompt, params(0.0f, 24, 1)};
    TestRequest regex{prompt, params(1.0f, 40, 2, 3)};
    regex.params.structured.kind = StructuredOutput::Kind::kRegex;
    regex.params.structured.text = "(, [0-9]{1,2}){3,6}\\.";
    TestRequest choice{prompt, params(0.0f, 8, 3)};
    choice.params.structured.kind = StructuredOutput::Kind::kChoice;
    choice.params.structured.choices = {", 10", ", ten"};
    const auto alone = run_batch(*engine, {free_greedy});
    const auto mixed = run_batch(*engine, {free_greedy, regex, choice});
    ASSERT_EQ(mixed.size(), 3u);
    EXPECT_EQ(mixed[0][0].token_ids, alone[0][0].token_ids) << speculative;  // masks touch no other row
    const std::regex re("(, [0-9]{1,2}){3,6}\\.");
    for (const SampleResult& s : mixed[1]) {
      EXPECT_TRUE(std::regex_match(s.text, re)) << speculative << ": " << s.text;
      EXPECT_EQ(s.finish_reason, FinishReason::kStop);  // the grammar completed
    }
    EXPECT_TRUE(mixed[2][0].text == ", 10" || mixed[2][0].text == ", ten") << mixed[2][0].text;
    EXPECT_EQ(mixed[2][0].finish_reason, FinishReason::kStop);
  }
}

TEST(EngineGrammar, UnenforceableIsRefusedAtSubmit) {
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "no " << kModel;
  auto engine = make_engine(base_config(kModel));
  ASSERT_NE(engine, nullptr);
  GenerateRequest r;
  r.prompt_ids = engine->tokenize("x", true, false);
  r.params.structured.kind = StructuredOutput::Kind::kJsonSchema;
  r.params.structured.text = R"({"type": "array", "uniqueItems": true})";
  auto s = engine->submit(r);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(s.error().message.find("uniqueItems"), std::string::npos) << s.error().message;
}

}  // namespace
}  // namespace tessera::testing
