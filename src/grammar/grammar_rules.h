// The parsed form between grammar text and the flat Grammar: rules as alternatives of item
// sequences (a byte set or a rule call each), and the passes over it that need no text:
// refusing left recursion and flattening into a Grammar (grammar.h). Internal to the grammar
// module; grammar_parser.cpp builds the rules.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace tessera::grammar {

struct Item {
  Element::Kind kind;  // kBytes or kRule
  int32_t index;
};
using Seq = std::vector<Item>;

struct RuleDef {
  std::string name;
  std::vector<Seq> alts;
  bool defined = false;
  size_t first_use = 0;  // offset in the text of the first reference, for errors
};

// kInvalidArgument naming a rule when some rule can reach itself without consuming a byte
// through a call that is not a tail call (the matcher would not terminate on it).
Status check_left_recursion(const std::vector<RuleDef>& rules);

// Only rules reachable from root are kept (renumbered in order of first reach, root first).
Grammar flatten_rules(const std::vector<RuleDef>& rules, std::vector<ByteSet> byte_sets, int32_t root);

}  // namespace tessera::grammar
