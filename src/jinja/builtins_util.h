// Helpers shared by the builtins: argument access and Python's str semantics (strip, split,
// replace, title...). Case mapping is ASCII-only (Python maps all of Unicode: a known difference).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "jinja/value.h"

namespace tessera::jinja {

// Argument `pos` (positional) or `name` (keyword); null when absent.
const Value* arg(CallArgs& a, size_t pos, const char* name);
const Value& need_arg(CallArgs& a, size_t pos, const char* name);      // throws when absent
const std::string& string_arg(CallArgs& a, size_t pos, const char* name);  // throws unless a str

bool py_is_space(std::string_view code_point);  // str.isspace() for one UTF-8 code point
std::string py_strip(const std::string& s, const std::string* chars, bool left, bool right);
std::vector<std::string> py_split(const std::string& s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> py_splitlines(const std::string& s);
std::string py_replace(const std::string& s, const std::string& old, const std::string& now, int64_t count);
int64_t py_count(const std::string& s, const std::string& sub);
std::string ascii_upper(std::string s);
std::string ascii_lower(std::string s);
std::string py_capitalize(const std::string& s);
std::string py_title(const std::string& s);  // str.title()
bool py_is_class(const std::string& s, const std::string& method);  // isdigit, isalpha, ...

}  // namespace tessera::jinja
