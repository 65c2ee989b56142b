// Differential test against XGrammar: tests/data/grammar/xgrammar_accept.json holds, for grammars
// in the shared syntax (hand-written ones and the front ends' shapes), random and adversarial byte
// strings with XGrammar's verdict (made by scripts/gen_grammar_xgrammar_goldens.py: strings XGrammar
// sampled from each grammar, their prefixes and byte mutations, invalid UTF-8 spliced in, random
// text and raw bytes). Tessera's automaton must give the same verdict on every one (whole string
// consumed and the grammar able to end), with one documented difference: XGrammar's byte matcher
// lets an encoded UTF-16 surrogate (ED A0..BF xx, U+D800..DFFF, not UTF-8 by RFC 3629) through a
// negated class such as [^"\\], and tessera refuses it.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar/stack_automaton.h"
#include "grammar/utf8_ranges.h"

namespace tessera::grammar {
namespace {

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

bool valid_utf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    if (decode_utf8(s, pos) < 0) return false;
  }
  return true;
}

bool has_encoded_surrogate(std::string_view s) {
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    if (static_cast<uint8_t>(s[i]) == 0xED && (static_cast<uint8_t>(s[i + 1]) & 0xE0) == 0xA0) return true;
  }
  return false;
}

TEST(GrammarXGrammar, SameVerdictOnEveryString) {
  std::ifstream in(TESSERA_PROJECT_TESTDATA_DIR "/grammar/xgrammar_accept.json");
  ASSERT_TRUE(in.good());
  const auto golden = nlohmann::json::parse(in);
  size_t num_strings = 0, num_accepted = 0, num_invalid_utf8 = 0, num_surrogates_refused = 0, num_cases = 0;
  for (const auto& c : golden["cases"]) {
    auto g = parse_grammar(c["grammar"].get<std::string>());
    ASSERT_TRUE(g.ok()) << c["name"] << ": " << g.error().message;
    StackAutomaton a(std::make_shared<const Grammar>(std::move(g).value()));
    size_t accepted_here = 0;
    for (const auto& sv : c["strings"]) {
      const bool is_hex = sv[0].is_object();
      const std::string s = is_hex ? from_hex(sv[0]["hex"].get<std::string>()) : sv[0].get<std::string>();
      const bool want = sv[1].get<bool>();
      const int32_t state = a.step_bytes(a.start_state(), s);
      const bool got = !a.is_dead(state) && a.can_end(state);
      ++num_strings;
      num_invalid_utf8 += is_hex;
      ASSERT_EQ(is_hex, !valid_utf8(s)) << "stored as text iff valid UTF-8";
      if (want && !valid_utf8(s)) {
        // XGrammar accepted bytes that are not UTF-8: only ever an encoded surrogate, refused here.
        EXPECT_TRUE(has_encoded_surrogate(s)) << c["name"] << ": hex " << sv[0]["hex"];
        EXPECT_FALSE(got) << c["name"] << ": hex " << sv[0]["hex"];
        ++num_surrogates_refused;
        continue;
      }
      if (is_hex) {
        EXPECT_EQ(got, want) << c["name"] << ": hex " << sv[0]["hex"];
      } else {
        EXPECT_EQ(got, want) << c["name"] << ": '" << s << "'";
      }
      num_accepted += want;
      accepted_here += want;
    }
    EXPECT_GE(accepted_here, 3u) << c["name"] << ": too few accepted strings to say anything";
    ++num_cases;
  }
  std::printf("%zu grammars, %zu strings (%zu accepted, %zu not UTF-8, %zu encoded surrogates XGrammar accepts)\n",
              num_cases, num_strings, num_accepted, num_invalid_utf8, num_surrogates_refused);
  // The golden file's counts (xgrammar 0.2.9, seed 27): a regenerated file changes them on purpose.
  EXPECT_EQ(num_cases, 18u);
  EXPECT_EQ(num_strings, 8982u);
  EXPECT_EQ(num_accepted, 1155u);
  EXPECT_EQ(num_invalid_utf8, 3362u);
  EXPECT_EQ(num_surrogates_refused, 6u);
}

}  // namespace
}  // namespace tessera::grammar
