// SmolLM2-135M-Instruct (the default model): ids from llama.cpp for a dozen varied strings
// (tests/data/smollm2_tokenize.json, from scripts/gen_tokenizer_goldens.py), special ids, the
// GGUF's chat template, and encode speed. Skips when the model file is absent.
#include <ctime>
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_helpers.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/detokenizer.h"

namespace tessera::tokenizer {
namespace {

const std::string kModel = TESSERA_PROJECT_TESTDATA_DIR "/../../models/SmolLM2-135M-Instruct.Q4_1.gguf";

class SmolLm2 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "model not found: " << kModel;
  }
};

TEST_F(SmolLm2, VocabularyAndSpecialIds) {
  const Tokenizer tok = testing::load_tokenizer(kModel);
  EXPECT_EQ(tok.vocab_size(), 49152);
  EXPECT_EQ(tok.vocab_type(), VocabType::kBpe);
  EXPECT_EQ(tok.pre_tokenizer(), PreTokenizerType::kStarcoder);
  EXPECT_FALSE(tok.add_bos());
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.eot_id(), 2);  // <|im_end|>
  EXPECT_EQ(tok.eog_ids(), (std::vector<int32_t>{0, 2}));  // <|endoftext|>, <|im_end|>
  EXPECT_TRUE(tok.is_eog(2));
  EXPECT_FALSE(tok.is_eog(1));
  EXPECT_EQ(tok.token_id("<|im_start|>"), 1);
  EXPECT_TRUE(tok.is_special(1));
}

TEST_F(SmolLm2, MatchesLlamaCppIds) {
  const Tokenizer tok = testing::load_tokenizer(kModel);
  const auto golden = nlohmann::json::parse(
      testing::read_file(TESSERA_PROJECT_TESTDATA_DIR "/smollm2_tokenize.json"));
  ASSERT_GE(golden["cases"].size(), 12u);
  for (const auto& c : golden["cases"]) {
    const std::string text = c["text"];
    const bool special = c["parse_special"];
    const std::vector<int32_t> expected = c["ids"];
    const std::vector<int32_t> ids = tok.encode(text, false, special);
    EXPECT_EQ(ids, expected) << "text: '" << text << "' special=" << special << "\n  expected "
                             << testing::ids_str(expected) << "\n  got      "
                             << testing::ids_str(ids);
    EXPECT_EQ(tok.encode_reference(text, false, special), expected) << text;
    EXPECT_EQ(tok.decode(ids, special), text);
    std::string streamed;
    IncrementalDetokenizer detok(tok, special);
    for (int32_t id : ids) streamed += detok.feed(id);
    streamed += detok.flush();
    EXPECT_EQ(streamed, text);
  }
}

TEST_F(SmolLm2, ChatTemplateFromGguf) {
  Result<gguf::GgufFile> file = gguf::GgufFile::open(kModel);
  ASSERT_TRUE(file.ok());
  Result<std::string> source = file->get_string("tokenizer.chat_template");
  ASSERT_TRUE(source.ok());
  EXPECT_EQ(*source, testing::read_file(TESSERA_PROJECT_TESTDATA_DIR "/chat_templates/smollm2.jinja"));
  Result<std::string> prompt = apply_chat_template(*source, {{"user", "Hi!"}}, true, "", "<|im_end|>");
  ASSERT_TRUE(prompt.ok());
  const Tokenizer tok = testing::load_tokenizer(kModel);
  const std::vector<int32_t> ids = tok.encode(*prompt, false, true);
  ASSERT_GE(ids.size(), 10u);
  EXPECT_EQ(ids[0], 1);                                 // <|im_start|>
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 1), 3);  // system, user, assistant turns
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 2);  // two <|im_end|>
  const std::vector<int32_t> tail = tok.encode("assistant\n", false, false);
  ASSERT_GT(ids.size(), tail.size());
  EXPECT_EQ(ids[ids.size() - tail.size() - 1], 1);
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), ids.end() - static_cast<std::ptrdiff_t>(tail.size())));
  EXPECT_EQ(tok.decode(ids, true), *prompt);
}

TEST_F(SmolLm2, EncodesA2000TokenPromptQuickly) {
  const Tokenizer tok = testing::load_tokenizer(kModel);
  // Varied text (distinct numbers defeat the word cache partly).
  std::string text;
  for (int i = 0; text.size() < 9000; ++i) {
    text += fmt::format("Paragraph {}: The quick brown fox jumps over the lazy dog {} times; "
                        "func_{}(x) returns x * {} + \"value\".\n", i, i * 37, i, i % 7);
  }
  // This thread's CPU time, not the wall clock: a loaded host (ctest -j2 beside other work) delays
  // the thread but does not make the encode cost more CPU.
  const auto cpu_ms = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
  };
  const double t0 = cpu_ms();
  const std::vector<int32_t> ids = tok.encode(text, false, false);
  const double t1 = cpu_ms();
  const std::vector<int32_t> again = tok.encode(text, false, false);
  const double t2 = cpu_ms();
  const double cold_ms = t1 - t0;
  const double warm_ms = t2 - t1;
  std::printf("encode %zu bytes -> %zu tokens: cold %.2f ms, warm %.2f ms of CPU\n", text.size(),
              ids.size(), cold_ms, warm_ms);
  EXPECT_GE(ids.size(), 2000u);
  EXPECT_EQ(again, ids);
  EXPECT_EQ(tok.decode(ids), text);
  // The target is well under 10 ms; the bound leaves room for a loaded 2-core test machine.
  EXPECT_LT(warm_ms, 25.0);
}

}  // namespace
}  // namespace tessera::tokenizer
