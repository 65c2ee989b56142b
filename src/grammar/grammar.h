// Grammar: a context-free grammar over bytes, flattened for the matcher.
//
// Surface syntax (GBNF/EBNF style), parsed by parse_grammar():
//   rule-name ::= alternative ( "|" alternative )*        # comments run to the end of the line
//   an alternative is a sequence of items, each optionally followed by * + ? {m} {m,} {m,n}:
//     "literal"      bytes of the UTF-8 text; escapes \n \r \t \\ \" \' \xHH \uHHHH \UHHHHHHHH
//     [a-z0-9_]      a character class over Unicode code points (UTF-8 encoded), [^...] negates
//     .              any Unicode code point
//     name           a reference to a rule
//     ( ... )        a group with its own alternatives
// A rule ends where the next `name ::=` begins, so line breaks are free. The start rule is `root`.
// Left recursion (a rule reachable from itself without consuming a byte) is rejected: the
// pushdown matcher would not terminate on it.
//
// Flattened form: every alternative is a run of Elements in `elements`, closed by a kEnd element.
// A position is an index into `elements`. Groups and repetitions become helper rules:
//   x*  -> R ::= x R | ""          (right recursion: the matcher makes the tail call cheap)
//   x+  -> x R                     x? -> O ::= x | ""
//   x{m,n} -> m copies of x, then n-m nested optionals (x{m,} ends with R)
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"
#include "util/utf8.h"

namespace tessera::grammar {

// A set of bytes, 256 bits.
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool test(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void set(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void set_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) set(static_cast<uint8_t>(b));
  }
  bool operator==(const ByteSet&) const = default;
};

struct Element {
  enum Kind : uint8_t { kBytes, kRule, kEnd };
  Kind kind = kEnd;
  int32_t index = -1;  // kBytes: into byte_sets; kRule: rule id; kEnd: the rule it closes
};

struct Grammar {
  std::vector<std::string> rule_names;            // [num_rules]
  std::vector<std::vector<int32_t>> rule_alts;     // [num_rules][alts]: start position of each alt
  std::vector<Element> elements;                   // [num_positions]
  std::vector<ByteSet> byte_sets;                  // deduplicated
  int32_t root = -1;

  int32_t num_rules() const { return static_cast<int32_t>(rule_names.size()); }
  int32_t num_positions() const { return static_cast<int32_t>(elements.size()); }
  // Readable dump in the surface syntax (byte sets as [..] of bytes); for tests and errors.
  std::string to_string() const;
};

// Limits that keep hostile grammar text from exhausting memory.
inline constexpr int32_t kMaxGrammarPositions = 1 << 20;
inline constexpr int32_t kMaxRepeat = 4096;  // m and n of {m,n}

// Parses the surface syntax; errors name the line and column and what was expected.
Result<Grammar> parse_grammar(std::string_view text);

using ::tessera::append_utf8;  // util/utf8.h

}  // namespace tessera::grammar
