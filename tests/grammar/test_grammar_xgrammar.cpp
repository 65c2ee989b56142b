// Differential test against XGrammar: tests/data/grammar/xgrammar_accept.json holds, for grammars
// in the shared syntax, random and adversarial strings with XGrammar's verdict (made by
// scripts/gen_grammar_xgrammar_goldens.py). Tessera's automaton must give the same verdict on
// every one: whole string consumed and the grammar able to end.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar/stack_automaton.h"

namespace tessera::grammar {
namespace {

TEST(GrammarXGrammar, SameVerdictOnEveryString) {
  std::ifstream in(TESSERA_PROJECT_TESTDATA_DIR "/grammar/xgrammar_accept.json");
  ASSERT_TRUE(in.good());
  const auto golden = nlohmann::json::parse(in);
  size_t num_strings = 0, num_accepted = 0;
  for (const auto& c : golden["cases"]) {
    auto g = parse_grammar(c["grammar"].get<std::string>());
    ASSERT_TRUE(g.ok()) << c["name"] << ": " << g.error().message;
    StackAutomaton a(std::make_shared<const Grammar>(std::move(g).value()));
    for (const auto& sv : c["strings"]) {
      const std::string s = sv[0].get<std::string>();
      const bool want = sv[1].get<bool>();
      const int32_t state = a.step_bytes(a.start_state(), s);
      const bool got = !a.is_dead(state) && a.can_end(state);
      EXPECT_EQ(got, want) << c["name"] << ": '" << s << "'";
      ++num_strings;
      num_accepted += want;
    }
  }
  EXPECT_GE(num_strings, 1500u);
  EXPECT_GE(num_accepted, 100u);
}

}  // namespace
}  // namespace tessera::grammar
