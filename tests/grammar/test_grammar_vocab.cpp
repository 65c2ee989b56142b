// Token masks on real vocabularies (SmolLM2 49k, Qwen2.5 152k): at every step of seeded random
// walks through JSON Schema, json_object, regex and raw grammars, GrammarMatcher's mask equals the
// RefMatcher twin's (each token's bytes matched directly). Skips a model that is not installed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "structured/structured_outputs.h"
#include "gguf/gguf.h"
#include "grammar/json_schema.h"
#include "grammar/regex_to_grammar.h"
#include "mask_walk.h"

namespace tessera::grammar {
namespace {

const std::string kModels = TESSERA_PROJECT_TESTDATA_DIR "/../../models/";

void check_vocabulary(const std::string& file_name, int steps) {
  const std::string path = kModels + file_name;
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not installed";
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file.ok());
  auto tok = tokenizer::Tokenizer::from_gguf(file.value());
  ASSERT_TRUE(tok.ok());
  const TokenVocabulary vocab = structured::grammar_vocabulary(tok.value());
  auto tokens = std::make_shared<const TokenTable>(vocab);
  std::vector<std::string> grammars = {
      json_schema_to_grammar(R"({"type": "object", "properties": {"name": {"type": "string",
          "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 120},
          "tags": {"type": "array", "items": {"enum": ["a b", "c\"d"]}, "maxItems": 2}},
          "required": ["name"]})").value(),
      json_object_grammar({JsonWhitespace::kAny}),
      regex_to_grammar("[A-Z][a-z]{2,5}( [0-9]+)?\\.").value(),
      "root ::= \"<\" [a-z]+ \">\" ( [^<]{1,8} | root )* \"</\" [a-z]+ \">\"\n",
  };
  for (const std::string& text : grammars) {
    auto compiled = compile_grammar(text, tokens);
    ASSERT_TRUE(compiled.ok()) << compiled.error().message;
    for (uint64_t seed = 1; seed <= 1; ++seed) {
      EXPECT_GT(testing::walk_and_compare(compiled.value(), vocab, seed, steps), 0) << text;
    }
  }
}

// The suite's schemas (maxLength strings among them) on a real vocabulary: the chain links walked
// together give every position the classes that one walk per link gives.
void check_chain_walks(const std::string& file_name) {
  const std::string path = kModels + file_name;
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not installed";
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file.ok());
  auto tok = tokenizer::Tokenizer::from_gguf(file.value());
  ASSERT_TRUE(tok.ok());
  auto tokens = std::make_shared<const TokenTable>(structured::grammar_vocabulary(tok.value()));
  std::ifstream in(TESSERA_PROJECT_TESTDATA_DIR "/grammar/schemas.json");
  const auto suite = nlohmann::ordered_json::parse(in);
  size_t chain_walked = 0;
  for (const auto& entry : suite) {
    const std::string name = entry["name"];
    auto text = json_schema_to_grammar(entry["schema"].dump());
    ASSERT_TRUE(text.ok()) << name;
    auto fast = compile_grammar(text.value(), tokens);
    auto slow = compile_grammar(text.value(), tokens, CompileOptions{.walk_chain_links_together = false});
    ASSERT_TRUE(fast.ok() && slow.ok()) << name;
    testing::expect_same_classes(*fast.value(), *slow.value(), name);
    chain_walked += fast.value()->num_chain_walked;
  }
  EXPECT_GT(chain_walked, 0u);
}

TEST(GrammarVocab, SmolLM2ChainWalksEqualPerLinkWalks) { check_chain_walks("SmolLM2-135M-Instruct.Q4_1.gguf"); }
TEST(GrammarVocab, QwenChainWalksEqualPerLinkWalks) { check_chain_walks("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"); }

TEST(GrammarVocab, SmolLM2MasksEqualTheTwin) { check_vocabulary("SmolLM2-135M-Instruct.Q4_1.gguf", 8); }
TEST(GrammarVocab, QwenMasksEqualTheTwin) { check_vocabulary("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", 3); }

}  // namespace
}  // namespace tessera::grammar
