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
// call_sites.h); the shorter ones take the deeper link's class. Level 2 walks up to 8 links
// of a chain together (accepted_from_frames): the deepest link's candidates contain every looser
// link's, so one pass reads each candidate's bytes and trie links once and steps them in every
// link's frame (the walks are memory-bound: 152k tokens' bytes and subtree table, ~6 MB, per walk).
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
  size_t num_chain_walked = 0;            // stats: positions classified by a walk of several links
};

// Positions the call-site expansion may grow a grammar to (past it, rules stay shared).
inline constexpr int32_t kMaxExpandedPositions = 1 << 16;

struct CompileOptions {
  // Walk up to 8 links of an x{m,n} chain in one pass over their candidates (each token's bytes
  // read once for all of them, accepted_from_frames) instead of one walk per link. Off: the
  // slow twin the tests compare every position's classes with.
  bool walk_chain_links_together = true;
};

// Parses and classifies. Errors are the parser's (kInvalidArgument with line and column).
Result<std::shared_ptr<const CompiledGrammar>> compile_grammar(
    std::string_view text, std::shared_ptr<const TokenTable> tokens, CompileOptions options = {});

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
