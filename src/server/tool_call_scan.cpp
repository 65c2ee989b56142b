// Prefix-accepting scan of tool-call JSON (see tool_call_scan.h). Every reader returns kOk (the
// construct is complete), kMore (the text ran out inside it: everything read so far is a valid
// prefix) or kBad; on kMore the cursor is at the end of the settled bytes.
#include "server/tool_call_scan.h"

#include <cstdint>

#include <nlohmann/json.hpp>

namespace tessera::server {
namespace {

enum class R { kOk, kMore, kBad };

bool is_blank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string decode_string(std::string_view quoted) {
  if (quoted.find('\\') == std::string_view::npos) return std::string(quoted.substr(1, quoted.size() - 2));
  return nlohmann::json::parse(quoted).get<std::string>();
}

class Scanner {
 public:
  Scanner(std::string_view s, const std::set<std::string>& known, std::vector<CallScan>* calls)
      : s_(s), known_(known), calls_(calls) {}

  size_t pos() const { return i_; }
  bool at_end() const { return i_ == s_.size(); }
  char peek() const { return s_[i_]; }
  void blanks() {
    while (i_ < s_.size() && is_blank(s_[i_])) ++i_;
  }
  void blanks_or_semicolons() {
    while (i_ < s_.size() && (is_blank(s_[i_]) || s_[i_] == ';')) ++i_;
  }
  // `word` exactly; kMore on a proper prefix of it at the end of the text.
  R literal(std::string_view word) {
    for (char c : word) {
      if (at_end()) return R::kMore;
      if (s_[i_] != c) return R::kBad;
      ++i_;
    }
    return R::kOk;
  }
  R skip_line() {
    while (!at_end() && s_[i_] != '\n') ++i_;
    if (at_end()) return R::kMore;
    ++i_;
    return R::kOk;
  }

  // A container: '[' call objects ']' or a call object (which may be a tool_calls list).
  R container() {
    if (at_end()) return R::kMore;
    if (peek() == '[') return call_list();
    if (peek() == '{') return call_object(/*allow_list=*/true);
    return R::kBad;
  }

 private:
  R value() {
    if (at_end()) return R::kMore;
    switch (peek()) {
      case '{': return members([this](const std::string&) { return value(); });
      case '[': return array();
      case '"': return string();
      case 't': return literal("true");
      case 'f': return literal("false");
      case 'n': return literal("null");
      default: return number();
    }
  }

  R array() {
    ++i_;
    blanks();
    if (at_end()) return R::kMore;
    if (peek() == ']') {
      ++i_;
      return R::kOk;
    }
    while (true) {
      if (R r = value(); r != R::kOk) return r;
      blanks();
      if (at_end()) return R::kMore;
      if (peek() == ']') {
        ++i_;
        return R::kOk;
      }
      if (peek() != ',') return R::kBad;
      ++i_;
      blanks();
    }
  }

  // -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?; a number never ends at the end of the text
  // (more digits may follow), so that is kMore.
  R number() {
    auto digit = [this] { return !at_end() && peek() >= '0' && peek() <= '9'; };
    auto digits = [&] {
      if (at_end()) return R::kMore;
      if (!digit()) return R::kBad;
      while (digit()) ++i_;
      return R::kOk;
    };
    if (!at_end() && peek() == '-') ++i_;
    if (at_end()) return R::kMore;
    if (peek() == '0') {
      ++i_;
    } else if (R r = digits(); r != R::kOk) {
      return r;
    }
    if (at_end()) return R::kMore;
    if (peek() == '.') {
      ++i_;
      if (R r = digits(); r != R::kOk) return r;
    }
    if (at_end()) return R::kMore;
    if (peek() == 'e' || peek() == 'E') {
      ++i_;
      if (at_end()) return R::kMore;
      if (peek() == '+' || peek() == '-') ++i_;
      if (R r = digits(); r != R::kOk) return r;
    }
    return at_end() ? R::kMore : R::kOk;
  }

  // \uXXXX after the backslash; *cp the code unit.
  R hex4(uint32_t* cp) {
    *cp = 0;
    for (int k = 0; k < 4; ++k) {
      if (at_end()) return R::kMore;
      const int h = hex_value(peek());
      if (h < 0) return R::kBad;
      *cp = *cp * 16 + static_cast<uint32_t>(h);
      ++i_;
    }
    return R::kOk;
  }

