// The template engine's value: Python's data model as Jinja sees it (undefined, None, bool, int,
// float, str, list, dict with insertion order, callables). Lists and dicts are shared by
// reference, as in Python, so a `namespace` set inside a loop is seen after it.
//
// Strings are UTF-8 bytes; length, indexing and slicing count code points as Python does.
// Ints are int64 (Python's are unbounded: overflow is an error here, never a wrap).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::jinja {

class Value;
using ValueList = std::vector<Value>;

// A Python dict with string keys, in insertion order (linear lookup: template dicts are small).
struct ValueDict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  void set(const std::string& key, Value value);
};

// Arguments of a call: positional, then keyword (name, value) in the order written.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};
using NativeFunction = std::function<Value(CallArgs&)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };

  Value() = default;  // undefined
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double f);
  static Value string(std::string s);
  static Value list(ValueList items = {});
  static Value tuple(ValueList items);  // a list that prints as (a, b)
  // A str marked safe (Jinja's Markup, from |safe or |escape): `markup + str` HTML-escapes the str.
  static Value markup(std::string s);
  static Value dict(ValueDict d = {});
  static Value function(std::string name, NativeFunction fn);
  // A `namespace(...)`: a dict whose attributes may be assigned with {% set ns.x = ... %}.
  static Value namespace_object(ValueDict d);
  // An undefined value that remembers the name it was looked up by (for error messages).
  static Value undefined(std::string name);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_function() const { return kind_ == Kind::kFunction; }
  bool is_namespace() const { return kind_ == Kind::kDict && namespace_; }
  bool is_tuple() const { return kind_ == Kind::kList && namespace_; }
  bool is_markup() const { return kind_ == Kind::kString && namespace_; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }
  double as_float() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(as_int()); }
  const std::string& as_string() const { return s_; }  // also: the undefined value's name
  ValueList& as_list() const { return *list_; }
  ValueDict& as_dict() const { return *dict_; }
  const NativeFunction& as_function() const { return *fn_; }

  bool truthy() const;
  std::string type_name() const;  // Python's type name, for errors

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  bool namespace_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<ValueList> list_;
  std::shared_ptr<ValueDict> dict_;
  std::shared_ptr<NativeFunction> fn_;
};

// Python's ==, with 1 == 1.0 == True; lists and dicts compare element-wise.
bool values_equal(const Value& a, const Value& b);
// Python's <, for numbers, strings (byte order = code point order in UTF-8) and lists; returns
// false and sets *ok = false for types that do not order.
bool value_less(const Value& a, const Value& b, bool* ok);

// str(x) as Jinja prints it: None -> "None", True -> "True", 1.0 -> "1.0", lists as Python repr.
std::string to_display(const Value& v);
// repr(x): strings quoted as Python does.
std::string to_repr(const Value& v);
// Python's float repr (shortest round trip, exponent outside [1e-4, 1e16)).
std::string float_repr(double f);

// json.dumps(x, ensure_ascii=False, indent=..., separators=..., sort_keys=...) as HF's tojson
// calls it. Defaults: item separator ", " (or "," with an indent), key separator ": ".
struct JsonStyle {
  int indent = -1;  // < 0: everything on one line
  std::string item_sep, key_sep;  // empty: the defaults above
  bool sort_keys = false;
};
// Returns false (and leaves *out partial) for values JSON cannot hold (undefined, functions,
// namespaces) or nesting deeper than 512.
bool to_json_text(const Value& v, const JsonStyle& style, std::string* out);

Value from_json(const nlohmann::ordered_json& j);

// UTF-8 helpers: code points of s (invalid bytes count one each) and the inverse.
std::vector<std::string_view> utf8_chars(std::string_view s);

}  // namespace tessera::jinja
