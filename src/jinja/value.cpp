// Value: construction, Python truthiness/equality/ordering, str()/repr(), json.dumps.
#include "jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace tessera::jinja {

const Value* ValueDict::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}
Value* ValueDict::find(std::string_view key) {
  for (auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}
void ValueDict::set(const std::string& key, Value value) {
  if (Value* v = find(key)) {
    *v = std::move(value);
  } else {
    items.emplace_back(key, std::move(value));
  }
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}
Value Value::number(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = f;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.s_ = std::move(s);
  return v;
}
Value Value::list(ValueList items) {
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = std::make_shared<ValueList>(std::move(items));
  return v;
}
Value Value::markup(std::string s) {
  Value v = string(std::move(s));
  v.namespace_ = true;
  return v;
}
Value Value::tuple(ValueList items) {
  Value v = list(std::move(items));
  v.namespace_ = true;
  return v;
}
Value Value::dict(ValueDict d) {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::make_shared<ValueDict>(std::move(d));
  return v;
}
Value Value::function(std::string name, NativeFunction fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.s_ = std::move(name);
  v.fn_ = std::make_shared<NativeFunction>(std::move(fn));
  return v;
}
Value Value::namespace_object(ValueDict d) {
  Value v = dict(std::move(d));
  v.namespace_ = true;
  return v;
}
Value Value::undefined(std::string name) {
  Value v;
  v.s_ = std::move(name);
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return f_ != 0;
    case Kind::kString: return !s_.empty();
    case Kind::kList: return !list_->empty();
    case Kind::kDict: return namespace_ || !dict_->items.empty();
    case Kind::kFunction: return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return "list";
    case Kind::kDict: return namespace_ ? "Namespace" : "dict";
    case Kind::kFunction: return "function";
  }
  return "?";
}

namespace {
bool equal_at(const Value& a, const Value& b, int depth);
}  // namespace

bool values_equal(const Value& a, const Value& b) { return equal_at(a, b, 0); }

namespace {
bool equal_at(const Value& a, const Value& b, int depth) {
  if (depth > 256) return false;  // self-referencing namespaces: Python raises RecursionError
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      const ValueList& x = a.as_list();
      const ValueList& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equal_at(x[i], y[i], depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const ValueDict& x = a.as_dict();
      const ValueDict& y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* other = y.find(k);
        if (other == nullptr || !equal_at(v, *other, depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::kFunction: return &a.as_function() == &b.as_function();
    default: return false;
  }
}
}  // namespace

bool value_less(const Value& a, const Value& b, bool* ok) {
  *ok = true;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list()) {
    const ValueList& x = a.as_list();
    const ValueList& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (values_equal(x[i], y[i])) continue;
      return value_less(x[i], y[i], ok);
    }
    return x.size() < y.size();
  }
  *ok = false;
  return false;
}

std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // "-d.ddde+XX"
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e_at = sci.find('e');
  std::string digits = sci.substr(0, e_at);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  const int exp = std::stoi(sci.substr(e_at + 1));
  if (exp >= -4 && exp < 16) {
    std::string out;
    if (exp >= 0) {
      if (static_cast<int>(digits.size()) <= exp + 1) {
        out = digits + std::string(exp + 1 - digits.size(), '0') + ".0";
      } else {
        out = digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
      }
    } else {
      out = "0." + std::string(-exp - 1, '0') + digits;
    }
    return sign + out;
  }
  std::string mant = digits.substr(0, 1);
  if (digits.size() > 1) mant += "." + digits.substr(1);
  return fmt::format("{}{}e{}{:02d}", sign, mant, exp < 0 ? '-' : '+', std::abs(exp));
}

namespace {

std::string repr_string(const std::string& s) {
  const bool has_single = s.find('\'') != s.npos;
  const bool has_double = s.find('"') != s.npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == quote || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

void json_string(const std::string& s, std::string* out) {
  *out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (c < 0x20) {
          *out += fmt::format("\\u{:04x}", c);
        } else {
          *out += static_cast<char>(c);
        }
    }
  }
  *out += '"';
}

