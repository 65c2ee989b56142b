// IncrementalDetokenizer: deltas are whole UTF-8 characters, their concatenation equals decode(),
// multi-byte characters split across byte-fallback tokens and across BPE tokens are held back,
// invalid sequences become U+FFFD.
#include <gtest/gtest.h>

#include "test_helpers.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/unicode.h"

namespace tessera::tokenizer {
namespace {

using testing::load_cases;
using testing::load_tokenizer;
using testing::tokenizer_data;

bool is_valid_utf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const size_t len = valid_utf8_prefix_len(s.substr(pos));
    if (len == 0) return false;
    pos += len;
  }
  return true;
}

struct Streamed {
  std::vector<std::string> deltas;  // one per fed token, then flush()
  std::string text;                 // their concatenation
};

Streamed stream(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  IncrementalDetokenizer detok(tok);
  Streamed s;
  for (int32_t id : ids) s.deltas.push_back(detok.feed(id));
  s.deltas.push_back(detok.flush());
  for (const std::string& d : s.deltas) s.text += d;
  return s;
}

TEST(Detokenizer, ConcatenationEqualsDecodeOnAllVectors) {
  for (const char* name :
       {"ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf", "ggml-vocab-starcoder.gguf"}) {
    const Tokenizer tok = load_tokenizer(tokenizer_data(name));
    for (const testing::VocabCase& c : load_cases(tokenizer_data(name))) {
      for (bool bos : {false, true}) {
        const std::vector<int32_t> ids = tok.encode(c.text, bos, false);
        const Streamed s = stream(tok, ids);
        EXPECT_EQ(s.text, tok.decode(ids)) << name << ": " << c.text;
        EXPECT_EQ(s.text, c.text) << name;
        for (const std::string& d : s.deltas) EXPECT_TRUE(is_valid_utf8(d)) << name << ": " << c.text;
      }
    }
  }
}

TEST(Detokenizer, HoldsBackByteFallbackTokens) {
  const Tokenizer tok = load_tokenizer(tokenizer_data("ggml-vocab-llama-spm.gguf"));
  // 🦙 (F0 9F A6 99) is not in the vocabulary: four <0xXX> byte tokens after "▁".
  const std::vector<int32_t> ids = tok.encode("\xF0\x9F\xA6\x99!", false, false);
  const int32_t b0 = tok.token_id("<0xF0>");
  ASSERT_NE(std::find(ids.begin(), ids.end(), b0), ids.end());
  IncrementalDetokenizer detok(tok);
  std::string text;
  int num_empty = 0;
  for (int32_t id : ids) {
    const std::string d = detok.feed(id);
    if (id == tok.token_id("<0xF0>") || id == tok.token_id("<0x9F>") ||
        id == tok.token_id("<0xA6>")) {
      EXPECT_EQ(d, "");
      EXPECT_GT(detok.num_pending_bytes(), 0u);
      ++num_empty;
    }
    if (id == tok.token_id("<0x99>")) {
      EXPECT_EQ(d, "\xF0\x9F\xA6\x99");
    }
    text += d;
  }
  EXPECT_EQ(num_empty, 3);
  EXPECT_EQ(detok.flush(), "");
  EXPECT_EQ(text, "\xF0\x9F\xA6\x99!");
}

TEST(Detokenizer, HoldsBackSplitBpeTokens) {
  const Tokenizer tok = load_tokenizer(tokenizer_data("ggml-vocab-gpt-2.gguf"));
  // Emoji and CJK: GPT-2 splits these characters across byte-level tokens.
  const std::string text = "\xF0\x9F\x98\x80 \xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\xA6\x99";
  const std::vector<int32_t> ids = tok.encode(text, false, false);
  const Streamed s = stream(tok, ids);
  EXPECT_EQ(s.text, text);
  int num_held = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_TRUE(is_valid_utf8(s.deltas[i]));
    const std::string piece = tok.token_to_piece(ids[i]);
    num_held += !is_valid_utf8(piece);  // a token that is a partial character
  }
  EXPECT_GT(num_held, 0);
}

TEST(Detokenizer, InvalidSequencesBecomeReplacementChars) {
  const Tokenizer tok = load_tokenizer(tokenizer_data("ggml-vocab-llama-spm.gguf"));
  IncrementalDetokenizer detok(tok);
  EXPECT_EQ(detok.feed(tok.token_id("<0xE2>")), "");
  EXPECT_EQ(detok.feed(tok.token_id("<0x41>")), "\xEF\xBF\xBD" "A");  // E2 then 'A': invalid
  EXPECT_EQ(detok.feed(tok.token_id("<0xFF>")), "\xEF\xBF\xBD");      // never valid
  EXPECT_EQ(detok.feed(tok.token_id("<0xE4>")), "");
  EXPECT_EQ(detok.feed(tok.token_id("<0xBD>")), "");
  EXPECT_EQ(detok.num_pending_bytes(), 2u);
  EXPECT_EQ(detok.flush(), "\xEF\xBF\xBD");  // unfinished at the end
  std::string out;
  EXPECT_EQ(append_complete_utf8("\xED\xA0\x80x", out), 0u);  // surrogate: invalid subparts
  EXPECT_EQ(out, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDx");
  out.clear();
  EXPECT_EQ(append_complete_utf8("ok\xE2\x82", out), 2u);
  EXPECT_EQ(out, "ok");
}

TEST(Detokenizer, LeadingSpaceRuleMatchesDecode) {
  const Tokenizer tok = load_tokenizer(tokenizer_data("ggml-vocab-llama-spm.gguf"));
  const std::vector<int32_t> ids = tok.encode("Hello world", true, false);
  ASSERT_EQ(ids[0], 1);
  EXPECT_EQ(tok.decode(ids), "Hello world");
  EXPECT_EQ(stream(tok, ids).text, "Hello world");
  EXPECT_EQ(stream(tok, ids).deltas[1], "Hello");
  // Out of context, the piece keeps its space.
  EXPECT_EQ(tok.token_to_piece(ids[1]), " Hello");
}

}  // namespace
}  // namespace tessera::tokenizer
