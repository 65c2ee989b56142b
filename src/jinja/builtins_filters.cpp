// Jinja's filters and tests, as far as chat templates use them:
//   filters: abs attr capitalize count d default dictsort e escape first float indent int items
//            join last length list lower map max min reject rejectattr replace reverse round safe
//            select selectattr sort string sum title tojson trim unique upper wordcount
//   tests:   boolean callable defined divisibleby eq equalto even false float ge gt in integer
//            iterable le lower lt mapping ne none number odd sameas sequence string true
//            undefined upper == != < <= > >=
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "jinja/builtins_util.h"
#include "jinja/interpreter.h"

namespace tessera::jinja {
namespace {

int64_t length_of(const Value& v) {
  if (v.is_string()) return static_cast<int64_t>(utf8_chars(v.as_string()).size());
  if (v.is_list()) return static_cast<int64_t>(v.as_list().size());
  if (v.is_dict()) return static_cast<int64_t>(v.as_dict().items.size());
  if (v.is_undefined()) return 0;
  throw TemplateError(fmt::format("object of type '{}' has no len()", v.type_name()));
}

// Jinja's environment.getitem over a dotted attribute path ("function.name", "0").
Value attribute_path(Interpreter& in, const Value& item, const std::string& path) {
  Value v = item;
  size_t pos = 0;
  while (true) {
    const size_t dot = path.find('.', pos);
    const std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (v.is_undefined()) return v;
    v = numeric && part.size() < 18 ? get_item(in, v, Value::integer(std::stoll(part))) : get_item(in, v, Value::string(part));
    if (dot == std::string::npos) return v;
    pos = dot + 1;
  }
}

ValueList sequence_arg(const Value& v, const char* filter) {
  if (v.is_undefined()) return {};
  if (!v.is_list() && !v.is_dict() && !v.is_string()) {
    throw TemplateError(fmt::format("filter '{}' needs a sequence, got {}", filter, v.type_name()));
  }
  return iterate(v);
}

CallArgs rest_args(CallArgs& a, size_t from) {
  CallArgs rest;
  for (size_t i = from; i < a.positional.size(); ++i) rest.positional.push_back(a.positional[i]);
  return rest;
}

Value sort_key(Interpreter& in, const Value& v, const Value* attribute, bool case_sensitive) {
  Value key = attribute && !attribute->is_none() ? attribute_path(in, v, to_display(*attribute)) : v;
  if (!case_sensitive && key.is_string()) return Value::string(ascii_lower(key.as_string()));
  return key;
}

std::string indent_text(const std::string& s, const Value* width, bool first, bool blank) {
  std::string pad = width == nullptr ? "    " : width->is_string() ? width->as_string() : std::string(static_cast<size_t>(std::max<int64_t>(0, std::min<int64_t>(width->as_int(), 1 << 16))), ' ');
  std::vector<std::string> lines = py_splitlines(s + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    if ((i > 0 || first) && (blank || !lines[i].empty())) out += pad;
    out += lines[i];
  }
  return out;
}

Value number_filter(const Value& v, CallArgs& a, bool want_int) {
  const Value* def = arg(a, 0, "default");
  Value fallback = def ? *def : (want_int ? Value::integer(0) : Value::number(0.0));
  if (v.is_number()) return want_int ? Value::integer(v.is_float() ? static_cast<int64_t>(v.as_float()) : v.as_int()) : Value::number(v.as_float());
  if (!v.is_string()) return fallback;
  const std::string s = py_strip(v.as_string(), nullptr, true, true);
  if (s.empty()) return fallback;
  char* end = nullptr;
  if (want_int) {
    errno = 0;
    const long long i = std::strtoll(s.c_str(), &end, 10);
    if (*end == '\0' && errno == 0) return Value::integer(i);
  }
  const double f = std::strtod(s.c_str(), &end);
  if (*end != '\0' || !std::isfinite(f)) return fallback;
  if (!want_int) return Value::number(f);
  if (std::fabs(f) > 9e18) return fallback;
  return Value::integer(static_cast<int64_t>(f));
}

}  // namespace

Value builtin_filter(Interpreter& in, const std::string& name, Value v, CallArgs& a) {
  if (name == "safe") return v.is_string() ? Value::markup(v.as_string()) : Value::markup(to_display(v));
  if (name == "length" || name == "count") return Value::integer(length_of(v));
  if (name == "default" || name == "d") {
    const Value* def = arg(a, 0, "default_value");
    const Value* boolean = arg(a, 1, "boolean");
    const bool use_default = v.is_undefined() || (boolean && boolean->truthy() && !v.truthy());
    return use_default ? (def ? *def : Value::string("")) : v;
  }
  if (name == "string") return Value::string(to_display(v));
  if (name == "tojson") {
    JsonStyle style;
    const Value* ensure_ascii = arg(a, 0, "ensure_ascii");
    if (ensure_ascii && ensure_ascii->truthy()) throw TemplateError("tojson: ensure_ascii=True is not supported");
    if (const Value* indent = arg(a, 1, "indent"); indent && !indent->is_none()) style.indent = static_cast<int>(std::clamp<int64_t>(indent->as_int(), 0, 64));
    if (const Value* seps = arg(a, 2, "separators"); seps && seps->is_list() && seps->as_list().size() == 2) {
      style.item_sep = to_display(seps->as_list()[0]);
      style.key_sep = to_display(seps->as_list()[1]);
    }
    if (const Value* sort = arg(a, 3, "sort_keys")) style.sort_keys = sort->truthy();
    std::string out;
    if (!to_json_text(v, style, &out)) throw TemplateError(fmt::format("Object of type {} is not JSON serializable", v.type_name()));
    in.charge_work(out.size());
    return Value::string(std::move(out));
  }
  if (name == "trim") {
    const Value* chars = arg(a, 0, "chars");
    return Value::string(py_strip(to_display(v), chars && chars->is_string() ? &chars->as_string() : nullptr, true, true));
  }
  if (name == "upper") return Value::string(ascii_upper(to_display(v)));
  if (name == "lower") return Value::string(ascii_lower(to_display(v)));
  if (name == "capitalize") return Value::string(py_capitalize(to_display(v)));
  if (name == "title") {
    // Jinja's title: words start after '-', whitespace, '(', '{', '[' or '<'.
    std::string s = to_display(v), out;
    bool start = true;
    for (char c : s) {
      const bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || std::isspace(static_cast<unsigned char>(c));
      out += static_cast<char>(sep ? c : start ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
      start = sep;
    }
    return Value::string(std::move(out));
  }
  if (name == "replace") {
    const Value* count = arg(a, 2, "count");
    std::string r = py_replace(to_display(v), string_arg(a, 0, "old"), string_arg(a, 1, "new"), count && !count->is_none() ? count->as_int() : -1);
    in.charge_work(r.size());
    return Value::string(std::move(r));
  }
  if (name == "join") {
    const Value* sep = arg(a, 0, "d");
    const Value* attribute = arg(a, 1, "attribute");
    std::string out;
    const ValueList items = sequence_arg(v, "join");
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0 && sep) out += to_display(*sep);
      out += to_display(attribute ? attribute_path(in, items[i], to_display(*attribute)) : items[i]);
      in.charge_work(0);
      if (out.size() > in.limits().max_output_bytes) in.charge_work(out.size());
    }
    in.charge_work(out.size());
    return Value::string(std::move(out));
  }
  if (name == "first" || name == "last") {
    const ValueList items = sequence_arg(v, name.c_str());
    if (items.empty()) return Value::undefined(name);
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value::list(sequence_arg(v, "list"));
  if (name == "reverse") {
    if (v.is_string()) {
      auto cps = utf8_chars(v.as_string());
      std::string out;
      for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
      return Value::string(std::move(out));
    }
    ValueList items = sequence_arg(v, "reverse");
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::list();
    if (!v.is_dict()) throw TemplateError("filter 'items' needs a mapping");
    ValueList out;
    for (const auto& [k, x] : v.as_dict().items) out.push_back(Value::tuple({Value::string(k), x}));
    return Value::list(std::move(out));
  }
  if (name == "dictsort") {
    if (!v.is_dict()) throw TemplateError("filter 'dictsort' needs a mapping");
    const Value* cs = arg(a, 0, "case_sensitive");
    const Value* by = arg(a, 1, "by");
    const Value* rev = arg(a, 2, "reverse");
    const bool by_value = by && by->is_string() && by->as_string() == "value";
    ValueList out;
    for (const auto& [k, x] : v.as_dict().items) out.push_back(Value::tuple({Value::string(k), x}));
    std::stable_sort(out.begin(), out.end(), [&](const Value& p, const Value& q) {
      bool ok = true;
      const Value kp = sort_key(in, p.as_list()[by_value ? 1 : 0], nullptr, cs && cs->truthy());
      const Value kq = sort_key(in, q.as_list()[by_value ? 1 : 0], nullptr, cs && cs->truthy());
      const bool less = rev && rev->truthy() ? value_less(kq, kp, &ok) : value_less(kp, kq, &ok);
      if (!ok) throw TemplateError("dictsort: values do not order");
      return less;
    });
    return Value::list(std::move(out));
  }
  if (name == "sort") {
    const Value* rev = arg(a, 0, "reverse");
    const Value* cs = arg(a, 1, "case_sensitive");
    const Value* attribute = arg(a, 2, "attribute");
    ValueList items = sequence_arg(v, "sort");
    in.charge_steps(static_cast<int64_t>(items.size()));
    std::stable_sort(items.begin(), items.end(), [&](const Value& p, const Value& q) {
      bool ok = true;
      const Value kp = sort_key(in, p, attribute, cs && cs->truthy());
      const Value kq = sort_key(in, q, attribute, cs && cs->truthy());
      const bool less = rev && rev->truthy() ? value_less(kq, kp, &ok) : value_less(kp, kq, &ok);
      if (!ok) throw TemplateError("sort: values do not order");
      return less;
    });
    return Value::list(std::move(items));
  }
  if (name == "unique") {
    const Value* cs = arg(a, 0, "case_sensitive");
    const Value* attribute = arg(a, 1, "attribute");
    ValueList out, seen;
    for (const Value& item : sequence_arg(v, "unique")) {
      in.charge_steps(static_cast<int64_t>(seen.size() / 64 + 1));
      const Value key = sort_key(in, item, attribute, cs && cs->truthy());
      if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return values_equal(s, key); })) continue;
      seen.push_back(key);
      out.push_back(item);
    }
    return Value::list(std::move(out));
  }
  if (name == "min" || name == "max") {
    const Value* cs = arg(a, 0, "case_sensitive");
    const Value* attribute = arg(a, 1, "attribute");
    ValueList items = sequence_arg(v, name.c_str());
    if (items.empty()) return Value::undefined(name);
    Value best = items[0];
    for (const Value& item : items) {
      bool ok = true;
      const Value kb = sort_key(in, best, attribute, cs && cs->truthy());
      const Value ki = sort_key(in, item, attribute, cs && cs->truthy());
      if (name == "min" ? value_less(ki, kb, &ok) : value_less(kb, ki, &ok)) best = item;
      if (!ok) throw TemplateError(fmt::format("{}: values do not order", name));
    }
    return best;
  }
  if (name == "sum") {
    const Value* attribute = arg(a, 0, "attribute");
    const Value* start = arg(a, 1, "start");
    Value total = start ? *start : Value::integer(0);
    for (const Value& item : sequence_arg(v, "sum")) {
      Value x = attribute ? attribute_path(in, item, to_display(*attribute)) : item;
      if (!x.is_number() || !total.is_number()) throw TemplateError("sum: values must be numbers");
      if (x.is_float() || total.is_float()) {
        total = Value::number(total.as_float() + x.as_float());
      } else {
        int64_t r = 0;
        if (__builtin_add_overflow(total.as_int(), x.as_int(), &r)) throw TemplateError("integer overflow");
        total = Value::integer(r);
      }
    }
    return total;
  }
  if (name == "abs") {
    if (v.is_float()) return Value::number(std::fabs(v.as_float()));
    if (v.is_number()) {
      if (v.as_int() == INT64_MIN) throw TemplateError("integer overflow");
      return Value::integer(std::llabs(v.as_int()));
    }
    throw TemplateError("bad operand type for abs()");
  }
  if (name == "round") {
    const Value* precision = arg(a, 0, "precision");
    const Value* method = arg(a, 1, "method");
    if (!v.is_number()) throw TemplateError("round needs a number");
    const double scale = std::pow(10.0, precision ? static_cast<double>(std::clamp<int64_t>(precision->as_int(), -300, 300)) : 0.0);
    const std::string m = method ? to_display(*method) : "common";
    double x = v.as_float() * scale;
    x = m == "ceil" ? std::ceil(x) : m == "floor" ? std::floor(x) : std::round(x);
    return Value::number(x / scale);
  }
  if (name == "int") return number_filter(v, a, true);
  if (name == "float") return number_filter(v, a, false);
  if (name == "indent") {
    const Value* first = arg(a, 1, "first");
    const Value* blank = arg(a, 2, "blank");
    std::string out = indent_text(to_display(v), arg(a, 0, "width"), first && first->truthy(), blank && blank->truthy());
    in.charge_work(out.size());
    return Value::string(std::move(out));
  }
  if (name == "escape" || name == "e") {
    std::string out;
    for (char c : to_display(v)) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
      }
    }
    return Value::markup(std::move(out));
  }
  if (name == "wordcount") return Value::integer(static_cast<int64_t>(py_split(to_display(v), nullptr, -1).size()));
  if (name == "attr") return get_attribute(in, v, string_arg(a, 0, "name"));
  if (name == "map") {
    ValueList out;
    const Value* attribute = arg(a, 99, "attribute");
    if (!v.truthy()) return Value::list();  // Jinja: `if value:` before iterating (None -> [])
    for (const Value& item : sequence_arg(v, "map")) {
      in.charge_steps(1);
      if (attribute) {
        Value x = attribute_path(in, item, to_display(*attribute));
        const Value* def = arg(a, 99, "default");
        out.push_back(x.is_undefined() && def ? *def : x);
      } else {
        CallArgs rest = rest_args(a, 1);
        out.push_back(in.filter(string_arg(a, 0, "filter"), item, rest));
      }
    }
    return Value::list(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    const bool by_attr = name.ends_with("attr");
    const bool keep_when = name.starts_with("select");
    ValueList out;
    if (!v.truthy()) return Value::list();  // Jinja: `if seq:` before iterating (None -> [])
    for (const Value& item : sequence_arg(v, name.c_str())) {
      in.charge_steps(1);
      const Value subject = by_attr ? attribute_path(in, item, string_arg(a, 0, "attribute")) : item;
      const size_t test_at = by_attr ? 1 : 0;
      bool pass;
      if (a.positional.size() > test_at) {
        CallArgs rest = rest_args(a, test_at + 1);
        pass = in.test(string_arg(a, test_at, "test"), subject, rest);
      } else {
        pass = subject.truthy();
      }
      if (pass == keep_when) out.push_back(item);
    }
    return Value::list(std::move(out));
  }
  throw TemplateError(fmt::format("no filter named '{}'", name));
}

