// Pre-tokenizers no shared vocab file exercises (llama3 = llama-bpe, qwen2, default): the GPT-2
// vocabulary with `pre` swapped, against llama.cpp's ids for the same swap
// (tests/tokenizer/data/gpt2_vocab_pre_variants.json, from scripts/gen_tokenizer_goldens.py);
// plus hand-checked splits of each expression.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_helpers.h"
#include "tokenizer/pre_tokenizer.h"

namespace tessera::tokenizer {
namespace {

std::vector<std::string> split(PreTokenizerType type, std::string_view text) {
  std::vector<std::string_view> words;
  pre_tokenize(type, text, words);
  return {words.begin(), words.end()};
}

using Words = std::vector<std::string>;

TEST(PreTokenizer, Gpt2Splits) {
  EXPECT_EQ(split(PreTokenizerType::kGpt2, "Hello world's  123!!  \n x"),
            (Words{"Hello", " world", "'s", " ", " 123", "!!", "  \n", " x"}));
  EXPECT_EQ(split(PreTokenizerType::kGpt2, "I'M ok   "), (Words{"I", "'", "M", " ok", "   "}));
}

TEST(PreTokenizer, StarcoderSplitsDigitsFirst) {
  EXPECT_EQ(split(PreTokenizerType::kStarcoder, "a 123 b"),
            (Words{"a", " ", "1", "2", "3", " b"}));
}

TEST(PreTokenizer, Llama3AndQwen2) {
  EXPECT_EQ(split(PreTokenizerType::kLlama3, "I'M 12345 ,hello\n\n  x"),
            (Words{"I", "'M", " ", "123", "45", " ,", "hello", "\n\n", " ", " x"}));
  EXPECT_EQ(split(PreTokenizerType::kQwen2, "x 123"), (Words{"x", " ", "1", "2", "3"}));
}

TEST(PreTokenizer, DefaultChain) {
  EXPECT_EQ(split(PreTokenizerType::kDefault, "a 12345, b"),
            (Words{"a", " ", "123", "45", ",", " b"}));
}

TEST(PreTokenizer, PiecesConcatenateToInput) {
  const std::string text = "Ça va? 日本語 ñ 🦙 1,000\t\r\n  'll x";
  for (auto type : {PreTokenizerType::kDefault, PreTokenizerType::kGpt2,
                    PreTokenizerType::kStarcoder, PreTokenizerType::kLlama3,
                    PreTokenizerType::kQwen2}) {
    std::string joined;
    for (const std::string& w : split(type, text)) {
      EXPECT_FALSE(w.empty());
      joined += w;
    }
    EXPECT_EQ(joined, text) << pre_tokenizer_name(type);
  }
}

TEST(PreTokenizer, GptVocabWithOtherPresMatchesLlamaCpp) {
  const auto golden = nlohmann::json::parse(
      testing::read_file(TESSERA_PROJECT_TESTDATA_DIR "/../tokenizer/data/gpt2_vocab_pre_variants.json"));
  Result<gguf::GgufFile> file = gguf::GgufFile::open(testing::tokenizer_data("ggml-vocab-gpt-2.gguf"));
  ASSERT_TRUE(file.ok());
  ASSERT_EQ(golden["variants"].size(), 3u);
  for (const auto& [pre, cases] : golden["variants"].items()) {
    Result<Vocab> vocab = load_vocab(*file);
    ASSERT_TRUE(vocab.ok());
    vocab->pre = pre;
    Result<Tokenizer> tok = Tokenizer::from_vocab(std::move(*vocab));
    ASSERT_TRUE(tok.ok()) << pre;
    ASSERT_EQ(cases.size(), 46u);
    for (const auto& c : cases) {
      const std::string text = c["text"];
      const std::vector<int32_t> expected = c["ids"];
      const std::vector<int32_t> ids = tok->encode(text, false, false);
      EXPECT_EQ(ids, expected) << "pre " << pre << ", text: '" << text << "'\n  expected "
                               << testing::ids_str(expected) << "\n  got      "
                               << testing::ids_str(ids);
      EXPECT_EQ(tok->encode_reference(text, false, false), expected) << pre << ": " << text;
      EXPECT_EQ(tok->decode(ids), text);
    }
  }
}

}  // namespace
}  // namespace tessera::tokenizer
