// CompiledGrammar: a Grammar plus, for every byte-set position, the vocabulary split three ways
// (the XGrammar idea, token_classes.h): tokens accepted or rejected whatever the stack below the
// position's known frames holds, and the few "uncertain" ones whose bytes run past those frames,
// which only the real stack can decide. A mask at run time is then: the union over the state's
// tops of their accepted sets, plus the uncertain tokens that the real automaton accepts.
//
// Compiling, in two levels so that the vocabulary is walked once per position of the source:
//   1. the parsed grammar (`source`): each byte-set position is classified from its frame plus
//      the parents known there (a rule called from one place returns there), over every token;
//   2. the grammar with call sites expanded (`grammar`, call_sites.h: every non-recursive rule
//      has one caller, so the parents are known up to the root or a recursive rule): each copy
//      of a source position re-walks only level 1's uncertain tokens from its longer frame.
// In both, a link of an x{m,n} chain walks only what its tighter position (one link deeper)
// did not accept, and of that only the tokens long enough to outrun the deeper link (slack,
// call_sites.h); the shorter ones take the deeper link's class.
// Accepted sets are TokenSets (ids, complement or bitset, whichever is smallest); copies whose
// level 2 added nothing share level 1's set. Uncertain tokens are kept as ranks of
// TokenTable::sorted() so the run-time check walks them as a trie.
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
#include "grammar/token_classes.h"
#include "grammar/token_table.h"

namespace tessera::grammar {

struct PositionTokens {
  std::shared_ptr<const TokenSet> accepted;  // null for positions that are not byte sets
  std::vector<int32_t> uncertain;            // ascending ranks in TokenTable::sorted()
};

struct CompiledGrammar {
  std::shared_ptr<const Grammar> source;   // as parsed (the twin RefMatcher runs this one)
  std::shared_ptr<const Grammar> grammar;  // call sites expanded: what GrammarMatcher runs
  std::shared_ptr<const TokenTable> tokens;
  std::vector<PositionTokens> positions;  // [grammar->num_positions()]
  double compile_seconds = 0.0;           // parse + expansion + classification
  size_t num_uncertain = 0;               // sum of uncertain tokens over positions (stats)
  double level1_seconds = 0.0;            // stats: the whole-vocabulary walks
  size_t num_rewalked = 0;                // stats: tokens level 2 accepted or left uncertain
};

// Positions the call-site expansion may grow a grammar to (past it, rules stay shared).
inline constexpr int32_t kMaxExpandedPositions = 1 << 16;

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
