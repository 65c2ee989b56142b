// The Jinja parser's expressions, by the precedence ladder in parser.h: inline if, or, and, not,
// comparisons and `in`, + -, ~, * / // %, **, unary signs, filters and `is` tests, postfix
// . [] () and primaries (literals, names, lists, dicts, tuples).
#include <charconv>

#include "jinja/parser_impl.h"

namespace tessera::jinja::parser_detail {

ExprPtr Parser::parse_tuple(bool with_condexpr) {
  const Token at = cur();
  ExprPtr first = parse_expression(with_condexpr);
  if (!is_op(",")) return first;
  auto tuple = make_expr(Expr::Kind::kTuple, at);
  tuple->args.push_back(std::move(first));
  while (is_op(",")) {
    next();
    if (cur().kind == TokenKind::kBlockEnd || cur().kind == TokenKind::kVarEnd || is_op(")")) break;
    tuple->args.push_back(parse_expression(with_condexpr));
  }
  return tuple;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  DepthGuard guard(this, cur());
  if (!with_condexpr) return parse_or();
  const Token at = cur();
  ExprPtr e = parse_or();
  while (is_name("if")) {
    next();
    auto cond = make_expr(Expr::Kind::kCondExpr, at);
    ExprPtr test = parse_or();
    ExprPtr otherwise;
    if (is_name("else")) {
      next();
      otherwise = parse_expression(true);
    }
    cond->args.push_back(std::move(e));
    cond->args.push_back(std::move(test));
    cond->args.push_back(std::move(otherwise));
    e = std::move(cond);
  }
  return e;
}

ExprPtr Parser::binary(const Token& at, std::string op, ExprPtr a, ExprPtr b) {
  auto e = make_expr(Expr::Kind::kBinary, at);
  e->name = std::move(op);
  e->args.push_back(std::move(a));
  e->args.push_back(std::move(b));
  return e;
}

ExprPtr Parser::parse_or() {
  const Token at = cur();
  ExprPtr e = parse_and();
  while (is_name("or")) {
    next();
    e = binary(at, "or", std::move(e), parse_and());
  }
  return e;
}

ExprPtr Parser::parse_and() {
  const Token at = cur();
  ExprPtr e = parse_not();
  while (is_name("and")) {
    next();
    e = binary(at, "and", std::move(e), parse_not());
  }
  return e;
}

ExprPtr Parser::parse_not() {
  DepthGuard guard(this, cur());
  if (is_name("not")) {
    const Token at = cur();
    next();
    auto e = make_expr(Expr::Kind::kUnary, at);
    e->name = "not";
    e->args.push_back(parse_not());
    return e;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const Token at = cur();
  ExprPtr first = parse_math1();
  ExprPtr cmp;
  while (true) {
    std::string op;
    if (cur().kind == TokenKind::kOp &&
        (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == ">" ||
         cur().text == "<=" || cur().text == ">=")) {
      op = cur().text;
      next();
    } else if (is_name("in")) {
      op = "in";
      next();
    } else if (is_name("not") && peek().kind == TokenKind::kName && peek().text == "in") {
      op = "not in";
      next();
      next();
    } else {
      break;
    }
    if (!cmp) {
      cmp = make_expr(Expr::Kind::kCompare, at);
      cmp->args.push_back(std::move(first));
    }
    cmp->ops.push_back(op);
    cmp->args.push_back(parse_math1());
  }
  return cmp ? std::move(cmp) : std::move(first);
}

ExprPtr Parser::parse_math1() {
  const Token at = cur();
  ExprPtr e = parse_concat();
  while (is_op("+") || is_op("-")) {
    std::string op = cur().text;
    next();
    e = binary(at, op, std::move(e), parse_concat());
  }
  return e;
}

ExprPtr Parser::parse_concat() {
  const Token at = cur();
  ExprPtr e = parse_math2();
  while (is_op("~")) {
    next();
    e = binary(at, "~", std::move(e), parse_math2());
  }
  return e;
}

ExprPtr Parser::parse_math2() {
  const Token at = cur();
  ExprPtr e = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    std::string op = cur().text;
    next();
    e = binary(at, op, std::move(e), parse_pow());
  }
  return e;
}

ExprPtr Parser::parse_pow() {
  const Token at = cur();
  ExprPtr e = parse_unary(true);
  while (is_op("**")) {
    next();
    e = binary(at, "**", std::move(e), parse_unary(true));
  }
  return e;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(this, cur());
  const Token at = cur();
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    e = make_expr(Expr::Kind::kUnary, at);
    e->name = cur().text;
    next();
    e->args.push_back(parse_unary(false));
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  if (with_filter) e = parse_filter_expr(std::move(e));
  return e;
}

ExprPtr Parser::parse_primary() {
  const Token at = cur();
  switch (at.kind) {
    case TokenKind::kName: {
      next();
      auto e = make_expr(Expr::Kind::kLiteral, at);
      if (at.text == "true" || at.text == "True") {
        e->literal = Value::boolean(true);
      } else if (at.text == "false" || at.text == "False") {
        e->literal = Value::boolean(false);
      } else if (at.text == "none" || at.text == "None") {
        e->literal = Value::none();
      } else {
        e->kind = Expr::Kind::kName;
        e->name = at.text;
      }
      return e;
    }
    case TokenKind::kString: {
      std::string s;
      while (cur().kind == TokenKind::kString) {
        s += cur().text;
        next();
      }
      auto e = make_expr(Expr::Kind::kLiteral, at);
      e->literal = Value::string(std::move(s));
      return e;
    }
    case TokenKind::kInt: {
      next();
      int64_t v = 0;
      auto res = std::from_chars(at.text.data(), at.text.data() + at.text.size(), v);
      auto e = make_expr(Expr::Kind::kLiteral, at);
      e->literal = res.ec == std::errc() ? Value::integer(v) : Value::number(std::stod(at.text));
      return e;
    }
    case TokenKind::kFloat: {
      next();
      auto e = make_expr(Expr::Kind::kLiteral, at);
      e->literal = Value::number(std::strtod(at.text.c_str(), nullptr));
      return e;
    }
    case TokenKind::kOp:
      if (at.text == "(") {
        next();
        if (is_op(")")) {
          next();
          return make_expr(Expr::Kind::kTuple, at);
        }
        ExprPtr e = parse_tuple(true);
        expect_op(")");
        return e;
      }
      if (at.text == "[" || at.text == "{") {
        const bool is_dict = at.text == "{";
        const char* close = is_dict ? "}" : "]";
        next();
        auto e = make_expr(is_dict ? Expr::Kind::kDict : Expr::Kind::kList, at);
        while (!is_op(close)) {
          if (!e->args.empty()) expect_op(",");
          if (is_op(close)) break;
          e->args.push_back(parse_expression(true));
          if (is_dict) {
            expect_op(":");
            e->args.push_back(parse_expression(true));
          }
        }
        next();
        return e;
      }
      break;
    default: break;
  }
  fail(at, fmt::format("unexpected {}", describe(at)));
}

ExprPtr Parser::parse_postfix(ExprPtr e) {
  while (true) {
    const Token at = cur();
    if (is_op(".")) {
      next();
      if (cur().kind == TokenKind::kName) {
        auto g = make_expr(Expr::Kind::kGetAttr, at);
        g->name = cur().text;
        g->args.push_back(std::move(e));
        e = std::move(g);
      } else if (cur().kind == TokenKind::kInt) {
        auto g = make_expr(Expr::Kind::kGetItem, at);
        g->args.push_back(std::move(e));
        auto idx = make_expr(Expr::Kind::kLiteral, cur());
        idx->literal = Value::integer(std::stoll(cur().text));
        g->args.push_back(std::move(idx));
        e = std::move(g);
      } else {
        fail(cur(), "expected an attribute name after '.'");
      }
      next();
    } else if (is_op("[")) {
      next();
      e = parse_subscript(std::move(e), at);
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr e, const Token& at) {
  ExprPtr parts[3];
  int part = 0;
  bool slice = false;
  while (!is_op("]")) {
    if (is_op(":")) {
      slice = true;
      if (++part > 2) fail(cur(), "too many ':' in slice");
      next();
      continue;
    }
    if (parts[part]) fail(cur(), "expected ']'");
    parts[part] = parse_expression(true);
  }
  next();
  if (!slice) {
    if (!parts[0]) fail(at, "empty subscript");
    auto g = make_expr(Expr::Kind::kGetItem, at);
    g->args.push_back(std::move(e));
    g->args.push_back(std::move(parts[0]));
    return g;
  }
  auto s = make_expr(Expr::Kind::kSlice, at);
  s->args.push_back(std::move(e));
  for (auto& p : parts) s->args.push_back(std::move(p));
  return s;
}

void Parser::parse_call_args(Expr* call) {
  expect_op("(");
  bool first = true;
  while (!is_op(")")) {
    if (!first) {
      expect_op(",");
      if (is_op(")")) break;
    }
    first = false;
    if (cur().kind == TokenKind::kName && peek().kind == TokenKind::kOp && peek().text == "=") {
      std::string name = cur().text;
      next();
      next();
      call->kwargs.emplace_back(std::move(name), parse_expression(true));
    } else {
      if (!call->kwargs.empty()) fail(cur(), "positional argument after keyword argument");
      call->args.push_back(parse_expression(true));
    }
  }
  next();
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  auto call = make_expr(Expr::Kind::kCall, cur());
  call->line = callee->line;  // errors point at the callee, not at '('
  call->column = callee->column;
  call->args.push_back(std::move(callee));
  parse_call_args(call.get());
  return call;
}

// `| name(args) | name ...`; subject null in {% filter %} and {% set x | f %}.
ExprPtr Parser::parse_filter_chain(ExprPtr subject, bool leading_pipe) {
  bool first = true;
  while ((first && !leading_pipe) || is_op("|")) {
    if (!(first && !leading_pipe)) next();
    first = false;
    const Token at = cur();
    auto f = make_expr(Expr::Kind::kFilter, at);
    f->name = expect_name();
    while (is_op(".")) {
      next();
      f->name += '.';
      f->name += expect_name();
    }
    f->args.push_back(std::move(subject));
    if (is_op("(")) parse_call_args(f.get());
    subject = std::move(f);
  }
  return subject;
}

ExprPtr Parser::parse_filter_expr(ExprPtr e) {
  while (true) {
    if (is_op("|")) {
      e = parse_filter_chain(std::move(e));
    } else if (is_name("is")) {
      const Token at = cur();
      next();
      auto t = make_expr(Expr::Kind::kTest, at);
      if (is_name("not")) {
        t->negated = true;
        next();
      }
      t->name = expect_name();
      while (is_op(".")) {
        next();
        t->name += '.';
        t->name += expect_name();
      }
      t->args.push_back(std::move(e));
      if (is_op("(")) {
        parse_call_args(t.get());
      } else if ((cur().kind == TokenKind::kName || cur().kind == TokenKind::kString || cur().kind == TokenKind::kInt ||
                  cur().kind == TokenKind::kFloat || is_op("(") || is_op("[") || is_op("{")) &&
                 !is_name("else") && !is_name("or") && !is_name("and")) {
        if (is_name("is")) fail(cur(), "you cannot chain multiple tests with 'is'");
        t->args.push_back(parse_postfix(parse_primary()));
      }
      e = std::move(t);
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}
}  // namespace tessera::jinja::parser_detail
