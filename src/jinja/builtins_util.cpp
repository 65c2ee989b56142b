// Python str semantics for the builtins (see builtins_util.h).
#include "jinja/builtins_util.h"

#include <cctype>

#include <fmt/format.h>

#include "jinja/interpreter.h"

namespace tessera::jinja {

const Value* arg(CallArgs& a, size_t pos, const char* name) {
  for (const auto& [k, v] : a.keyword) {
    if (k == name) return &v;
  }
  return pos < a.positional.size() ? &a.positional[pos] : nullptr;
}

const Value& need_arg(CallArgs& a, size_t pos, const char* name) {
  const Value* v = arg(a, pos, name);
  if (v == nullptr) throw TemplateError(fmt::format("missing argument '{}'", name));
  return *v;
}

const std::string& string_arg(CallArgs& a, size_t pos, const char* name) {
  const Value& v = need_arg(a, pos, name);
  if (!v.is_string()) throw TemplateError(fmt::format("argument '{}' must be str, not {}", name, v.type_name()));
  return v.as_string();
}

bool py_is_space(std::string_view c) {
  if (c.size() == 1) {
    const unsigned char b = static_cast<unsigned char>(c[0]);
    return b == ' ' || (b >= '\t' && b <= '\r') || (b >= 0x1c && b <= 0x1f);
  }
  static const char* kSpaces[] = {"\xc2\x85", "\xc2\xa0", "\xe1\x9a\x80", "\xe2\x80\xa8", "\xe2\x80\xa9",
                                  "\xe2\x80\xaf", "\xe2\x81\x9f", "\xe3\x80\x80"};
  for (const char* s : kSpaces) {
    if (c == s) return true;
  }
  // U+2000..U+200A
  return c.size() == 3 && static_cast<unsigned char>(c[0]) == 0xe2 && static_cast<unsigned char>(c[1]) == 0x80 &&
         static_cast<unsigned char>(c[2]) >= 0x80 && static_cast<unsigned char>(c[2]) <= 0x8a;
}

std::string py_strip(const std::string& s, const std::string* chars, bool left, bool right) {
  const std::vector<std::string_view> cps = utf8_chars(s);
  std::vector<std::string_view> set;
  if (chars != nullptr) set = utf8_chars(*chars);
  auto strip_it = [&](std::string_view c) {
    if (chars == nullptr) return py_is_space(c);
    for (std::string_view x : set) {
      if (x == c) return true;
    }
    return false;
  };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strip_it(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip_it(cps[e - 1])) --e;
  }
  std::string out;
  for (size_t i = b; i < e; ++i) out += cps[i];
  return out;
}

std::vector<std::string> py_split(const std::string& s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep != nullptr) {
    if (sep->empty()) throw TemplateError("empty separator");
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t at = s.find(*sep, pos);
      if (at == std::string::npos) break;
      out.push_back(s.substr(pos, at - pos));
      pos = at + sep->size();
    }
    out.push_back(s.substr(pos));
    return out;
  }
  const std::vector<std::string_view> cps = utf8_chars(s);
  size_t i = 0;
  while (i < cps.size()) {
    while (i < cps.size() && py_is_space(cps[i])) ++i;
    if (i == cps.size()) break;
    std::string word;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      for (; i < cps.size(); ++i) word += cps[i];
      size_t end = word.size();
      while (end > 0 && std::isspace(static_cast<unsigned char>(word[end - 1]))) --end;
      out.push_back(word.substr(0, end));
      break;
    }
    while (i < cps.size() && !py_is_space(cps[i])) word += cps[i++];
    out.push_back(std::move(word));
  }
  return out;
}

std::vector<std::string> py_splitlines(const std::string& s) {
  std::vector<std::string> out;
  std::string line;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' || s[i] == '\r') {
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      out.push_back(std::move(line));
      line.clear();
    } else {
      line += s[i];
    }
  }
  if (!line.empty()) out.push_back(std::move(line));
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& now, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `now` between characters (and at both ends).
    const auto cps = utf8_chars(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += now;
        ++done;
      }
      if (i < cps.size()) out += cps[i];
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old, pos);
    if (at == std::string::npos) break;
    out.append(s, pos, at - pos);
    out += now;
    pos = at + old.size();
    ++done;
  }
  out.append(s, pos);
  return out;
}

int64_t py_count(const std::string& s, const std::string& sub) {
  if (sub.empty()) return static_cast<int64_t>(utf8_chars(s).size()) + 1;
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
  return n;
}

std::string ascii_upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string py_capitalize(const std::string& s) {
  std::string out = ascii_lower(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

std::string py_title(const std::string& s) {
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isalpha(u)) {
      c = static_cast<char>(prev_cased ? std::tolower(u) : std::toupper(u));
      prev_cased = true;
    } else {
      prev_cased = u >= 0x80 && prev_cased;  // non-ASCII letters: treated as cased continuation
    }
  }
  return out;
}

bool py_is_class(const std::string& s, const std::string& method) {
  if (s.empty()) return false;
  bool any_cased = false;
  for (unsigned char c : s) {
    if (method == "isdigit" && !std::isdigit(c)) return false;
    if (method == "isalpha" && !std::isalpha(c)) return false;
    if (method == "isalnum" && !std::isalnum(c)) return false;
    if (method == "isspace" && !std::isspace(c)) return false;
    if (method == "islower" && std::isupper(c)) return false;
    if (method == "isupper" && std::islower(c)) return false;
    any_cased = any_cased || std::isalpha(c);
  }
  return (method != "islower" && method != "isupper") || any_cased;
}

}  // namespace tessera::jinja
