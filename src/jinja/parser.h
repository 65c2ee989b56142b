// Tokens -> statement tree (ast.h), following Jinja's grammar and operator precedence:
// inline if < or < and < not < comparisons/in < + - < ~ < * / // % < ** < unary - + < filters and
// `is` tests < postfix . [] ().
#pragma once
#include <string_view>

#include "jinja/ast.h"
#include "util/status.h"

namespace tessera::jinja {

// max_depth bounds the nesting of expressions and blocks (a hostile template cannot overflow the
// stack of the parser or of the interpreter that walks the tree).
Result<NodeList> parse_template(std::string_view source, int max_depth);

}  // namespace tessera::jinja
