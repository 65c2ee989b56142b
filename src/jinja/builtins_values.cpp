// Attribute and item access, slices, str/dict methods, tests, and the global functions
// (range, namespace, dict, raise_exception, strftime_now).
#include <algorithm>
#include <ctime>

#include <fmt/format.h>

#include "jinja/builtins_util.h"
#include "jinja/interpreter.h"

namespace tessera::jinja {

ValueList iterate(const Value& v) {
  if (v.is_list()) return v.as_list();
  if (v.is_dict()) {
    ValueList keys;
    for (const auto& [k, _] : v.as_dict().items) keys.push_back(Value::string(k));
    return keys;
  }
  if (v.is_string()) {
    ValueList chars;
    for (std::string_view c : utf8_chars(v.as_string())) chars.push_back(Value::string(std::string(c)));
    return chars;
  }
  return {};
}

namespace {

Value string_method(Interpreter& in, const std::string& s, const std::string& name) {
  auto bind = [&](auto fn) { return Value::function(name, [s, fn, &in](CallArgs& a) -> Value { return fn(in, s, a); }); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip", right = name != "lstrip";
    return bind([left, right](Interpreter&, const std::string& str, CallArgs& a) {
      const Value* chars = arg(a, 0, "chars");
      return Value::string(py_strip(str, chars && !chars->is_none() ? &chars->as_string() : nullptr, left, right));
    });
  }
  if (name == "split" || name == "rsplit") {
    return bind([](Interpreter& in, const std::string& str, CallArgs& a) {
      const Value* sep = arg(a, 0, "sep");
      const Value* maxsplit = arg(a, 1, "maxsplit");
      ValueList parts;
      for (std::string& p : py_split(str, sep && !sep->is_none() ? &sep->as_string() : nullptr,
                                     maxsplit ? maxsplit->as_int() : -1)) {
        parts.push_back(Value::string(std::move(p)));
      }
      in.charge_steps(static_cast<int64_t>(parts.size()));
      return Value::list(std::move(parts));
    });
  }
  if (name == "startswith" || name == "endswith") {
    const bool starts = name == "startswith";
    return bind([starts](Interpreter&, const std::string& str, CallArgs& a) {
      const Value& what = need_arg(a, 0, "prefix");
      ValueList options = what.is_list() ? what.as_list() : ValueList{what};
      for (const Value& o : options) {
        if (!o.is_string()) throw TemplateError("startswith/endswith takes a str or a tuple of str");
        if (starts ? std::string_view(str).starts_with(o.as_string()) : std::string_view(str).ends_with(o.as_string())) {
          return Value::boolean(true);
        }
      }
      return Value::boolean(false);
    });
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    return bind([name](Interpreter&, const std::string& str, CallArgs&) {
      if (name == "upper") return Value::string(ascii_upper(str));
      if (name == "lower") return Value::string(ascii_lower(str));
      if (name == "capitalize") return Value::string(py_capitalize(str));
      return Value::string(py_title(str));
    });
  }
  if (name == "replace") {
    return bind([](Interpreter& in, const std::string& str, CallArgs& a) {
      const Value* count = arg(a, 2, "count");
      std::string r = py_replace(str, string_arg(a, 0, "old"), string_arg(a, 1, "new"), count ? count->as_int() : -1);
      in.charge_work(r.size());
      return Value::string(std::move(r));
    });
  }
  if (name == "find" || name == "rfind" || name == "count" || name == "index") {
    return bind([name](Interpreter&, const std::string& str, CallArgs& a) {
      const std::string& sub = string_arg(a, 0, "sub");
      if (name == "count") return Value::integer(py_count(str, sub));
      const size_t at = name == "rfind" ? str.rfind(sub) : str.find(sub);
      if (at == std::string::npos) {
        if (name == "index") throw TemplateError("substring not found");
        return Value::integer(-1);
      }
      return Value::integer(static_cast<int64_t>(utf8_chars(std::string_view(str).substr(0, at)).size()));
    });
  }
  if (name == "join") {
    return bind([](Interpreter& in, const std::string& str, CallArgs& a) {
      std::string out;
      const ValueList items = iterate(need_arg(a, 0, "iterable"));
      for (size_t i = 0; i < items.size(); ++i) {
        if (!items[i].is_string()) throw TemplateError("sequence item: expected str instance");
        if (i > 0) out += str;
        out += items[i].as_string();
      }
      in.charge_work(out.size());
      return Value::string(std::move(out));
    });
  }
  if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isalnum" || name == "islower" ||
      name == "isupper") {
    return bind([name](Interpreter&, const std::string& str, CallArgs&) {
      return Value::boolean(py_is_class(str, name));
    });
  }
  if (name == "splitlines") {
    return bind([](Interpreter&, const std::string& str, CallArgs&) {
      ValueList parts;
      for (std::string& p : py_splitlines(str)) parts.push_back(Value::string(std::move(p)));
      return Value::list(std::move(parts));
    });
  }
  return Value::undefined(name);
}

Value dict_method(const Value& d, const std::string& name) {
  if (name == "items" || name == "keys" || name == "values") {
    return Value::function(name, [d, name](CallArgs&) {
      ValueList out;
      for (const auto& [k, v] : d.as_dict().items) {
        if (name == "items") out.push_back(Value::tuple({Value::string(k), v}));
        if (name == "keys") out.push_back(Value::string(k));
        if (name == "values") out.push_back(v);
      }
      return Value::list(std::move(out));
    });
  }
  if (name == "get") {
    return Value::function(name, [d](CallArgs& a) {
      const Value& key = need_arg(a, 0, "key");
      const Value* fallback = arg(a, 1, "default");
      const Value* found = key.is_string() ? d.as_dict().find(key.as_string()) : nullptr;
      if (found != nullptr) return *found;
      return fallback ? *fallback : Value::none();
    });
  }
  return Value();
}

}  // namespace

