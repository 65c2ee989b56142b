// The Jinja parser's class, shared by its two halves: parser.cpp (template structure and
// statements: text, output, {% if/for/set/macro/call/filter/... %}) and parser_expr.cpp
// (expressions, by the precedence ladder in parser.h). Internal to src/jinja.
#pragma once
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace tessera::jinja::parser_detail {

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

  // --- statements (parser.cpp) ---
  // Parses nodes until a block tag whose name is in `ends`; consumes `{% name` and stores name.
  NodeList parse_until(std::initializer_list<const char*> ends, std::string* which);
  NodePtr parse_statement();
  void parse_params(Node* n);

  // --- expressions (parser_expr.cpp) ---
  ExprPtr parse_tuple(bool with_condexpr);
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr binary(const Token& at, std::string op, ExprPtr a, ExprPtr b);
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr e);
  ExprPtr parse_subscript(ExprPtr e, const Token& at);
  void parse_call_args(Expr* call);
  ExprPtr parse_call(ExprPtr callee);
  // `| name(args) | name ...`; subject null in {% filter %} and {% set x | f %}.
  ExprPtr parse_filter_chain(ExprPtr subject, bool leading_pipe = true);
  ExprPtr parse_filter_expr(ExprPtr e);

  std::vector<Token> t_;
  size_t pos_ = 0;
  int depth_ = 0;
  int max_depth_;
};

}  // namespace tessera::jinja::parser_detail
