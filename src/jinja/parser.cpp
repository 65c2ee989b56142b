// Recursive-descent parser over the lexer's tokens: template structure and statements
// (parser_impl.h holds the class; its expressions are in parser_expr.cpp).
#include "jinja/parser.h"

#include "jinja/parser_impl.h"

namespace tessera::jinja {
namespace parser_detail {

// Parses nodes until a block tag whose name is in `ends`; consumes `{% name` and stores name.
NodeList Parser::parse_until(std::initializer_list<const char*> ends, std::string* which) {
  DepthGuard guard(this, cur());
  NodeList out;
  while (true) {
    const Token& tok = cur();
    if (tok.kind == TokenKind::kEof) {
      if (ends.size() > 0) fail(tok, fmt::format("unexpected end of template, expected '{}'", *(ends.end() - 1)));
      return out;
    }
    if (tok.kind == TokenKind::kData) {
      auto n = make<Node>(tok);
      n->kind = Node::Kind::kText;
      n->text = tok.text;
      out.push_back(std::move(n));
      next();
    } else if (tok.kind == TokenKind::kVarBegin) {
      next();
      auto n = make<Node>(tok);
      n->kind = Node::Kind::kOutput;
      n->expr = parse_tuple(true);
      expect(TokenKind::kVarEnd, "'}}'");
      out.push_back(std::move(n));
    } else if (tok.kind == TokenKind::kBlockBegin) {
      const Token& name = peek();
      if (name.kind != TokenKind::kName) fail(name, "expected a tag name");
      for (const char* end : ends) {
        if (name.text == end) {
          *which = name.text;
          next();
          next();
          return out;
        }
      }
      next();
      out.push_back(parse_statement());
    } else {
      fail(tok, fmt::format("unexpected {}", describe(tok)));
    }
  }
}

NodePtr Parser::parse_statement() {
  const Token at = cur();
  const std::string tag = expect_name();
  auto n = make<Node>(at);
  std::string which;
  if (tag == "if") {
    n->kind = Node::Kind::kIf;
    ExprPtr cond = parse_tuple(true);
    while (true) {
      expect(TokenKind::kBlockEnd, "'%}'");
      NodeList body = parse_until({"elif", "else", "endif"}, &which);
      n->branches.emplace_back(std::move(cond), std::move(body));
      if (which == "elif") {
        cond = parse_tuple(true);
        continue;
      }
      if (which == "else") {
        expect(TokenKind::kBlockEnd, "'%}'");
        n->branches.emplace_back(nullptr, parse_until({"endif"}, &which));
      }
      break;
    }
  } else if (tag == "for") {
    n->kind = Node::Kind::kFor;
    n->targets.push_back(expect_name());
    while (is_op(",")) {
      next();
      n->targets.push_back(expect_name());
    }
    if (!is_name("in")) fail(cur(), "expected 'in' in for loop");
    next();
    n->expr = parse_tuple(false);
    if (is_name("if")) {
      next();
      n->filter = parse_expression(true);
    }
    if (is_name("recursive")) fail(cur(), "recursive loops are not supported");
    expect(TokenKind::kBlockEnd, "'%}'");
    n->body = parse_until({"else", "endfor"}, &which);
    if (which == "else") {
      expect(TokenKind::kBlockEnd, "'%}'");
      n->else_body = parse_until({"endfor"}, &which);
    }
  } else if (tag == "set") {
    n->targets.push_back(expect_name());
    if (is_op(".")) {
      next();
      n->attr = expect_name();
    }
    while (is_op(",") && n->attr.empty()) {
      next();
      n->targets.push_back(expect_name());
    }
    if (is_op("=")) {
      next();
      n->kind = Node::Kind::kSet;
      n->expr = parse_tuple(true);
    } else {
      if (n->targets.size() != 1 || !n->attr.empty()) fail(cur(), "expected '=' in set");
      n->kind = Node::Kind::kSetBlock;
      if (is_op("|")) n->filter = parse_filter_chain(nullptr);
      expect(TokenKind::kBlockEnd, "'%}'");
      n->body = parse_until({"endset"}, &which);
    }
  } else if (tag == "macro") {
    n->kind = Node::Kind::kMacro;
    n->text = expect_name();
    parse_params(n.get());
    expect(TokenKind::kBlockEnd, "'%}'");
    n->body = parse_until({"endmacro"}, &which);
    if (cur().kind == TokenKind::kName) next();  // {% endmacro name %}
  } else if (tag == "call") {
    n->kind = Node::Kind::kCallBlock;
    if (is_op("(")) parse_params(n.get());
    n->expr = parse_expression(true);
    if (n->expr->kind != Expr::Kind::kCall) fail(at, "expected a call in {% call %}");
    expect(TokenKind::kBlockEnd, "'%}'");
    n->body = parse_until({"endcall"}, &which);
  } else if (tag == "filter") {
    n->kind = Node::Kind::kFilterBlock;
    n->expr = parse_filter_chain(nullptr, /*leading_pipe=*/false);
    expect(TokenKind::kBlockEnd, "'%}'");
    n->body = parse_until({"endfilter"}, &which);
  } else if (tag == "break" || tag == "continue") {
    n->kind = tag == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
  } else if (tag == "generation") {
    n->kind = Node::Kind::kScope;
    expect(TokenKind::kBlockEnd, "'%}'");
    n->body = parse_until({"endgeneration"}, &which);
  } else if (tag == "raw") {
    n->kind = Node::Kind::kScope;
    expect(TokenKind::kBlockEnd, "'%}'");
    n->body = parse_until({"endraw"}, &which);
  } else {
    fail(at, fmt::format("unknown tag '{}'", tag));
  }
  expect(TokenKind::kBlockEnd, "'%}'");
  return n;
}

void Parser::parse_params(Node* n) {
  expect_op("(");
  while (!is_op(")")) {
    if (!n->params.empty()) expect_op(",");
    if (is_op(")")) break;
    std::string name = expect_name();
    ExprPtr def;
    if (is_op("=")) {
      next();
      def = parse_expression(true);
    }
    n->params.emplace_back(std::move(name), std::move(def));
  }
  next();
}
}  // namespace parser_detail

Result<NodeList> parse_template(std::string_view source, int max_depth) {
  auto tokens = tokenize(source);
  if (!tokens.ok()) return tokens.error();
  try {
    parser_detail::Parser parser(std::move(tokens).value(), max_depth);
    return parser.parse_all();
  } catch (const parser_detail::ParseError& e) {
    return make_error(ErrorCode::kInvalidArgument, "{}", e.what());
  }
}

}  // namespace tessera::jinja
