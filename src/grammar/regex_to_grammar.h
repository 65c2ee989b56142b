// Regular expressions -> grammar text (the `regex` request field, and JSON Schema `pattern`).
//
// Supported: literals, escapes (\n \t \r \f \v \0 \xHH \uHHHH, escaped punctuation), classes
// [...] with ranges and negation, \d \w \s \D \W \S, `.` (any code point but \n), groups ( ),
// (?: ), named groups (?<n> ) / (?P<n> ), alternation |, quantifiers * + ? {m} {m,} {m,n} (lazy
// and possessive suffixes accepted: they change which match a search finds, not the language),
// ^ at the start and $ at the end (the match is always the whole text).
// Refused with the feature named: backreferences, lookaround, \b \B, inline flags, anchors
// elsewhere.
#pragma once
#include <string>
#include <string_view>

#include "util/status.h"

namespace tessera::grammar {

enum class RegexTarget {
  kRaw,         // the output text itself matches the regex
  kJsonString,  // the text between a JSON string's quotes: characters are JSON-escaped as
                // needed (" and \ as \" and \\, controls as \uXXXX), so the decoded string
                // matches the regex
};

// A grammar expression (no rule definitions; may use only built-in syntax) for the regex.
Result<std::string> regex_to_grammar_expr(std::string_view regex, RegexTarget target);

// A complete grammar: `root ::= <expr>`.
Result<std::string> regex_to_grammar(std::string_view regex);

// Quotes bytes as a grammar string literal ("..." with escapes).
std::string grammar_literal(std::string_view bytes);

}  // namespace tessera::grammar
