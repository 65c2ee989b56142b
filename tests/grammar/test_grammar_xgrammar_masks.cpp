// Token masks equal XGrammar's: tests/data/grammar/xgrammar_masks.json (written offline by
// scripts/gen_grammar_xgrammar_masks.py) holds, for the SmolLM2 and Qwen2.5 vocabularies,
// seeded random walks through several grammars with XGrammar's mask at every step (how many
// tokens are allowed, an FNV-1a hash of their ids, the ids when few) and the token it took.
// GrammarMatcher walks the same tokens and must give the same mask at every step. Skips a
// vocabulary whose model is not installed; fails if the vocabulary read here is not the one
// the goldens were made from (TokenTable fingerprint).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "structured/structured_outputs.h"
#include "gguf/gguf.h"
#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"

namespace tessera::grammar {
namespace {

const std::string kModels = TESSERA_PROJECT_TESTDATA_DIR "/../../models/";

// The golden script's hash: FNV-1a over the allowed ids as little-endian 32-bit words.
uint64_t ids_hash(const std::vector<int32_t>& ids) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t id : ids) {
    for (int k = 0; k < 4; ++k) h = (h ^ ((static_cast<uint32_t>(id) >> (8 * k)) & 0xFF)) * 1099511628211ull;
  }
  return h;
}

nlohmann::json load_golden() {
  std::ifstream in(TESSERA_PROJECT_TESTDATA_DIR "/grammar/xgrammar_masks.json");
  EXPECT_TRUE(in.good());
  return nlohmann::json::parse(in);
}

void check_vocabulary(const std::string& name) {
  const nlohmann::json golden = load_golden();
  nlohmann::json info;
  for (const auto& v : golden["vocabularies"]) {
    if (v["name"] == name) info = v;
  }
  ASSERT_FALSE(info.is_null()) << name;
  const std::string path = kModels + info["file"].get<std::string>();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not installed";
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file.ok());
  auto tok = tokenizer::Tokenizer::from_gguf(file.value());
  ASSERT_TRUE(tok.ok());
  auto tokens = std::make_shared<const TokenTable>(structured::grammar_vocabulary(tok.value()));
  char fingerprint[17];
  snprintf(fingerprint, sizeof fingerprint, "%016llx", static_cast<unsigned long long>(tokens->fingerprint()));
  ASSERT_EQ(fingerprint, info["fingerprint"].get<std::string>()) << "not the vocabulary of the goldens";
  ASSERT_EQ(tokens->vocab_size(), info["vocab_size"].get<int32_t>());

  std::vector<uint64_t> mask(mask_words(tokens->vocab_size()));
  size_t num_steps = 0, num_cases = 0;
  for (const auto& c : golden["cases"]) {
    if (c["vocabulary"] != name) continue;
    const std::string label = c["grammar_name"].get<std::string>() + " seed " + c["seed"].dump();
    auto compiled = compile_grammar(c["grammar"].get<std::string>(), tokens);
    ASSERT_TRUE(compiled.ok()) << label << ": " << compiled.error().message;
    GrammarMatcher m(compiled.value());
    int step = 0;
    for (const auto& s : c["steps"]) {
      m.fill_mask(mask);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < tokens->vocab_size(); ++id) {
        if (mask_test(mask, id)) allowed.push_back(id);
      }
      char hash[17];
      snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(ids_hash(allowed)));
      ASSERT_EQ(allowed.size(), s["count"].get<size_t>()) << label << " step " << step;
      if (s.contains("ids")) {
        EXPECT_EQ(allowed, s["ids"].get<std::vector<int32_t>>()) << label << " step " << step;
      }
      ASSERT_EQ(hash, s["hash"].get<std::string>()) << label << " step " << step;
      ASSERT_TRUE(m.accept_token(s["token"].get<int32_t>())) << label << " step " << step;
      ++step;
    }
    num_steps += static_cast<size_t>(step);
    ++num_cases;
  }
  EXPECT_GE(num_cases, 18u);
  EXPECT_GE(num_steps, 300u);
}

TEST(GrammarXGrammarMasks, SmolLM2) { check_vocabulary("smollm2"); }
TEST(GrammarXGrammarMasks, Qwen) { check_vocabulary("qwen2.5"); }

}  // namespace
}  // namespace tessera::grammar
