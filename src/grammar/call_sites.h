// Call-site expansion: a copy of a Grammar in which every rule that is not recursive gets its
// own instance per call site, so that each instance is called from exactly one place and a
// position's frames below it are known at compile time (XGrammar's rule inlining, done as
// cloning to keep the positions' shape).
//
// Why: a token class is decided for a frame {position, known parents} (compiled_grammar.h).
// A rule shared by several sites (`json-string` for every string property, the item of
// `x{0,12}` in each of the 12 nested optionals) has no known parent, so every token that runs
// past its end is "uncertain" and walked on the real stack at every mask: 48k of 49k tokens
// inside a `maxLength` string, 222 ms per mask at 152k tokens before this pass.
//
// Rules in a recursive cycle of the call graph (`json-value` <-> `json-array`, `$ref` trees;
// a self tail call `R ::= x R | ""` is a loop, not recursion) keep one shared instance; their
// callees are still cloned per site within it. When the copy would pass `max_positions`, the
// remaining calls go to one shared instance per rule: masks stay exact, only slower.
//
// Counted repetition `x{m,n}` parses into m copies of x and a chain of links
// O_k ::= x O_k+1 | "" (the last one x | ""), so L(O_k) contains L(O_k+1), and a position inside
// a copy of x followed by a call of O_k has a frame whose language contains that of the same
// position inside O_k's x (whose parent is the same: O_k+1 is a tail call). `tighter` records
// those pairs: every token accepted at the tighter position is accepted here, so compiling
// walks only the rest (80 copies of a JSON string character for maxLength 80 would otherwise
// each walk the vocabulary).
//
// `slack` sharpens a pair: when x cannot match the empty string, a token of B bytes, whose
// first byte the current item takes (p is a byte set inside it), starts at most B - 1 further
// items, so from p and from its tighter position t, whose links differ only in how many
// further items they allow (t: slack, p: slack + 1), a token of B <= slack + 1 bytes reaches
// neither limit: its paths, and so its class (accepted, uncertain, rejected), are the same at
// both. Compiling p then walks only the longer tokens; the others take t's class. For
// `json-char{0,80}` the links past the longest tokens walk almost nothing.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "grammar/grammar.h"

namespace tessera::grammar {

struct TighterPairs {
  std::vector<int32_t> tighter;  // [num_positions] the position one link deeper, > p (its
                                 // frame's language is contained in p's), or -1
  std::vector<int32_t> slack;    // [num_positions] further items the tighter position's link
                                 // allows; -1 when no pair or the item can match "" (no bound)
};

struct ExpandedGrammar {
  Grammar grammar;
  std::vector<int32_t> origin;   // [grammar.num_positions()] the same position in the source
  TighterPairs pairs;            // of `grammar`
};

ExpandedGrammar expand_call_sites(const Grammar& source, int32_t max_positions);

// The `tighter` pairs of any grammar; rules with equal rule_class[r] have equal languages (the
// copies of one source rule; for a parsed grammar, r itself).
TighterPairs tighter_positions(const Grammar& g, std::span<const int32_t> rule_class);

}  // namespace tessera::grammar
