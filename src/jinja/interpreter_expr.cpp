// Expressions of the interpreter: names, operators with Python's semantics, calls, filters, tests.
#include <cmath>

#include <fmt/format.h>

#include "jinja/interpreter.h"

namespace tessera::jinja {
namespace {

[[noreturn]] void bad_operands(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined() || b.is_undefined()) {
    const Value& u = a.is_undefined() ? a : b;
    throw TemplateError(fmt::format("'{}' is undefined", u.as_string()));
  }
  throw TemplateError(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name()));
}

bool is_intlike(const Value& v) { return v.is_int() || v.is_bool(); }

// Python ints do not overflow; ours are int64, so an overflow is an error (never a wrap).
template <typename Op>
int64_t checked(Op op, int64_t x, int64_t y) {
  int64_t r = 0;
  if (op(x, y, &r)) throw TemplateError("integer overflow");
  return r;
}
bool add_ovf(int64_t x, int64_t y, int64_t* r) { return __builtin_add_overflow(x, y, r); }
bool sub_ovf(int64_t x, int64_t y, int64_t* r) { return __builtin_sub_overflow(x, y, r); }
bool mul_ovf(int64_t x, int64_t y, int64_t* r) { return __builtin_mul_overflow(x, y, r); }

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) throw TemplateError("integer division or modulo by zero");
  if (a == INT64_MIN && b == -1) throw TemplateError("integer overflow");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

Value Interpreter::eval(const Expr& e) {
  try {
    return eval_inner(e);
  } catch (TemplateError& err) {
    if (err.line == 0) throw TemplateError(err.what(), e.line, e.column);
    throw;
  }
}

CallArgs Interpreter::eval_args(const Expr& e, size_t first) {
  CallArgs args;
  for (size_t i = first; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i]));
  for (const auto& [k, v] : e.kwargs) args.keyword.emplace_back(k, eval(*v));
  return args;
}

Value Interpreter::call(const Value& fn, CallArgs& args) {
  if (fn.is_undefined()) throw TemplateError(fmt::format("'{}' is undefined", fn.as_string()));
  if (!fn.is_function()) throw TemplateError(fmt::format("'{}' object is not callable", fn.type_name()));
  return fn.as_function()(args);
}

Value Interpreter::filter(const std::string& name, Value subject, CallArgs& args) {
  return builtin_filter(*this, name, std::move(subject), args);
}

bool Interpreter::test(const std::string& name, const Value& subject, CallArgs& args) {
  return builtin_test(*this, name, subject, args);
}

Value Interpreter::eval_inner(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kLiteral: return e.literal;
    case Expr::Kind::kName: {
      const Value* v = frame_->find(e.name);
      return v != nullptr ? *v : Value::undefined(e.name);
    }
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      ValueList items;
      for (const ExprPtr& a : e.args) items.push_back(eval(*a));
      return e.kind == Expr::Kind::kTuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
    }
    case Expr::Kind::kDict: {
      ValueDict d;
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        Value key = eval(*e.args[i]);
        if (!key.is_string()) throw TemplateError("dict keys must be strings");
        d.set(key.as_string(), eval(*e.args[i + 1]));
      }
      return Value::dict(std::move(d));
    }
    case Expr::Kind::kGetAttr: return get_attribute(*this, eval(*e.args[0]), e.name);
    case Expr::Kind::kGetItem: return get_item(*this, eval(*e.args[0]), eval(*e.args[1]));
    case Expr::Kind::kSlice: {
      Value parts[3];
      for (int i = 0; i < 3; ++i) {
        if (e.args[i + 1]) parts[i] = eval(*e.args[i + 1]);
      }
      return slice_value(*this, eval(*e.args[0]), parts[0], parts[1], parts[2]);
    }
    case Expr::Kind::kCall: {
      Value fn = eval(*e.args[0]);
      CallArgs args = eval_args(e, 1);
      return call(fn, args);
    }
    case Expr::Kind::kFilter: {
      Value subject = eval(*e.args[0]);
      CallArgs args = eval_args(e, 1);
      return filter(e.name, std::move(subject), args);
    }
    case Expr::Kind::kTest: {
      Value subject = eval(*e.args[0]);
      CallArgs args = eval_args(e, 1);
      return Value::boolean(test(e.name, subject, args) != e.negated);
    }
    case Expr::Kind::kUnary: {
      Value v = eval(*e.args[0]);
      if (e.name == "not") return Value::boolean(!v.truthy());
      if (!v.is_number()) bad_operands(e.name, v, v);
      if (e.name == "+") return v.is_float() ? v : Value::integer(v.as_int());
      if (v.is_float()) return Value::number(-v.as_float());
      return Value::integer(checked(sub_ovf, 0, v.as_int()));
    }
    case Expr::Kind::kBinary: return eval_binary(e);
    case Expr::Kind::kCompare: return eval_compare(e);
    case Expr::Kind::kCondExpr: {
      if (eval(*e.args[1]).truthy()) return eval(*e.args[0]);
      return e.args[2] ? eval(*e.args[2]) : Value::undefined("inline if");
    }
  }
  return Value();
}

