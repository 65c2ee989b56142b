// The tree-walking interpreter (internal to jinja/): scopes, statements, expressions, budgets.
// Builtins (filters, tests, str/dict methods) live in builtins.cpp and report failures by throwing
// TemplateError; the interpreter adds the position of the expression being evaluated.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "jinja/ast.h"
#include "jinja/template.h"

namespace tessera::jinja {

struct TemplateError : std::runtime_error {
  explicit TemplateError(const std::string& what, int line = 0, int column = 0)
      : std::runtime_error(what), line(line), column(column) {}
  int line, column;
};

// One scope: the template's top level, a for loop, a macro call. Lookups walk to the parent.
struct Frame {
  std::shared_ptr<Frame> parent;
  std::unordered_map<std::string, Value> vars;
  const Value* find(const std::string& name) const;
};

class Interpreter {
 public:
  Interpreter(const Limits& limits, const RenderOptions& options, const ValueDict& context);
  // Empties every namespace: the only mutable containers, hence the only way a template can build
  // a reference cycle ({% set ns.self = ns %}), which would otherwise leak.
  ~Interpreter();
  std::string render(const NodeList& nodes);
  void register_namespace(const Value& ns) { namespaces_.push_back(ns); }

  // Budgets (throw TemplateError when spent).
  void charge_steps(int64_t n);
  void charge_work(size_t bytes);
  const Limits& limits() const { return limits_; }
  std::time_t now() const { return now_; }

  // Calls a callable value (macro, global function, bound method).
  Value call(const Value& fn, CallArgs& args);
  // A filter/test by name, for filters that take another filter or test (map, select...).
  Value filter(const std::string& name, Value subject, CallArgs& args);
  bool test(const std::string& name, const Value& subject, CallArgs& args);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  Flow exec_list(const NodeList& nodes);
  Flow exec(const Node& node);
  void exec_for(const Node& node);
  void exec_set(const Node& node);
  void define_macro(const Node& node);
  std::string capture(const NodeList& nodes, std::shared_ptr<Frame> frame);
  void emit(const std::string& text);

  Value eval(const Expr& e);
  Value eval_inner(const Expr& e);
  Value eval_binary(const Expr& e);
  Value eval_compare(const Expr& e);
  CallArgs eval_args(const Expr& e, size_t first);
  void bind(const std::vector<std::string>& targets, const Value& value, Frame& frame);

  Limits limits_;
  std::time_t now_;
  std::shared_ptr<Frame> frame_;
  std::string* out_ = nullptr;
  int64_t steps_ = 0;
  size_t work_ = 0;
  int call_depth_ = 0;
  std::vector<Value> namespaces_;
};

// builtins.cpp
Value builtin_filter(Interpreter& in, const std::string& name, Value subject, CallArgs& args);
bool builtin_test(Interpreter& in, const std::string& name, const Value& subject, CallArgs& args);
// obj.name: dict items (and the methods items/keys/values/get), str methods; undefined if absent.
Value get_attribute(Interpreter& in, const Value& obj, const std::string& name);
// obj[key]: list/str index (negative from the end), dict key; undefined if absent.
Value get_item(Interpreter& in, const Value& obj, const Value& key);
Value slice_value(Interpreter& in, const Value& obj, const Value& start, const Value& stop, const Value& step);
void add_globals(Interpreter& in, Frame& globals);
// Items a for loop visits: list items, dict keys, str characters; undefined: none.
ValueList iterate(const Value& v);

}  // namespace tessera::jinja
