// Recursive-descent parser over the lexer's tokens (see parser.h for the precedence ladder).
#include "jinja/parser.h"

#include <charconv>
#include <initializer_list>
#include <stdexcept>

#include <fmt/format.h>

#include "jinja/lexer.h"

namespace tessera::jinja {
namespace {

struct ParseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Parser {
 public:
  Parser(std::vector<Token> tokens, int max_depth) : t_(std::move(tokens)), max_depth_(max_depth) {}

  NodeList parse_all() {
    std::string which;
    NodeList body = parse_until({}, &which);
    return body;
  }

 private:
  // --- token helpers ---
  const Token& cur() const { return t_[pos_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(pos_ + k, t_.size() - 1)]; }
  void next() {
    if (pos_ + 1 < t_.size()) ++pos_;
  }
  bool is_op(const char* op) const { return cur().kind == TokenKind::kOp && cur().text == op; }
  bool is_name(const char* name) const { return cur().kind == TokenKind::kName && cur().text == name; }

  [[noreturn]] void fail(const Token& at, const std::string& what) const {
    throw ParseError(fmt::format("template line {} column {}: {}", at.line, at.column, what));
  }
  std::string describe(const Token& tok) const {
    switch (tok.kind) {
      case TokenKind::kEof: return "end of template";
      case TokenKind::kBlockEnd: return "'%}'";
      case TokenKind::kVarEnd: return "'}}'";
      case TokenKind::kData: return "template text";
      default: return "'" + tok.text + "'";
    }
  }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(cur(), fmt::format("expected '{}', got {}", op, describe(cur())));
    next();
  }
  void expect(TokenKind kind, const char* what) {
    if (cur().kind != kind) fail(cur(), fmt::format("expected {}, got {}", what, describe(cur())));
    next();
  }
  std::string expect_name() {
    if (cur().kind != TokenKind::kName) fail(cur(), fmt::format("expected a name, got {}", describe(cur())));
    std::string name = cur().text;
    next();
    return name;
  }

  struct DepthGuard {
    DepthGuard(Parser* p, const Token& at) : p(p) {
      if (++p->depth_ > p->max_depth_) p->fail(at, "template nested too deeply");
    }
    ~DepthGuard() { --p->depth_; }
    Parser* p;
  };

  template <typename T>
  std::unique_ptr<T> make(const Token& at) {
    auto n = std::make_unique<T>();
    n->line = at.line;
    n->column = at.column;
    return n;
  }
  ExprPtr make_expr(Expr::Kind kind, const Token& at) {
    auto e = make<Expr>(at);
    e->kind = kind;
    return e;
  }

  // --- statements ---
  // Parses nodes until a block tag whose name is in `ends`; consumes `{% name` and stores name.
  NodeList parse_until(std::initializer_list<const char*> ends, std::string* which) {
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

  NodePtr parse_statement() {
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

  void parse_params(Node* n) {
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

  // --- expressions ---
  ExprPtr parse_tuple(bool with_condexpr) {
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

  ExprPtr parse_expression(bool with_condexpr) {
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

  ExprPtr binary(const Token& at, std::string op, ExprPtr a, ExprPtr b) {
    auto e = make_expr(Expr::Kind::kBinary, at);
    e->name = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  ExprPtr parse_or() {
    const Token at = cur();
    ExprPtr e = parse_and();
    while (is_name("or")) {
      next();
      e = binary(at, "or", std::move(e), parse_and());
    }
    return e;
  }
  ExprPtr parse_and() {
    const Token at = cur();
    ExprPtr e = parse_not();
    while (is_name("and")) {
      next();
      e = binary(at, "and", std::move(e), parse_not());
    }
    return e;
  }
  ExprPtr parse_not() {
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
  ExprPtr parse_compare() {
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
  ExprPtr parse_math1() {
    const Token at = cur();
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = cur().text;
      next();
      e = binary(at, op, std::move(e), parse_concat());
    }
    return e;
  }
  ExprPtr parse_concat() {
    const Token at = cur();
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      next();
      e = binary(at, "~", std::move(e), parse_math2());
    }
    return e;
  }
  ExprPtr parse_math2() {
    const Token at = cur();
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = cur().text;
      next();
      e = binary(at, op, std::move(e), parse_pow());
    }
    return e;
  }
  ExprPtr parse_pow() {
    const Token at = cur();
    ExprPtr e = parse_unary(true);
    while (is_op("**")) {
      next();
      e = binary(at, "**", std::move(e), parse_unary(true));
    }
    return e;
  }
  ExprPtr parse_unary(bool with_filter) {
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

  ExprPtr parse_primary() {
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

  ExprPtr parse_postfix(ExprPtr e) {
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

  ExprPtr parse_subscript(ExprPtr e, const Token& at) {
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

  void parse_call_args(Expr* call) {
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

  ExprPtr parse_call(ExprPtr callee) {
    auto call = make_expr(Expr::Kind::kCall, cur());
    call->line = callee->line;  // errors point at the callee, not at '('
    call->column = callee->column;
    call->args.push_back(std::move(callee));
    parse_call_args(call.get());
    return call;
  }

  // `| name(args) | name ...`; subject null in {% filter %} and {% set x | f %}.
  ExprPtr parse_filter_chain(ExprPtr subject, bool leading_pipe = true) {
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

  ExprPtr parse_filter_expr(ExprPtr e) {
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

  std::vector<Token> t_;
  size_t pos_ = 0;
  int depth_ = 0;
  int max_depth_;
};

}  // namespace

Result<NodeList> parse_template(std::string_view source, int max_depth) {
  auto tokens = tokenize(source);
  if (!tokens.ok()) return tokens.error();
  try {
    Parser parser(std::move(tokens).value(), max_depth);
    return parser.parse_all();
  } catch (const ParseError& e) {
    return make_error(ErrorCode::kInvalidArgument, "{}", e.what());
  }
}

}  // namespace tessera::jinja