Value Interpreter::eval_binary(const Expr& e) {
  const std::string& op = e.name;
  Value a = eval(*e.args[0]);
  if (op == "and") return a.truthy() ? eval(*e.args[1]) : a;
  if (op == "or") return a.truthy() ? a : eval(*e.args[1]);
  Value b = eval(*e.args[1]);
  if (op == "~") {
    std::string s = to_display(a) + to_display(b);
    charge_work(s.size());
    return Value::string(std::move(s));
  }
  if (op == "+" && a.is_string() && b.is_string()) {
    charge_work(a.as_string().size() + b.as_string().size());
    if (a.is_markup() != b.is_markup()) {  // Markup.__add__/__radd__ escape the plain operand
      CallArgs none;
      const Value escaped_a = a.is_markup() ? a : builtin_filter(*this, "escape", a, none);
      const Value escaped_b = b.is_markup() ? b : builtin_filter(*this, "escape", b, none);
      return Value::markup(escaped_a.as_string() + escaped_b.as_string());
    }
    Value sum = Value::string(a.as_string() + b.as_string());
    return a.is_markup() ? Value::markup(sum.as_string()) : sum;
  }
  if (op == "+" && a.is_list() && b.is_list()) {
    charge_work(16 * (a.as_list().size() + b.as_list().size()));
    ValueList items = a.as_list();
    items.insert(items.end(), b.as_list().begin(), b.as_list().end());
    return Value::list(std::move(items));
  }
  if (op == "*" && (((a.is_string() || a.is_list()) && is_intlike(b)) || (is_intlike(a) && (b.is_string() || b.is_list())))) {
    const Value& seq = a.is_int() || a.is_bool() ? b : a;
    const int64_t n = std::max<int64_t>(0, (a.is_int() || a.is_bool() ? a : b).as_int());
    const size_t unit = seq.is_string() ? seq.as_string().size() : 16 * seq.as_list().size();
    if (unit > 0 && static_cast<uint64_t>(n) > limits_.max_output_bytes / unit) throw TemplateError("repeated sequence too long");
    charge_work(unit * static_cast<size_t>(n));
    if (seq.is_string()) {
      std::string s;
      for (int64_t i = 0; i < n; ++i) s += seq.as_string();
      return Value::string(std::move(s));
    }
    ValueList items;
    for (int64_t i = 0; i < n; ++i) items.insert(items.end(), seq.as_list().begin(), seq.as_list().end());
    return Value::list(std::move(items));
  }
  if (!a.is_number() || !b.is_number()) bad_operands(op, a, b);
  const bool ints = is_intlike(a) && is_intlike(b);
  const int64_t x = a.as_int(), y = b.as_int();
  const double fx = a.as_float(), fy = b.as_float();
  if (op == "+") return ints ? Value::integer(checked(add_ovf, x, y)) : Value::number(fx + fy);
  if (op == "-") return ints ? Value::integer(checked(sub_ovf, x, y)) : Value::number(fx - fy);
  if (op == "*") return ints ? Value::integer(checked(mul_ovf, x, y)) : Value::number(fx * fy);
  if (op == "/") {
    if (fy == 0) throw TemplateError("division by zero");
    return Value::number(fx / fy);
  }
  if (op == "//") {
    if (ints) return Value::integer(floor_div(x, y));
    if (fy == 0) throw TemplateError("float floor division by zero");
    return Value::number(std::floor(fx / fy));
  }
  if (op == "%") {
    if (ints) {
      const int64_t q = floor_div(x, y);
      return Value::integer(x - q * y);
    }
    if (fy == 0) throw TemplateError("float modulo");
    double m = std::fmod(fx, fy);
    if (m != 0 && ((m < 0) != (fy < 0))) m += fy;
    return Value::number(m);
  }
  if (op == "**") {
    if (ints && y >= 0) {
      int64_t acc = 1;
      for (int64_t i = 0; i < y; ++i) {
        if (__builtin_mul_overflow(acc, x, &acc)) throw TemplateError("integer overflow");
        if (acc == 0 || acc == 1) break;
        if (acc == -1) {
          acc = (y % 2 == 0) ? 1 : -1;
          break;
        }
      }
      return Value::integer(acc);
    }
    return Value::number(std::pow(fx, fy));
  }
  throw TemplateError(fmt::format("unknown operator '{}'", op));
}

Value Interpreter::eval_compare(const Expr& e) {
  Value left = eval(*e.args[0]);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.args[i + 1]);
    const std::string& op = e.ops[i];
    bool result = false;
    if (op == "==" || op == "!=") {
      result = values_equal(left, right) == (op == "==");
    } else if (op == "in" || op == "not in") {
      CallArgs args;
      args.positional.push_back(right);
      result = builtin_test(*this, "in", left, args) == (op == "in");
    } else {
      bool ok = true;
      const bool less = value_less(left, right, &ok);
      const bool greater = ok && value_less(right, left, &ok);
      if (!ok) {
        throw TemplateError(fmt::format("'{}' not supported between instances of '{}' and '{}'", op, left.type_name(), right.type_name()));
      }
      if (op == "<") result = less;
      if (op == ">") result = greater;
      if (op == "<=") result = !greater;
      if (op == ">=") result = !less;
    }
    if (!result) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

}  // namespace tessera::jinja