bool builtin_test(Interpreter& in, const std::string& name, const Value& v, CallArgs& a) {
  (void)in;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable" || name == "sequence") return v.is_list() || v.is_dict() || v.is_string();
  if (name == "callable") return v.is_function();
  if (name == "lower") return v.is_string() && ascii_lower(v.as_string()) == v.as_string();
  if (name == "upper") return v.is_string() && ascii_upper(v.as_string()) == v.as_string();
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (!v.is_number() || v.is_float()) throw TemplateError(fmt::format("test '{}' needs an integer", name));
    if (name == "divisibleby") {
      const Value& d = need_arg(a, 0, "num");
      if (d.as_int() == 0) throw TemplateError("integer division or modulo by zero");
      return v.as_int() % d.as_int() == 0;
    }
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "in") {
    const Value& container = need_arg(a, 0, "seq");
    if (container.is_string()) {
      if (!v.is_string()) throw TemplateError("'in <string>' requires string as left operand");
      return container.as_string().find(v.as_string()) != std::string::npos;
    }
    if (container.is_dict()) return v.is_string() && container.as_dict().find(v.as_string()) != nullptr;
    if (container.is_list()) {
      return std::any_of(container.as_list().begin(), container.as_list().end(), [&](const Value& x) { return values_equal(x, v); });
    }
    if (container.is_undefined()) return false;
    throw TemplateError(fmt::format("argument of type '{}' is not iterable", container.type_name()));
  }
  if (name == "sameas") {
    const Value& other = need_arg(a, 0, "other");
    if (v.kind() != other.kind()) return false;
    if (v.is_list()) return &v.as_list() == &other.as_list();
    if (v.is_dict()) return &v.as_dict() == &other.as_dict();
    return values_equal(v, other);
  }
  static const char* kCompare[][2] = {{"eq", "=="}, {"equalto", "=="}, {"==", "=="}, {"ne", "!="}, {"!=", "!="},
                                      {"lt", "<"}, {"lessthan", "<"}, {"<", "<"}, {"le", "<="}, {"<=", "<="},
                                      {"gt", ">"}, {"greaterthan", ">"}, {">", ">"}, {"ge", ">="}, {">=", ">="}};
  for (const auto& [alias, op] : kCompare) {
    if (name != alias) continue;
    const Value& other = need_arg(a, 0, "other");
    const std::string o = op;
    if (o == "==") return values_equal(v, other);
    if (o == "!=") return !values_equal(v, other);
    bool ok = true;
    const bool less = value_less(v, other, &ok);
    const bool greater = ok && value_less(other, v, &ok);
    if (!ok) throw TemplateError(fmt::format("'{}' not supported between '{}' and '{}'", o, v.type_name(), other.type_name()));
    if (o == "<") return less;
    if (o == ">") return greater;
    if (o == "<=") return !greater;
    return !less;
  }
  throw TemplateError(fmt::format("no test named '{}'", name));
}

}  // namespace tessera::jinja