  // One UTF-8 character of 2-4 bytes at i_ (RFC 3629: no overlongs, surrogates or > U+10FFFF).
  // On kMore the cursor stays before the character, so settled bytes never split one.
  R utf8_char() {
    const auto c = static_cast<unsigned char>(peek());
    int len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return R::kBad;
    for (int k = 1; k < len; ++k) {
      if (i_ + k >= s_.size()) return R::kMore;
      const auto b = static_cast<unsigned char>(s_[i_ + k]);
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return R::kBad;
    }
    i_ += len;
    return R::kOk;
  }

  R string() {
    ++i_;  // '"'
    while (true) {
      if (at_end()) return R::kMore;
      const auto c = static_cast<unsigned char>(peek());
      if (c == '"') {
        ++i_;
        return R::kOk;
      }
      if (c < 0x20) return R::kBad;
      if (c >= 0x80) {
        if (R r = utf8_char(); r != R::kOk) return r;
        continue;
      }
      ++i_;
      if (c != '\\') continue;
      if (at_end()) return R::kMore;
      const char e = peek();
      ++i_;
      if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') continue;
      if (e != 'u') return R::kBad;
      uint32_t cp = 0;
      if (R r = hex4(&cp); r != R::kOk) return r;
      if (cp >= 0xDC00 && cp <= 0xDFFF) return R::kBad;  // a low surrogate alone
      if (cp >= 0xD800 && cp <= 0xDBFF) {                 // must be followed by \u + low surrogate
        if (R r = literal("\\u"); r != R::kOk) return r;
        if (R r = hex4(&cp); r != R::kOk) return r;
        if (cp < 0xDC00 || cp > 0xDFFF) return R::kBad;
      }
    }
  }

  // An object; on_value(key) reads each member's value.
  template <class OnValue>
  R members(OnValue&& on_value) {
    ++i_;  // '{'
    blanks();
    if (at_end()) return R::kMore;
    if (peek() == '}') {
      ++i_;
      return R::kOk;
    }
    while (true) {
      if (at_end()) return R::kMore;
      if (peek() != '"') return R::kBad;
      const size_t key_begin = i_;
      if (R r = string(); r != R::kOk) return r;
      const std::string key = decode_string(s_.substr(key_begin, i_ - key_begin));
      blanks();
      if (at_end()) return R::kMore;
      if (peek() != ':') return R::kBad;
      ++i_;
      blanks();
      if (R r = on_value(key); r != R::kOk) return r;
      blanks();
      if (at_end()) return R::kMore;
      if (peek() == '}') {
        ++i_;
        return R::kOk;
      }
      if (peek() != ',') return R::kBad;
      ++i_;
      blanks();
    }
  }

  R call_list() {
    ++i_;  // '['
    blanks();
    if (at_end()) return R::kMore;
    if (peek() == ']') return R::kBad;  // an empty list is no call
    while (true) {
      if (at_end()) return R::kMore;
      if (peek() != '{') return R::kBad;
      if (R r = call_object(/*allow_list=*/false); r != R::kOk) return r;
      blanks();
      if (at_end()) return R::kMore;
      if (peek() == ']') {
        ++i_;
        return R::kOk;
      }
      if (peek() != ',') return R::kBad;
      ++i_;
      blanks();
    }
  }

  // Counts of the keys that may not repeat within one object.
  struct KeyCounts {
    int name = 0, function = 0, list = 0, args = 0;
    bool add(const std::string& key) {  // false once a key repeats
      if (key == "name") return ++name == 1;
      if (key == "function") return ++function == 1;
      if (key == "tool_calls") return ++list == 1;
      if (key == "arguments" || key == "parameters") return ++args == 1;
      return true;
    }
  };

  R call_object(bool allow_list) {
    enum class Kind { kUndecided, kFlat, kWrapped, kList } kind = Kind::kUndecided;
    const size_t at = calls_->size();
    calls_->emplace_back();  // provisional until a key decides; popped for a tool_calls list
    KeyCounts counts;
    const R r = members([&](const std::string& key) -> R {
      if (!counts.add(key)) return R::kBad;
      if (kind == Kind::kUndecided) {
        if (key == "name") {
          kind = Kind::kFlat;
          return name_value(at);
        }
        if (key == "function") {
          kind = Kind::kWrapped;
          (*calls_)[at] = CallScan{};  // arguments seen before belong to no call
          if (at_end()) return R::kMore;
          return peek() == '{' ? function_object(at) : R::kBad;
        }
        if (key == "tool_calls") {
          if (!allow_list) return R::kBad;
          kind = Kind::kList;
          calls_->pop_back();
          if (at_end()) return R::kMore;
          return peek() == '[' ? call_list() : R::kBad;
        }
      }
      if ((key == "arguments" || key == "parameters") && (kind == Kind::kUndecided || kind == Kind::kFlat)) {
        return args_value(at);
      }
      return value();
    });
    if (r != R::kOk) return r;
    if (kind == Kind::kUndecided) return R::kBad;
    if (kind != Kind::kList) (*calls_)[at].complete = true;
    return R::kOk;
  }

