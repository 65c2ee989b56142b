// CompiledGrammar: a Grammar plus, for every byte-set position, the vocabulary split three ways
// (the XGrammar idea): tokens accepted or rejected whatever the stack below the position's frame
// holds, and the few "uncertain" ones whose bytes run past the end of the frame, which only the
// real stack can decide. A mask at run time is then: the union over the state's tops of their
// accepted sets, plus the uncertain tokens that the real automaton accepts.
//
// Classification of a token t from position p (automaton started at the single frame {p, bottom},
// reaching the bottom = leaving the frame):
//   accepted  : some path consumes all of t's bytes (leaving the frame only at the very end)
//   uncertain : no such path, but some path leaves the frame with bytes of t still to match
//   rejected  : every path dies inside the frame
// Each set is stored as the smaller of its list and its complement, ids ascending; uncertain
// tokens are kept as ranks of TokenTable::sorted() so the run-time check walks them as a trie.
//
// Immutable after compile_grammar(): shared by every request that uses the grammar, from any
// thread.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/token_table.h"

namespace tessera::grammar {

struct PositionTokens {
  bool stores_rejected = false;    // `ids` lists the rejected tokens (else the accepted ones)
  std::vector<int32_t> ids;        // ascending token ids
  std::vector<int32_t> uncertain;  // ascending ranks in TokenTable::sorted()
};

struct CompiledGrammar {
  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<const TokenTable> tokens;
  std::vector<PositionTokens> positions;  // [num_positions]; empty for non-byte-set positions
  double compile_seconds = 0.0;           // parse + classification
  size_t num_uncertain = 0;               // sum of uncertain tokens over positions (stats)
};

// Parses and classifies. Errors are the parser's (kInvalidArgument with line and column).
Result<std::shared_ptr<const CompiledGrammar>> compile_grammar(
    std::string_view text, std::shared_ptr<const TokenTable> tokens);

// Compiled grammars by text, for one vocabulary; least recently used dropped beyond `capacity`.
// Thread-safe. Two threads compiling the same new text may both compile; one result is kept.
class GrammarCache {
 public:
  GrammarCache(std::shared_ptr<const TokenTable> tokens, size_t capacity = 64);
  Result<std::shared_ptr<const CompiledGrammar>> get(const std::string& text);
  const std::shared_ptr<const TokenTable>& tokens() const { return tokens_; }
  size_t hits() const;
  size_t misses() const;

 private:
  std::shared_ptr<const TokenTable> tokens_;
  size_t capacity_;
  mutable std::mutex mu_;
  uint64_t clock_ = 0;
  size_t hits_ = 0, misses_ = 0;
  struct Entry {
    std::shared_ptr<const CompiledGrammar> grammar;
    uint64_t last_use;
  };
  std::map<std::string, Entry> entries_;
};

}  // namespace tessera::grammar
