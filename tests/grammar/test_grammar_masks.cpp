// Token masks: GrammarMatcher (precomputed token classes + trie walk) against RefMatcher (each
// token's bytes matched directly) on a synthetic vocabulary, plus rollback, fork and stop tokens.
#include <gtest/gtest.h>

#include <algorithm>

#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"
#include "mask_walk.h"

namespace tessera::grammar {
namespace {

// Every single byte, some multi-byte pieces that cross grammar boundaries, UTF-8 fragments,
// a control token ("" bytes) and a stop token.
TokenVocabulary synthetic_vocab() {
  TokenVocabulary v;
  for (int b = 0; b < 256; ++b) v.bytes.push_back(std::string(1, static_cast<char>(b)));
  for (const char* s : {"{\"", "\":", "\",", "\"}", "\"", "true", "false", "null", "tr", "ue,",
                        "12", "3.", "-0", "e+", "[1", "],", "]}", "}}", "{}", "[]", " {", ", \"",
                        "\": \"", "name", "age", "\":\"", "ab", "abc", "\\n", "\\u00", "\xce\xb1",
                        "\xce", "\xb1\xce", "aaa", "()", "((", "))", "x,y", "<|", "   ", "\n  "}) {
    v.bytes.push_back(s);
  }
  v.bytes.push_back("");  // a control token
  v.bytes.push_back("</s>");
  v.stop_ids = {static_cast<int32_t>(v.bytes.size()) - 1};
  return v;
}

const char* kJsonish = R"(
root   ::= object
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( "," ws member )* )? "}" ws
member ::= string ws ":" ws value ws
array  ::= "[" ws ( value ( "," ws value )* )? "]" ws
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= [ \t\n]{0,3}
)";

TEST(GrammarMasks, EqualTheTwinOnRandomWalks) {
  const TokenVocabulary vocab = synthetic_vocab();
  auto tokens = std::make_shared<const TokenTable>(vocab);
  const char* grammars[] = {
      kJsonish,
      R"g(root ::= "(" root* ")" | "x")g",
      R"(root ::= ("ab" | "abc" | "a")+ [xy,]?)",
      R"(root ::= [α-ω]{1,4} "!"?)",
      R"(root ::= "name" ( ": " [0-9]+ )? | "age" "\n"*)",
  };
  for (const char* text : grammars) {
    auto compiled = compile_grammar(text, tokens);
    ASSERT_TRUE(compiled.ok()) << compiled.error().message;
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      EXPECT_GT(testing::walk_and_compare(compiled.value(), vocab, seed, 40), 0) << text;
    }
  }
}

TEST(GrammarMasks, StopTokenOnlyWhereTheGrammarEnds) {
  const TokenVocabulary vocab = synthetic_vocab();
  auto tokens = std::make_shared<const TokenTable>(vocab);
  auto compiled = compile_grammar(R"(root ::= "ab" "c"?)", tokens).value();
  GrammarMatcher m(compiled);
  const int32_t eos = vocab.stop_ids[0];
  std::vector<uint64_t> mask(mask_words(tokens->vocab_size()));
  m.fill_mask(mask);
  EXPECT_FALSE(mask_test(mask, eos));
  EXPECT_TRUE(mask_test(mask, 'a'));
  const auto ab = std::find(vocab.bytes.begin(), vocab.bytes.end(), "ab") - vocab.bytes.begin();
  EXPECT_TRUE(mask_test(mask, static_cast<int32_t>(ab)));
  EXPECT_FALSE(m.accept_token(eos));
  ASSERT_TRUE(m.accept_bytes("ab"));
  m.fill_mask(mask);
  EXPECT_TRUE(mask_test(mask, eos));
  EXPECT_TRUE(mask_test(mask, 'c'));
  EXPECT_FALSE(m.is_complete());
  ASSERT_TRUE(m.accept_token('c'));
  EXPECT_TRUE(m.is_complete());  // nothing but the end can follow: the request stops
  m.fill_mask(mask);
  int allowed = 0;
  for (int32_t id = 0; id < tokens->vocab_size(); ++id) allowed += mask_test(mask, id);
  EXPECT_EQ(allowed, 1);  // only the stop token
  ASSERT_TRUE(m.accept_token(eos));
  EXPECT_TRUE(m.is_terminated());
  EXPECT_FALSE(m.accept_token('a'));
}

TEST(GrammarMasks, RollbackAndForkRestoreTheSameMasks) {
  const TokenVocabulary vocab = synthetic_vocab();
  auto tokens = std::make_shared<const TokenTable>(vocab);
  auto compiled = compile_grammar(kJsonish, tokens).value();
  const size_t words = mask_words(tokens->vocab_size());
  GrammarMatcher m(compiled);
  ASSERT_TRUE(m.accept_bytes("{\"a\": [1"));
  std::vector<uint64_t> before(words), after(words), forked(words);
  m.fill_mask(before);
  GrammarMatcher f = m.fork();
  ASSERT_TRUE(m.accept_bytes(", 2"));
  ASSERT_TRUE(m.accept_bytes("]"));
  ASSERT_FALSE(m.accept_bytes("]"));  // refused: no change
  EXPECT_EQ(m.num_accepted_tokens(), 3);
  m.rollback(2);
  m.fill_mask(after);
  EXPECT_EQ(before, after);
  ASSERT_TRUE(f.accept_bytes("]}"));
  f.fill_mask(forked);
  EXPECT_NE(forked, before);
  m.fill_mask(after);
  EXPECT_EQ(before, after);  // the fork's progress does not move the original
  EXPECT_TRUE(f.can_end());
}

TEST(GrammarMasks, CacheReturnsTheSameCompiledGrammar) {
  auto tokens = std::make_shared<const TokenTable>(synthetic_vocab());
  GrammarCache cache(tokens, 2);
  auto a = cache.get(R"(root ::= "a")").value();
  auto b = cache.get(R"(root ::= "a")").value();
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_FALSE(cache.get("root ::= nope").ok());
  cache.get(R"(root ::= "b")").value();
  cache.get(R"(root ::= "c")").value();  // evicts "a", the least recently used
  EXPECT_NE(cache.get(R"(root ::= "a")").value().get(), a.get());
}

}  // namespace
}  // namespace tessera::grammar