  R function_object(size_t at) {
    KeyCounts counts;
    const R r = members([&](const std::string& key) -> R {
      if (!counts.add(key)) return R::kBad;
      if (key == "name") return name_value(at);
      if (key == "arguments" || key == "parameters") return args_value(at);
      return value();
    });
    if (r != R::kOk) return r;
    return (*calls_)[at].has_name ? R::kOk : R::kBad;
  }

  R name_value(size_t at) {
    if (at_end()) return R::kMore;
    if (peek() != '"') return R::kBad;
    const size_t begin = i_;
    if (R r = string(); r != R::kOk) return r;
    std::string name = decode_string(s_.substr(begin, i_ - begin));
    if (known_.count(name) == 0) return R::kBad;
    (*calls_)[at].name = std::move(name);
    (*calls_)[at].has_name = true;
    return R::kOk;
  }

  R args_value(size_t at) {
    if (at_end()) return R::kMore;
    if (peek() == '{') {
      (*calls_)[at].args = CallScan::Args::kObject;
      (*calls_)[at].args_begin = i_;
      const R r = value();
      (*calls_)[at].args_end = i_;
      (*calls_)[at].args_complete = r == R::kOk;
      return r;
    }
    if (peek() != '"') return R::kBad;
    (*calls_)[at].args = CallScan::Args::kString;
    const size_t begin = i_;
    if (R r = string(); r != R::kOk) return r;
    std::string text = decode_string(s_.substr(begin, i_ - begin));
    size_t a = 0, b = text.size();
    while (a < b && is_blank(text[a])) ++a;
    while (b > a && is_blank(text[b - 1])) --b;
    text = text.substr(a, b - a);
    const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return R::kBad;
    (*calls_)[at].args_text = std::move(text);
    (*calls_)[at].args_complete = true;
    return R::kOk;
  }

  std::string_view s_;
  size_t i_ = 0;
  const std::set<std::string>& known_;
  std::vector<CallScan>* calls_;
};

ScanStatus finish(R r, bool at_end) {
  if (r == R::kBad || (r == R::kMore && at_end)) return ScanStatus::kBad;
  return r == R::kMore ? ScanStatus::kMore : ScanStatus::kComplete;
}

// Containers separated by blanks or ';' to the end (fenced: then ``` and blanks). Never kOk
// before the end of the output: another container may follow.
R containers(Scanner& sc, bool fenced, bool at_end) {
  size_t num_values = 0;
  while (true) {
    sc.blanks_or_semicolons();
    if (sc.at_end()) return num_values == 0 ? R::kMore : (at_end ? R::kOk : R::kMore);
    if (fenced && sc.peek() == '`') {
      if (num_values == 0) return R::kBad;
      if (R r = sc.literal("```"); r != R::kOk) return r;
      sc.blanks();
      return sc.at_end() ? (at_end ? R::kOk : R::kMore) : R::kBad;
    }
    if (sc.peek() != '{' && sc.peek() != '[') return R::kBad;
    if (R r = sc.container(); r != R::kOk) return r;
    ++num_values;
  }
}

}  // namespace

CallsScan scan_tool_calls(std::string_view text, ScanShape shape, bool python_tag, bool at_end,
                          const std::set<std::string>& known) {
  CallsScan out;
  Scanner sc(text, known, &out.calls);
  R r = R::kOk;
  if (shape == ScanShape::kBlock) {
    sc.blanks();
    r = sc.container();
    if (r == R::kOk) {
      sc.blanks();
      if (sc.at_end()) {
        r = at_end ? R::kOk : R::kMore;  // the last block may end the output without </tool_call>
      } else {
        r = sc.literal("</tool_call>");
      }
    }
  } else {
    bool fenced = false;
    if (shape == ScanShape::kRegion) {
      if (python_tag && !sc.at_end() && sc.peek() == '<') {
        r = sc.literal("<|python_tag|>");
        sc.blanks();
      }
      if (r == R::kOk && !sc.at_end() && sc.peek() == '`') {
        r = sc.literal("```");
        if (r == R::kOk) r = sc.skip_line();
        fenced = true;
      }
    }
    if (r == R::kOk) r = containers(sc, fenced, at_end);
  }
  out.status = finish(r, at_end);
  out.end = sc.pos();
  return out;
}

}  // namespace tessera::server
