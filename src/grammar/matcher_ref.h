// RefMatcher: the readable twin of GrammarMatcher for tests. It keeps every possible stack
// explicitly (a vector of positions, top at the back) and checks a token by feeding its bytes
// one at a time: no hash-consing, no DFA, no precomputed token classes. Slow (a full mask costs
// vocab x bytes x stacks), so tests use it on short walks.
#pragma once
#include <cstdint>
#include <set>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/token_table.h"

namespace tessera::grammar {

class RefMatcher {
 public:
  explicit RefMatcher(const Grammar& grammar);

  bool accept_bytes(std::string_view bytes);  // all or nothing
  bool can_end() const;                        // the empty stack is possible
  bool would_accept(std::string_view bytes) const;
  // Allowed next tokens: a token with bytes when they match; a stop token when can_end().
  std::vector<bool> allowed_tokens(const TokenVocabulary& vocab) const;

 private:
  using Stack = std::vector<int32_t>;
  void close(Stack stack, std::set<Stack>& out) const;
  std::set<Stack> advance(const std::set<Stack>& stacks, uint8_t byte) const;

  const Grammar& grammar_;
  std::set<Stack> stacks_;
};

}  // namespace tessera::grammar
