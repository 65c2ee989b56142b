// The parsed template: expression and statement trees. Every node keeps the line and column of
// the token it started at, so a render error names where in the template it happened.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace tessera::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // literal
    kName,      // name
    kList,      // args = items
    kTuple,     // args = items (a Python tuple: rendered and iterated as a list)
    kDict,      // args = key0, value0, key1, value1, ...
    kGetAttr,   // args[0].name
    kGetItem,   // args[0][args[1]]
    kSlice,     // args[0][args[1]:args[2]:args[3]], absent parts null
    kCall,      // args[0](args[1..], kwargs)
    kFilter,    // args[0] | name(args[1..], kwargs); args[0] null inside {% filter %}
    kTest,      // args[0] is [not] name(args[1..]); negated for `is not`
    kUnary,     // name in {"-", "+", "not"} applied to args[0]
    kBinary,    // args[0] name args[1]; name in + - * / // % ** ~ and or in "not in"
    kCompare,   // args[0] ops[0] args[1] ops[1] args[2] ... (chained)
    kCondExpr,  // args[0] if args[1] else args[2] (args[2] null: undefined)
  };
  Kind kind = Kind::kLiteral;
  int line = 0, column = 0;
  Value literal;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using NodeList = std::vector<NodePtr>;

struct Node {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // branches: (condition, body)..., a null condition is the else branch
    kFor,          // for targets in expr [if filter] body [else else_body]
    kSet,          // set targets = expr, or set targets[0].attr = expr (attr non-empty)
    kSetBlock,     // set targets[0] %} body {% endset, optional filter expr applied to body
    kMacro,        // macro name(params) body
    kCallBlock,    // call[(params)] expr %} body {% endcall: body is `caller`
    kFilterBlock,  // filter expr %} body: expr is a filter chain with a null subject
    kBreak,
    kContinue,
    kScope,        // a body rendered as is ({% generation %}, {% raw %} data)
  };
  Kind kind = Kind::kText;
  int line = 0, column = 0;
  std::string text;  // text, macro name
  std::string attr;  // set ns.attr
  ExprPtr expr;
  ExprPtr filter;    // for ... if filter; set block filter
  std::vector<std::string> targets;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro / call parameters, defaults may be null
  std::vector<std::pair<ExprPtr, NodeList>> branches;
  NodeList body, else_body;
};

}  // namespace tessera::jinja
