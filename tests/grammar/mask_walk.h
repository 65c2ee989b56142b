// Shared by the grammar tests: random walks that compare GrammarMatcher's masks with the
// RefMatcher twin's at every step.
#pragma once
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"
#include "grammar/matcher_ref.h"

namespace tessera::grammar::testing {

// Walks up to `steps` tokens, choosing uniformly among allowed tokens with `seed`; at each step
// the fast mask must equal the twin's. Returns the number of steps checked.
inline int walk_and_compare(const std::shared_ptr<const CompiledGrammar>& compiled,
                            const TokenVocabulary& vocab, uint64_t seed, int steps) {
  GrammarMatcher fast(compiled);
  RefMatcher ref(*compiled->source);  // as parsed: the twin checks the expansion too
  std::mt19937_64 rng(seed);
  const int32_t n = compiled->tokens->vocab_size();
  std::vector<uint64_t> mask(mask_words(n));
  int checked = 0;
  for (int step = 0; step < steps; ++step) {
    fast.fill_mask(mask);
    const std::vector<bool> want = ref.allowed_tokens(vocab);
    std::vector<int32_t> allowed;
    int mismatches = 0;
    for (int32_t id = 0; id < n; ++id) {
      const bool got = mask_test(mask, id);
      if (got != want[id] && ++mismatches <= 5) {
        ADD_FAILURE() << "seed " << seed << " step " << step << " token " << id << " '"
                      << vocab.bytes[id] << "': fast " << got << ", ref " << want[id];
      }
      if (want[id]) allowed.push_back(id);
    }
    ++checked;
    if (mismatches || allowed.empty()) break;
    const int32_t pick = allowed[rng() % allowed.size()];
    if (compiled->tokens->is_stop(pick)) break;
    EXPECT_TRUE(fast.accept_token(pick));
    EXPECT_TRUE(ref.accept_bytes(vocab.bytes[pick]));
  }
  return checked;
}

// Every position of two compiles of one grammar (a fast path and its slow twin) has the same
// accepted tokens and the same uncertain ranks.
inline void expect_same_classes(const CompiledGrammar& fast, const CompiledGrammar& slow,
                                const std::string& what) {
  ASSERT_EQ(fast.positions.size(), slow.positions.size()) << what;
  const TokenTable& table = *fast.tokens;
  std::vector<uint64_t> a(mask_words(table.vocab_size())), b(a.size());
  int mismatches = 0;
  for (size_t p = 0; p < fast.positions.size() && mismatches < 5; ++p) {
    const PositionTokens& f = fast.positions[p];
    const PositionTokens& s = slow.positions[p];
    ASSERT_EQ(f.accepted == nullptr, s.accepted == nullptr) << what << " position " << p;
    if (f.accepted) {
      f.accepted->to_bits(a, table.normal_mask());
      s.accepted->to_bits(b, table.normal_mask());
      if (a != b) ++mismatches, ADD_FAILURE() << what << " position " << p << ": accepted sets differ";
    }
    if (f.uncertain != s.uncertain) ++mismatches, ADD_FAILURE() << what << " position " << p << ": uncertain differ";
  }
}

}  // namespace tessera::grammar::testing
