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
#pragma once
#include <cstdint>
#include <vector>

#include "grammar/grammar.h"

namespace tessera::grammar {

struct ExpandedGrammar {
  Grammar grammar;
  std::vector<int32_t> origin;  // [grammar.num_positions()] the same position in the source
};

ExpandedGrammar expand_call_sites(const Grammar& source, int32_t max_positions);

}  // namespace tessera::grammar
