// Call-site expansion (call_sites.h): exact instance counts and `tighter` pairs on small
// grammars, and masks on grammars built to stress it (shared rules, recursion, x{m,n} chains
// with multi-position items) equal the twin's, which runs the grammar as parsed.
#include <gtest/gtest.h>

#include "grammar/call_sites.h"
#include "grammar/compiled_grammar.h"
#include "mask_walk.h"

namespace tessera::grammar {
namespace {

int32_t count_rules_named(const Grammar& g, const std::string& base) {
  int32_t n = 0;
  for (const auto& name : g.rule_names) n += name == base || name.starts_with(base + "@");
  return n;
}

TEST(GrammarExpand, NonRecursiveRulesGetOneInstancePerCallSite) {
  auto g = parse_grammar(R"(root ::= s "," s ":" v
s ::= "\"" [a-z]* "\""
v ::= "[" v "]" | s)").value();
  const ExpandedGrammar e = expand_call_sites(g, kMaxExpandedPositions);
  EXPECT_EQ(count_rules_named(e.grammar, "s"), 3);  // two sites in root, one in the shared v
  EXPECT_EQ(count_rules_named(e.grammar, "v"), 1);  // recursive: one shared instance
  ASSERT_EQ(e.origin.size(), static_cast<size_t>(e.grammar.num_positions()));
  for (int32_t p = 0; p < e.grammar.num_positions(); ++p) {
    EXPECT_EQ(e.grammar.elements[p].kind, g.elements[e.origin[p]].kind) << p;
  }
  // Past the budget every further call shares one instance: nothing is copied.
  const ExpandedGrammar small = expand_call_sites(g, 0);
  EXPECT_EQ(small.grammar.num_positions(), g.num_positions());
}

TEST(GrammarExpand, RepetitionChainsPairEachCopyWithTheNextLink) {
  // x{1,3} = x O1, O1 ::= x O2 | "", O2 ::= x | "": the mandatory x pairs with O1's x, O1's
  // with O2's; O2's x (the last link) has no tighter position.
  auto g = parse_grammar(R"(root ::= "a"{1,3} "b")").value();
  std::vector<int32_t> identity(static_cast<size_t>(g.num_rules()));
  for (int32_t r = 0; r < g.num_rules(); ++r) identity[r] = r;
  const TighterPairs pairs = tighter_positions(g, identity);
  std::vector<int32_t> slacks;
  for (int32_t p = 0; p < g.num_positions(); ++p) {
    if (pairs.tighter[p] < 0) continue;
    slacks.push_back(pairs.slack[p]);
    EXPECT_GT(pairs.tighter[p], p);
    EXPECT_EQ(g.elements[p].kind, Element::kBytes);
    EXPECT_EQ(g.elements[pairs.tighter[p]].index, g.elements[p].index);
  }
  // Further items the tighter link allows: O1's x may be followed by O2's, O2's by none.
  EXPECT_EQ(slacks, (std::vector<int32_t>{1, 0}));
  // An item that can match "" bounds nothing: no slack.
  auto n = parse_grammar(R"(root ::= ( "a" | "" ){0,3} "b")").value();
  std::vector<int32_t> n_identity(static_cast<size_t>(n.num_rules()));
  for (int32_t r = 0; r < n.num_rules(); ++r) n_identity[r] = r;
  const TighterPairs n_pairs = tighter_positions(n, n_identity);
  for (int32_t p = 0; p < n.num_positions(); ++p) {
    if (n_pairs.tighter[p] >= 0) {
      EXPECT_EQ(n_pairs.slack[p], -1) << p;
    }
  }
  // A chain whose item is a rule: the pairs reach into the copies of the item's positions.
  auto h = parse_grammar(R"(root ::= c{0,3} "!"
c ::= [a-c] | "\\" [nt])").value();
  const ExpandedGrammar e = expand_call_sites(h, kMaxExpandedPositions);
  int32_t rule_pairs = 0;
  for (int32_t p = 0; p < e.grammar.num_positions(); ++p) rule_pairs += e.pairs.tighter[p] >= 0;
  EXPECT_EQ(rule_pairs, 2 * 3);  // 2 links pair with the next, 3 byte positions in each c
}

TokenVocabulary chain_vocab() {
  TokenVocabulary v;
  for (int b = 0; b < 128; ++b) v.bytes.push_back(std::string(1, static_cast<char>(b)));
  for (const char* s : {"ab", "abc", "abcd", "abcde", "\\n", "a\\", "\\na", "b\"", "\",", "c\"}",
                        "\"\"", "aaaaaaa", "a!", "!", "ba!", "x\"", "\":", "12", "1,2", ",\"",
                        // runs of the chains' items, some closing the string (the slack bound)
                        "aa", "abab", "cabca", "bcabca", "\\na\\t", "ab\"", "abc\",", "ca\":"}) {
    v.bytes.push_back(s);
  }
  v.bytes.push_back("</s>");
  v.stop_ids = {static_cast<int32_t>(v.bytes.size()) - 1};
  return v;
}

TEST(GrammarExpand, MasksEqualTheTwinOnSharedRulesAndChains) {
  const TokenVocabulary vocab = chain_vocab();
  auto tokens = std::make_shared<const TokenTable>(vocab);
  const char* grammars[] = {
      R"(root ::= "{" s ":" s "," s ":" n "}"
s ::= "\"" ( [a-c] | "\\" [nt] ){0,5} "\""
n ::= [0-9]{1,3})",
      R"(root ::= ( [a-c] | "\\" "n" ){2,6} "!" | "x" root)",
      R"(root ::= v
v ::= "[" ( v ( "," v )* )? "]" | "\"" [abc]{0,4} "\"" | [12]{1,2})",
      R"(root ::= w "!" w
w ::= [ab]{0,3} [abc]{1,2})",
      // Chains longer than some tokens and shorter than others (slack 0..8 against tokens of
      // 1..7 bytes), with a multi-byte item, a byte item and an item that can match "".
      R"(root ::= "{" s "," t ":" u "}"
s ::= "\"" ( [a-c] | "\\" [nt] ){1,9} "\""
t ::= "\"" [abc]{0,6} "\""
u ::= ( [ab] | "" ){0,4} "!")",
  };
  size_t chain_walked = 0;
  for (const char* text : grammars) {
    auto compiled = compile_grammar(text, tokens);
    ASSERT_TRUE(compiled.ok()) << compiled.error().message;
    for (uint64_t seed = 1; seed <= 16; ++seed) {
      EXPECT_GT(testing::walk_and_compare(compiled.value(), vocab, seed, 30), 0) << text;
    }
    // The chains' links walked together classify every position as one walk per link does.
    auto per_link = compile_grammar(text, tokens, CompileOptions{.walk_chain_links_together = false});
    ASSERT_TRUE(per_link.ok());
    EXPECT_EQ(per_link.value()->num_chain_walked, 0u);
    testing::expect_same_classes(*compiled.value(), *per_link.value(), text);
    chain_walked += compiled.value()->num_chain_walked;
  }
  EXPECT_EQ(chain_walked, 24u);  // the shared walks ran (pinned: positions they classified)
}

}  // namespace
}  // namespace tessera::grammar