Value get_attribute(Interpreter& in, const Value& obj, const std::string& name) {
  if (obj.is_undefined()) throw TemplateError(fmt::format("'{}' is undefined", obj.as_string()));
  if (obj.is_dict()) {
    if (!obj.is_namespace()) {
      Value method = dict_method(obj, name);
      if (method.is_function()) return method;
    }
    const Value* v = obj.as_dict().find(name);
    return v ? *v : Value::undefined(name);
  }
  if (obj.is_string()) return string_method(in, obj.as_string(), name);
  return Value::undefined(name);
}

Value get_item(Interpreter& in, const Value& obj, const Value& key) {
  if (obj.is_undefined()) throw TemplateError(fmt::format("'{}' is undefined", obj.as_string()));
  if (obj.is_dict()) {
    if (key.is_string()) {
      const Value* v = obj.as_dict().find(key.as_string());
      if (v != nullptr) return *v;
      return obj.is_namespace() ? Value::undefined(key.as_string()) : get_attribute(in, obj, key.as_string());
    }
    return Value::undefined(to_display(key));
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    ValueList items = obj.is_list() ? ValueList() : iterate(obj);
    const ValueList& seq = obj.is_list() ? obj.as_list() : items;
    int64_t i = key.as_int();
    const auto n = static_cast<int64_t>(seq.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined(fmt::format("index {}", key.as_int()));
    return seq[static_cast<size_t>(i)];
  }
  if (key.is_string()) return get_attribute(in, obj, key.as_string());
  return Value::undefined(to_display(key));
}

Value slice_value(Interpreter& in, const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) throw TemplateError(fmt::format("'{}' is undefined", obj.as_string()));
  if (!obj.is_list() && !obj.is_string()) throw TemplateError(fmt::format("'{}' object is not subscriptable", obj.type_name()));
  auto as_index = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!v.is_int() && !v.is_bool()) throw TemplateError(fmt::format("slice {} must be an integer or None", what));
    return v.as_int();
  };
  ValueList seq = iterate(obj);
  const auto n = static_cast<int64_t>(seq.size());
  const int64_t st = as_index(step, "step").value_or(1);
  if (st == 0) throw TemplateError("slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t i = *v < 0 ? *v + n : *v;
    if (st > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t b = clamp(as_index(start, "start"), st > 0 ? 0 : n - 1);
  const int64_t e = clamp(as_index(stop, "stop"), st > 0 ? n : -1);
  ValueList out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) out.push_back(seq[static_cast<size_t>(i)]);
  in.charge_steps(static_cast<int64_t>(out.size()) / 64);
  if (obj.is_list()) return Value::list(std::move(out));
  std::string s;
  for (const Value& c : out) s += c.as_string();
  return Value::string(std::move(s));
}

void add_globals(Interpreter& in, Frame& globals) {
  globals.vars["range"] = Value::function("range", [&in](CallArgs& a) {
    if (a.positional.empty() || a.positional.size() > 3) throw TemplateError("range expected 1 to 3 arguments");
    for (const Value& v : a.positional) {
      if (!v.is_int() && !v.is_bool()) throw TemplateError("range() arguments must be integers");
    }
    int64_t start = 0, stop = 0, step = 1;
    if (a.positional.size() == 1) {
      stop = a.positional[0].as_int();
    } else {
      start = a.positional[0].as_int();
      stop = a.positional[1].as_int();
      if (a.positional.size() == 3) step = a.positional[2].as_int();
    }
    if (step == 0) throw TemplateError("range() arg 3 must not be zero");
    ValueList out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      in.charge_steps(1);
      out.push_back(Value::integer(i));
      if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step)) break;
    }
    return Value::list(std::move(out));
  });
  auto make_dict = [](CallArgs& a) {
    ValueDict d;
    if (!a.positional.empty()) {
      if (!a.positional[0].is_dict()) throw TemplateError("expected a dict argument");
      d = a.positional[0].as_dict();
    }
    for (const auto& [k, v] : a.keyword) d.set(k, v);
    return d;
  };
  globals.vars["namespace"] = Value::function("namespace", [make_dict, &in](CallArgs& a) {
    Value ns = Value::namespace_object(make_dict(a));
    in.register_namespace(ns);
    return ns;
  });
  globals.vars["dict"] = Value::function("dict", [make_dict](CallArgs& a) { return Value::dict(make_dict(a)); });
  globals.vars["raise_exception"] = Value::function("raise_exception", [](CallArgs& a) -> Value {
    throw TemplateError(a.positional.empty() ? std::string("raise_exception") : to_display(a.positional[0]));
  });
  globals.vars["strftime_now"] = Value::function("strftime_now", [&in](CallArgs& a) {
    const std::string& format = string_arg(a, 0, "format");
    std::time_t now = in.now();
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[256];
    const size_t n = format.size() < 128 ? std::strftime(buf, sizeof(buf), format.c_str(), &tm) : 0;
    return Value::string(std::string(buf, n));
  });
}

}  // namespace tessera::jinja
