// Template source -> tokens, with Jinja's whitespace rules as Hugging Face renders chat templates:
// trim_blocks (the first newline after a block or comment tag is dropped), lstrip_blocks (spaces
// and tabs from a line's start up to a block or comment tag are dropped, unless the tag opens with
// `{%+`), `-` on a tag side strips all whitespace on that side, and newlines are normalised to
// "\n" with one trailing newline of the source dropped (keep_trailing_newline=False).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace tessera::jinja {

enum class TokenKind {
  kData,        // template text between tags (already whitespace-processed)
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kVarBegin,    // {{
  kVarEnd,      // }}
  kName,
  kString,      // text = the unescaped value
  kInt,
  kFloat,
  kOp,          // text = the operator: + - * / // % ** ~ ( ) [ ] { } , . : | = == != < > <= >=
  kEof,
};

struct Token {
  TokenKind kind = TokenKind::kEof;
  std::string text;
  int line = 1;    // 1-based, in the normalised source
  int column = 1;  // 1-based byte column
};

// The raw text between `{% raw %}` and `{% endraw %}` comes back as one kData token.
Result<std::vector<Token>> tokenize(std::string_view source);

}  // namespace tessera::jinja
