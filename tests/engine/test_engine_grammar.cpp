// Structured outputs in the engine (SmolLM2): a batch mixing constrained and unconstrained rows
// leaves the unconstrained ones bit-identical to running them alone; constrained outputs are in
// their language, with n > 1 and with n-gram speculation; a complete grammar stops the request;
// greedy constrained outputs are token for token the same alone, batched, from the prefix cache,
// preempted and recomputed, with speculation and as n = 2 samples; what cannot be enforced is
// refused at submit.
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

// Greedy requests sharing a 60-token prefix under every kind of constraint (and one without).
std::vector<TestRequest> constrained_requests(Engine& engine) {
  std::string prefix = "You write facts about people in the format asked for, nothing else.";
  while (engine.tokenize(prefix, true, false).size() < 60) prefix += " Keep every answer short and exact.";
  struct Spec {
    const char* question;
    StructuredOutput::Kind kind;
    const char* text;
    int32_t n;
  };
  const Spec specs[] = {
      {" Alice is 31. As JSON:", StructuredOutput::Kind::kJsonSchema,
       R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
           "age": {"type": "integer", "minimum": 0, "maximum": 120}}, "required": ["name", "age"],
           "additionalProperties": false})", 1},
      {" Bob is 45. In one sentence:", StructuredOutput::Kind::kRegex, "[A-Z][a-z]{2,8} is [0-9]{1,3} years old\\.", 2},
      {" Is Carol older than 30?", StructuredOutput::Kind::kChoice, "", 1},
      {" Dave, 27, as a JSON object:", StructuredOutput::Kind::kJsonObject, "", 1},
      {" Erin is 52. Her age:", StructuredOutput::Kind::kGrammar, R"(root ::= " " [1-9] [0-9]? " years")", 1},
      {" Frank is 60. Tell me about him.", StructuredOutput::Kind::kNone, "", 1},
  };
  std::vector<TestRequest> reqs;
  for (const Spec& sp : specs) {
    TestRequest r{engine.tokenize(prefix + sp.question, true, false), params(0.0f, 32, 0, sp.n)};
    r.params.structured.kind = sp.kind;
    r.params.structured.text = sp.text;
    if (sp.kind == StructuredOutput::Kind::kChoice) r.params.structured.choices = {" yes", " no", " maybe"};
    reqs.push_back(std::move(r));
  }
  return reqs;
}

std::vector<std::pair<std::vector<int32_t>, FinishReason>> outcomes(const std::vector<RequestResult>& results) {
  std::vector<std::pair<std::vector<int32_t>, FinishReason>> out;
  for (const RequestResult& r : results) {
    for (const SampleResult& s : r) out.emplace_back(s.token_ids, s.finish_reason);
  }
  return out;
}

TEST(EngineGrammar, GreedyConstrainedOutputsDoNotDependOnServingFeatures) {
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "no " << kModel;
  EngineConfig reference_config = base_config(kModel);
  reference_config.enable_prefix_caching = false;
  auto reference_engine = make_engine(reference_config);
  ASSERT_NE(reference_engine, nullptr);
  const std::vector<TestRequest> reqs = constrained_requests(*reference_engine);
  const auto want = outcomes(run_one_by_one(*reference_engine, reqs));
  ASSERT_EQ(want.size(), 7u);  // the regex request has n = 2
  int completed = 0;
  for (const auto& [tokens, finish] : want) completed += finish == FinishReason::kStop;
  EXPECT_GE(completed, 5) << "most constrained requests end by completing their grammar";
  EXPECT_EQ(want[1], want[2]) << "greedy samples of one request agree";
  const ModelInfo& info = reference_engine->model_info();
  const int64_t bytes_per_token = info.kv_cache_bytes / (int64_t{info.num_kv_blocks} * info.block_size);
  size_t longest_prompt = 0;
  for (const TestRequest& r : reqs) longest_prompt = std::max(longest_prompt, r.prompt.size());
  reference_engine.reset();

  {  // Batched, with the prefix cache: the second round's prompts come from the cache.
    EngineConfig c = base_config(kModel);
    c.enable_prefix_caching = true;
    auto e = make_engine(c);
    EXPECT_EQ(outcomes(run_batch(*e, reqs)), want) << "batched";
    const auto again = run_batch(*e, reqs);
    EXPECT_EQ(outcomes(again), want) << "batched, prompts from the prefix cache";
    for (const RequestResult& r : again) {
      EXPECT_GE(r[0].num_cached_prompt_tokens, 48) << "the shared prefix was cached";
      std::printf("cached %d ", r[0].num_cached_prompt_tokens);
    }
    std::printf("prompt tokens in round 2\n");
  }
  {  // Room for two prompts (72-75 tokens, 5 blocks each) and no more: two run, and as they grow
     // past 80 tokens one is preempted and recomputed.
    EngineConfig c = base_config(kModel);
    c.enable_prefix_caching = false;
    const int64_t blocks = static_cast<int64_t>(2 * ((longest_prompt + 15) / 16));
    c.kv_cache_bytes = blocks * 16 * bytes_per_token;
    auto e = make_engine(c);
    EXPECT_EQ(outcomes(run_batch(*e, reqs)), want) << "preempted and recomputed";
    const int64_t preemptions = settled_metrics(*e).num_preemptions;
    EXPECT_GT(preemptions, 0);
    std::printf("%lld blocks: %lld preemptions\n", static_cast<long long>(blocks), static_cast<long long>(preemptions));
  }
  {  // N-gram speculation: drafts are checked against the grammar, a refused one rolls it back.
    EngineConfig c = base_config(kModel);
    c.speculative = "ngram";
    c.speculative_speed_guard = false;
    auto e = make_engine(c);
    EXPECT_EQ(outcomes(run_batch(*e, reqs)), want) << "n-gram speculation";
    const MetricsSnapshot m = settled_metrics(*e);
    EXPECT_GT(m.spec_num_draft_tokens, 0);
    EXPECT_GT(m.spec_num_accepted_tokens, 0);
    EXPECT_LT(m.spec_num_accepted_tokens, m.spec_num_draft_tokens) << "some drafts were refused";
    std::printf("n-gram: %lld draft tokens, %lld accepted\n", static_cast<long long>(m.spec_num_draft_tokens),
                static_cast<long long>(m.spec_num_accepted_tokens));
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
