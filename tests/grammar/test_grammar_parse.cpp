// Parser and matcher acceptance: exact accept/reject of byte strings, errors with positions.
#include <gtest/gtest.h>

#include "grammar/grammar.h"
#include "grammar/matcher_ref.h"
#include "grammar/stack_automaton.h"
#include "grammar/utf8_ranges.h"

namespace tessera::grammar {
namespace {

// Full-string acceptance by the fast automaton: all bytes consumed and the grammar can end.
bool fast_accepts(const std::string& grammar_text, std::string_view input) {
  auto g = parse_grammar(grammar_text);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  StackAutomaton a(std::make_shared<const Grammar>(std::move(g).value()));
  const int32_t s = a.step_bytes(a.start_state(), input);
  return !a.is_dead(s) && a.can_end(s);
}

bool ref_accepts(const std::string& grammar_text, std::string_view input) {
  auto g = parse_grammar(grammar_text);
  RefMatcher m(g.value());
  return m.accept_bytes(input) && m.can_end();
}

struct Case {
  const char* grammar;
  const char* input;
  bool accept;
};

TEST(GrammarParse, AcceptsExactly) {
  const Case cases[] = {
      {R"(root ::= "abc")", "abc", true},
      {R"(root ::= "abc")", "ab", false},
      {R"(root ::= "abc")", "abcd", false},
      {R"(root ::= "a" | "b")", "b", true},
      {R"(root ::= [a-c]+)", "abcabc", true},
      {R"(root ::= [a-c]+)", "", false},
      {R"(root ::= [a-c]*)", "", true},
      {R"(root ::= [^a-c]*)", "xyz\xc3\xa9", true},
      {R"(root ::= [^a-c]*)", "xaz", false},
      {R"(root ::= "x"? "y")", "y", true},
      {R"(root ::= "x"? "y")", "xy", true},
      {R"(root ::= "x"? "y")", "xxy", false},
      {R"(root ::= "ab"{2,3})", "abab", true},
      {R"(root ::= "ab"{2,3})", "ababab", true},
      {R"(root ::= "ab"{2,3})", "ab", false},
      {R"(root ::= "ab"{2,3})", "abababab", false},
      {R"(root ::= "a"{2,} "b")", "aaaaab", true},
      {R"(root ::= "a"{2,} "b")", "ab", false},
      {R"(root ::= "a"{3})", "aaa", true},
      {R"(root ::= ("a" | "b" "c")+ "d")", "abcad", true},
      {R"(root ::= ("a" | "b" "c")+ "d")", "abd", false},
      // Recursion (balanced parentheses), comments, line-free rule layout.
      {"root ::= p  # balanced\n p ::= \"(\" p* \")\"", "(()(()))", true},
      {"root ::= p  # balanced\n p ::= \"(\" p* \")\"", "(()", false},
      // UTF-8: a class over code points, dot, escapes.
      {R"(root ::= [α-ω]+)", "\xce\xb1\xce\xb2", true},
      {R"(root ::= [α-ω]+)", "\xce\xb1\xce", false},
      {R"(root ::= .)", "\xf0\x9f\x98\x80", true},
      {R"(root ::= .)", "\xed\xa0\x80", false},  // a surrogate encoded: not UTF-8
      {R"(root ::= "\u00e9\x41\n")", "\xc3\xa9" "A\n", true},
      {R"(root ::= [\]\-\\]+)", "]-\\", true},
      // Epsilon loops terminate.
      {R"(root ::= ("a"?)* "b")", "aab", true},
      {R"(root ::= ("" | "a")* )", "", true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(fast_accepts(c.grammar, c.input), c.accept) << c.grammar << " / " << c.input;
    EXPECT_EQ(ref_accepts(c.grammar, c.input), c.accept) << c.grammar << " / " << c.input;
  }
}

TEST(GrammarParse, ErrorsNameTheProblem) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "empty grammar"},
      {"root ::= foo", "undefined rule 'foo' at line 1, column 10"},
      {"start ::= \"a\"", "no `root` rule"},
      {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
      {"root ::= root \"a\" | \"b\"", "left recursion through rule 'root'"},
      {"root ::= x\nx ::= \"\"? root \"a\"", "left recursion"},
      {"root ::= \"abc", "unterminated string literal"},
      {"root ::= [a-", "unterminated character class"},
      {"root ::= [z-a]", "out of order"},
      {"root ::= \"a\"{3,2}", "n < m"},
      {"root ::= \"a\"{99999}", "repetition count above"},
      {"root ::= \"\\q\"", "unknown escape"},
      {"root ::= (\"a\"", "expected ')'"},
      {"root ::= \"\\uD800\"", "not a Unicode scalar value"},
      {"root ::= \"a\" )", "unexpected ')'"},
      {"root = \"a\"", "expected `::=`"},
  };
  for (const auto& [text, want] : cases) {
    auto g = parse_grammar(text);
    ASSERT_FALSE(g.ok()) << text;
    EXPECT_NE(g.error().message.find(want), std::string::npos)
        << text << " -> " << g.error().message;
  }
}

TEST(GrammarParse, TailCallsKeepTheAutomatonSmall) {
  auto g = parse_grammar(R"(root ::= "[" [a-z]* "]")");
  StackAutomaton a(std::make_shared<const Grammar>(std::move(g).value()));
  int32_t s = a.step(a.step(a.start_state(), '['), 'q');
  const size_t nodes = a.num_nodes();
  for (int i = 0; i < 1000; ++i) s = a.step(s, 'q');
  EXPECT_EQ(a.num_nodes(), nodes);  // no node per repetition
  s = a.step(s, ']');
  EXPECT_TRUE(a.can_end(s));
}

TEST(Utf8Ranges, SplitsExactly) {
  // Every code point of a few ranges round-trips through the sequences, and nothing else does.
  const std::vector<std::pair<uint32_t, uint32_t>> ranges = {{0x41, 0x5A}, {0x7F0, 0x812},
                                                             {0xD000, 0xE100}, {0xFFF0, 0x10010}};
  const auto seqs = utf8_sequences(ranges);
  auto covered = [&](const std::string& bytes) {
    for (const auto& s : seqs) {
      if (s.size() != bytes.size()) continue;
      bool ok = true;
      for (size_t i = 0; i < s.size(); ++i) {
        const auto b = static_cast<uint8_t>(bytes[i]);
        ok = ok && b >= s[i].lo && b <= s[i].hi;
      }
      if (ok) return true;
    }
    return false;
  };
  for (uint32_t cp = 0; cp < 0x11000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string bytes;
    append_utf8(cp, bytes);
    bool in = false;
    for (auto [lo, hi] : ranges) in = in || (cp >= lo && cp <= hi);
    EXPECT_EQ(covered(bytes), in) << std::hex << cp;
  }
}

}  // namespace
}  // namespace tessera::grammar