bool json_value(const Value& v, const JsonStyle& style, int depth, std::string* out) {
  if (depth > 512) return false;
  const int indent = style.indent;
  const std::string item_sep = !style.item_sep.empty() ? style.item_sep : indent >= 0 ? "," : ", ";
  const std::string key_sep = !style.key_sep.empty() ? style.key_sep : ": ";
  auto newline = [&](int level) {
    if (indent >= 0) *out += "\n" + std::string(static_cast<size_t>(indent) * level, ' ');
  };
  switch (v.kind()) {
    case Value::Kind::kNone: *out += "null"; return true;
    case Value::Kind::kBool: *out += v.as_bool() ? "true" : "false"; return true;
    case Value::Kind::kInt: *out += std::to_string(v.as_int()); return true;
    case Value::Kind::kFloat: {
      const double f = v.as_float();
      if (std::isnan(f)) {
        *out += "NaN";
      } else if (std::isinf(f)) {
        *out += f < 0 ? "-Infinity" : "Infinity";
      } else {
        *out += float_repr(f);
      }
      return true;
    }
    case Value::Kind::kString: json_string(v.as_string(), out); return true;
    case Value::Kind::kList: {
      const ValueList& items = v.as_list();
      if (items.empty()) {
        *out += "[]";
        return true;
      }
      *out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) *out += item_sep;
        newline(depth + 1);
        if (!json_value(items[i], style, depth + 1, out)) return false;
      }
      newline(depth);
      *out += ']';
      return true;
    }
    case Value::Kind::kDict: {
      if (v.is_namespace()) return false;  // not JSON serializable, as in Python
      ValueDict d = v.as_dict();
      if (d.items.empty()) {
        *out += "{}";
        return true;
      }
      if (style.sort_keys) {
        std::stable_sort(d.items.begin(), d.items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      *out += '{';
      for (size_t i = 0; i < d.items.size(); ++i) {
        if (i > 0) *out += item_sep;
        newline(depth + 1);
        json_string(d.items[i].first, out);
        *out += key_sep;
        if (!json_value(d.items[i].second, style, depth + 1, out)) return false;
      }
      newline(depth);
      *out += '}';
      return true;
    }
    default: return false;
  }
}

}  // namespace

std::string to_repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString: return repr_string(v.as_string());
    case Value::Kind::kList: {
      std::string out = v.is_tuple() ? "(" : "[";
      const ValueList& items = v.as_list();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += ", ";
        out += to_repr(items[i]);
      }
      if (v.is_tuple() && items.size() == 1) out += ",";
      return out + (v.is_tuple() ? ")" : "]");
    }
    case Value::Kind::kDict: {
      if (v.is_namespace()) return "<Namespace>";
      std::string out = "{";
      const ValueDict& d = v.as_dict();
      for (size_t i = 0; i < d.items.size(); ++i) {
        if (i > 0) out += ", ";
        out += repr_string(d.items[i].first) + ": " + to_repr(d.items[i].second);
      }
      return out + "}";
    }
    default: return to_display(v);
  }
}

std::string to_display(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.as_bool() ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v.as_int());
    case Value::Kind::kFloat: return float_repr(v.as_float());
    case Value::Kind::kString: return v.as_string();
    case Value::Kind::kFunction: return "<function " + v.as_string() + ">";
    default: return to_repr(v);
  }
}

bool to_json_text(const Value& v, const JsonStyle& style, std::string* out) { return json_value(v, style, 0, out); }

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      for (const auto& e : j) items.push_back(from_json(e));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      ValueDict d;
      for (const auto& [k, e] : j.items()) d.set(k, from_json(e));
      return Value::dict(std::move(d));
    }
    default: return Value::none();
  }
}

std::vector<std::string_view> utf8_chars(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1;
    if (i + n > s.size()) n = 1;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) {
        n = 1;
        break;
      }
    }
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace tessera::jinja
