// Every test vector of the llama.cpp vocab files (gpt-2, llama-spm, starcoder) reproduced exactly,
// by the fast encoder and by its reference twin; decode(encode(s)) == s round trips; the
// stories260K tokenize cases.
#include <thread>

#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_helpers.h"

namespace tessera::tokenizer {
namespace {

using testing::ids_str;
using testing::load_cases;
using testing::load_tokenizer;
using testing::tokenizer_data;

struct VocabFile {
  const char* name;
  size_t num_cases;  // strings in the .inp file
  bool round_trips;  // decode(encode(s)) == s for every string
};

class VocabVectors : public ::testing::TestWithParam<VocabFile> {};

TEST_P(VocabVectors, MatchesLlamaCppIds) {
  const std::string path = tokenizer_data(GetParam().name);
  const Tokenizer tok = load_tokenizer(path);
  const std::vector<testing::VocabCase> cases = load_cases(path);
  ASSERT_EQ(cases.size(), GetParam().num_cases);
  int num_failed = 0;
  for (const testing::VocabCase& c : cases) {
    const std::vector<int32_t> ids = tok.encode(c.text, false, false);
    EXPECT_EQ(ids, c.ids) << "text: '" << c.text << "'\n  expected " << ids_str(c.ids)
                          << "\n  got      " << ids_str(ids);
    EXPECT_EQ(tok.encode_reference(c.text, false, false), c.ids) << "reference, text: " << c.text;
    num_failed += ids != c.ids;
  }
  EXPECT_EQ(num_failed, 0);
}

TEST_P(VocabVectors, DecodeRoundTrips) {
  const std::string path = tokenizer_data(GetParam().name);
  const Tokenizer tok = load_tokenizer(path);
  for (const testing::VocabCase& c : load_cases(path)) {
    EXPECT_EQ(tok.decode(c.ids), c.text) << ids_str(c.ids);
    if (tok.bos_id() >= 0) {
      const std::vector<int32_t> with_bos = tok.encode(c.text, true, false);
      ASSERT_FALSE(with_bos.empty());
      EXPECT_EQ(with_bos[0], tok.bos_id());
      EXPECT_EQ(tok.decode(with_bos), c.text);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Files, VocabVectors,
                         ::testing::Values(VocabFile{"ggml-vocab-gpt-2.gguf", 46, true},
                                           VocabFile{"ggml-vocab-llama-spm.gguf", 46, true},
                                           VocabFile{"ggml-vocab-starcoder.gguf", 46, true}),
                         [](const auto& info) {
                           std::string n = info.param.name;
                           n = n.substr(11, n.size() - 16);  // between "ggml-vocab-" and ".gguf"
                           for (char& ch : n) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return n;
                         });

TEST(Tokenizer, ConcurrentEncodesAgree) {
  // The per-word cache is shared: four threads encoding at once get the single-thread ids.
  const std::string path = tokenizer_data("ggml-vocab-starcoder.gguf");
  const Tokenizer tok = load_tokenizer(path);
  const std::vector<testing::VocabCase> cases = load_cases(path);
  std::vector<int> num_wrong(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        for (const testing::VocabCase& c : cases) num_wrong[t] += tok.encode(c.text, false, false) != c.ids;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(num_wrong, (std::vector<int>{0, 0, 0, 0}));
}

TEST(Stories260K, TokenizeCases) {
  const std::string dir = TESSERA_TESTDATA_DIR "/models/";
  const Tokenizer tok = load_tokenizer(dir + "stories260K.gguf");
  EXPECT_EQ(tok.vocab_size(), 512);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_TRUE(tok.add_bos());
  const auto golden = nlohmann::json::parse(testing::read_file(dir + "stories260K.golden.json"));
  ASSERT_GE(golden["tokenize"].size(), 5u);
  for (const auto& c : golden["tokenize"]) {
    const std::string text = c["text"];
    const std::vector<int32_t> expected = c["ids_with_bos"];
    EXPECT_EQ(tok.encode(text, true, false), expected) << text;
    EXPECT_EQ(tok.encode_reference(text, true, false), expected) << text;
    EXPECT_EQ(tok.decode(expected), text);
  }
}

TEST(Vocab, UnknownModelOrPreIsAnError) {
  Vocab v;
  v.type = VocabType::kBpe;
  v.pre = "no-such-pre";
  v.tokens = {"a", "b"};
  v.scores = {0, 0};
  v.types = {TokenType::kNormal, TokenType::kNormal};
  v.token_to_id = {{"a", 0}, {"b", 1}};
  Result<Tokenizer> t = Tokenizer::from_vocab(v);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(t.error().message.find("no-such-pre"), std::string::npos);
}

TEST(Vocab, SpecialIdsOfTheTestVocabs) {
  const Tokenizer gpt2 = load_tokenizer(tokenizer_data("ggml-vocab-gpt-2.gguf"));
  EXPECT_EQ(gpt2.vocab_size(), 50257);
  EXPECT_EQ(gpt2.bos_id(), 50256);
  EXPECT_EQ(gpt2.eos_id(), 50256);
  EXPECT_FALSE(gpt2.add_bos());
  EXPECT_EQ(gpt2.eog_ids(), std::vector<int32_t>{50256});
  EXPECT_TRUE(gpt2.is_special(50256));
  EXPECT_FALSE(gpt2.is_special(0));
  EXPECT_EQ(gpt2.token_id("<|endoftext|>"), 50256);
  EXPECT_EQ(gpt2.token_id("no such token"), -1);
  EXPECT_EQ(gpt2.pre_tokenizer(), PreTokenizerType::kGpt2);
  // Special parsing on and off.
  EXPECT_EQ(gpt2.encode("a<|endoftext|>b", false, true), (std::vector<int32_t>{64, 50256, 65}));
  EXPECT_NE(gpt2.encode("a<|endoftext|>b", false, false).size(), 3u);
  EXPECT_EQ(gpt2.decode(std::vector<int32_t>{64, 50256, 65}), "ab");
  EXPECT_EQ(gpt2.decode(std::vector<int32_t>{64, 50256, 65}, true), "a<|endoftext|>b");

  const Tokenizer spm = load_tokenizer(tokenizer_data("ggml-vocab-llama-spm.gguf"));
  EXPECT_EQ(spm.vocab_type(), VocabType::kSpm);
  EXPECT_EQ(spm.bos_id(), 1);
  EXPECT_TRUE(spm.add_bos());
  EXPECT_EQ(spm.token_to_piece(3 + 0x41), "A");  // <0x41> byte token
  // "<s>" parsed as BOS; the text after it gets the space prefix again.
  const std::vector<int32_t> ids = spm.encode("<s>Hi", false, true);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, spm.token_id("\xE2\x96\x81Hi")}));
}

}  // namespace
}  // namespace tessera::tokenizer
