// Hand-built vocabularies written with GgufWriter: load errors for bad metadata, and a tiny
// SentencePiece vocabulary whose merges and byte fallback are worked out by hand.
#include <gtest/gtest.h>

#include <algorithm>

#include "gguf/gguf_writer.h"
#include "test_helpers.h"

namespace tessera::tokenizer {
namespace {

// id: text (score, type)
//  0 <unk> (unknown)  1 <s>  2 </s> (control)  3 <0x41>  4 <0xC3>  5 <0xA9> (byte)
//  6 ▁ (-1)  7 a (-2)  8 b (-2)  9 c (-2)  10 ab (-5)  11 bc (-3)  12 ▁a (-4)  13 abc (-1)
struct SpmSpec {
  std::string model = "llama";
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "<0x41>", "<0xC3>", "<0xA9>",
                                     "\xE2\x96\x81", "a", "b", "c", "ab", "bc",
                                     "\xE2\x96\x81" "a", "abc"};
  std::vector<float> scores = {0, 0, 0, 0, 0, 0, -1, -2, -2, -2, -5, -3, -4, -1};
  std::vector<int32_t> types = {2, 3, 3, 6, 6, 6, 1, 1, 1, 1, 1, 1, 1, 1};
  uint32_t bos_id = 1;
};

// Keeps the bytes alive as long as the parsed file.
struct BuiltFile {
  std::vector<uint8_t> bytes;
  Result<gguf::GgufFile> file = make_error(ErrorCode::kInternal, "unset");
};

std::unique_ptr<BuiltFile> build(const SpmSpec& spec) {
  gguf::GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", spec.model);
  w.set_string_array("tokenizer.ggml.tokens", spec.tokens);
  w.set_float_array("tokenizer.ggml.scores", spec.scores);
  w.set_int32_array("tokenizer.ggml.token_type", spec.types);
  w.set_uint32("tokenizer.ggml.bos_token_id", spec.bos_id);
  w.set_uint32("tokenizer.ggml.eos_token_id", 2);
  auto built = std::make_unique<BuiltFile>();
  Result<std::vector<uint8_t>> bytes = w.to_bytes();
  TESSERA_CHECK(bytes.ok(), "to_bytes");
  built->bytes = std::move(*bytes);
  built->file = gguf::GgufFile::parse(
      MappedFile::from_memory(built->bytes.data(), built->bytes.size()));
  TESSERA_CHECK(built->file.ok(), "parse");
  return built;
}

TEST(SyntheticVocab, SpmMergesByScoreAndFallsBackToBytes) {
  auto built = build(SpmSpec{});
  Result<Tokenizer> tok = Tokenizer::from_gguf(*built->file);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  // ▁ a b c: bc (-3) beats ▁a (-4) and ab (-5); then a+bc = abc (-1) beats ▁a (-4).
  EXPECT_EQ(tok->encode("abc", false, false), (std::vector<int32_t>{6, 13}));
  EXPECT_EQ(tok->encode_reference("abc", false, false), (std::vector<int32_t>{6, 13}));
  // é is not a token: its two bytes as <0xC3> <0xA9>; 'A' through <0x41>.
  EXPECT_EQ(tok->encode("\xC3\xA9", true, false), (std::vector<int32_t>{1, 6, 4, 5}));
  EXPECT_EQ(tok->encode("A", false, false), (std::vector<int32_t>{6, 3}));
  EXPECT_EQ(tok->decode(std::vector<int32_t>{1, 6, 13}), "abc");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{1, 6, 4, 5}), "\xC3\xA9");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{1, 6, 13}, true), "<s>abc");
  EXPECT_EQ(tok->token_to_piece(0), "\xE2\x96\x85");  // <unk> renders as ▅ (llama.cpp)
  // With parse_special, "<s>" in the text is the BOS token (and no space prefix is added).
  EXPECT_EQ(tok->encode("<s>", false, true), (std::vector<int32_t>{1}));
}

// Chat escapes (tokenizer.h): control/unknown token text becomes U+FDD0 <id> U+FDD1, a literal U+FDD0
// becomes U+FDD0 U+FDD1; encode_escaped gives the escaped spans as plain text.
TEST(SyntheticVocab, SpecialTextEscapesRoundTripAndEncodeAsPlainText) {
  auto built = build(SpmSpec{});
  Result<Tokenizer> tok = Tokenizer::from_gguf(*built->file);
  ASSERT_TRUE(tok.ok());
  const std::string open = "\xEF\xB7\x90", close = "\xEF\xB7\x91";
  const std::string text = "a</s>b<unk>" + open + "c";
  const std::string escaped = tok->escape_special(text);
  EXPECT_EQ(escaped, "a" + open + "2" + close + "b" + open + "0" + close + open + close + "c");
  EXPECT_EQ(tok->unescape_special(escaped), text);
  EXPECT_EQ(tok->escape_special("abc"), "abc");  // nothing special: unchanged
  // An escape a template cut short, or naming no token, is kept as it is.
  for (const std::string& odd : {open + "12", open + "999" + close, open + "x" + close}) {
    EXPECT_EQ(tok->unescape_special(odd), odd);
  }
  // The template's own </s> is a control token; the escaped one is the text "</s>".
  EXPECT_EQ(tok->encode("</s>", false, true), (std::vector<int32_t>{2}));
  const std::vector<int32_t> plain = tok->encode("</s>", false, false);
  ASSERT_EQ(std::count(plain.begin(), plain.end(), 2), 0);
  std::vector<int32_t> want = {1, 2};
  want.insert(want.end(), plain.begin(), plain.end());
  EXPECT_EQ(tok->encode_escaped("</s>" + tok->escape_special("</s>"), /*add_bos=*/true), want);
}

TEST(SyntheticVocab, UnknownModelIsAnError) {
  SpmSpec spec;
  spec.model = "bert";
  auto built = build(spec);
  Result<Tokenizer> tok = Tokenizer::from_gguf(*built->file);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(tok.error().message.find("'bert'"), std::string::npos) << tok.error().message;
}

TEST(SyntheticVocab, InconsistentArraysAndIdsAreErrors) {
  SpmSpec short_types;
  short_types.types.pop_back();
  auto a = build(short_types);
  Result<Tokenizer> ta = Tokenizer::from_gguf(*a->file);
  ASSERT_FALSE(ta.ok());
  EXPECT_EQ(ta.error().code, ErrorCode::kCorruptFile);

  SpmSpec bad_bos;
  bad_bos.bos_id = 99;
  auto b = build(bad_bos);
  Result<Tokenizer> tb = Tokenizer::from_gguf(*b->file);
  ASSERT_FALSE(tb.ok());
  EXPECT_EQ(tb.error().code, ErrorCode::kCorruptFile);
  EXPECT_NE(tb.error().message.find("bos_token_id"), std::string::npos) << tb.error().message;

  SpmSpec bad_type;
  bad_type.types[7] = 9;
  auto c = build(bad_type);
  EXPECT_FALSE(Tokenizer::from_gguf(*c->file).ok());
}

}  // namespace
}  // namespace tessera::tokenizer
