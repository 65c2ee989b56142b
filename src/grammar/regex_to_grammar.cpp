#include "grammar/regex_to_grammar.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/utf8_ranges.h"

namespace tessera::grammar {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\r'}, {' ', ' '}};

std::string hex_escape(uint32_t cp) {
  char buf[16];
  if (cp <= 0xFF) snprintf(buf, sizeof buf, "\\x%02X", cp);
  else if (cp <= 0xFFFF) snprintf(buf, sizeof buf, "\\u%04X", cp);
  else snprintf(buf, sizeof buf, "\\U%08X", cp);
  return buf;
}

// One code point inside a grammar class or literal.
std::string class_char(uint32_t cp) {
  if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9')) {
    return std::string(1, static_cast<char>(cp));
  }
  return hex_escape(cp);
}

std::string class_text(const Ranges& ranges) {
  std::string out = "[";
  for (auto [lo, hi] : ranges) {
    out += class_char(lo);
    if (hi > lo) out += "-" + class_char(hi);
  }
  return out + "]";
}

Ranges normalized(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (auto x : r) {
    if (!out.empty() && x.first <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, x.second);
    } else {
      out.push_back(x);
    }
  }
  return out;
}

Ranges subtract(const Ranges& a, const Ranges& b) {
  Ranges comp = complement_ranges(b);
  Ranges out;
  for (auto x : normalized(a)) {
    for (auto y : comp) {
      const uint32_t lo = std::max(x.first, y.first), hi = std::min(x.second, y.second);
      if (lo <= hi) out.push_back({lo, hi});
    }
  }
  return out;
}

class RegexParser {
 public:
  RegexParser(std::string_view text, RegexTarget target) : text_(text), target_(target) {}

  Result<std::string> run() {
    if (!text_.empty() && text_[0] == '^') ++pos_;
    std::string expr = parse_alternation();
    if (error_) return *error_;
    if (pos_ < text_.size()) return fail(std::string("unexpected '") + text_[pos_] + "'");
    return expr;
  }

 private:
  Error fail(const std::string& what) const {
    return Error{ErrorCode::kInvalidArgument,
                 "regex: " + what + " at offset " + std::to_string(pos_)};
  }
  void set_error(const std::string& what) {
    if (!error_) error_ = fail(what);
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  std::string parse_alternation() {
    if (++depth_ > 200) return set_error("groups nested too deeply"), "";
    std::vector<std::string> alts{parse_concat()};
    while (!error_ && peek() == '|') {
      ++pos_;
      alts.push_back(parse_concat());
    }
    --depth_;
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ")";
  }

  std::string parse_concat() {
    std::string out;
    while (!error_ && !at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        ++pos_;
        if (!at_end()) set_error("'$' anchor before the end");
        continue;
      }
      std::string atom = parse_atom();
      if (error_) break;
      atom = parse_quantifier(atom);
      out += (out.empty() ? "" : " ") + atom;
    }
    return out.empty() ? "\"\"" : out;
  }

  // The leading number of "  12,..." or "12}", saturating (the grammar parser caps the bounds).
  static uint64_t bound_value(std::string_view digits) {
    uint64_t v = 0;
    size_t i = digits.find_first_not_of(' ');
    for (; i < digits.size() && isdigit(static_cast<unsigned char>(digits[i])); ++i) {
      v = std::min<uint64_t>(v * 10 + static_cast<uint64_t>(digits[i] - '0'), uint64_t{1} << 40);
    }
    return v;
  }

  std::string parse_quantifier(std::string atom) {
    while (!error_ && !at_end()) {
      const char q = peek();
      std::string suffix;
      if (q == '*' || q == '+' || q == '?') {
        ++pos_;
        suffix = std::string(1, q);
      } else if (q == '{' && pos_ + 1 < text_.size() && isdigit(static_cast<unsigned char>(text_[pos_ + 1]))) {
        const size_t close = text_.find('}', pos_);
        if (close == std::string_view::npos) return set_error("unterminated {m,n}"), atom;
        suffix = std::string(text_.substr(pos_, close - pos_ + 1));
        for (char c : suffix.substr(1, suffix.size() - 2)) {
          if (!isdigit(static_cast<unsigned char>(c)) && c != ',' && c != ' ') {
            return set_error("bad {m,n}"), atom;
          }
        }
        // Said here, at the regex's offset, rather than by the grammar parser at the grammar's.
        const size_t comma = suffix.find(',');
        if (comma != std::string::npos && suffix.find_first_of("0123456789", comma) != std::string::npos &&
            bound_value(suffix.substr(comma + 1)) < bound_value(suffix.substr(1))) {
          return set_error("{m,n} with n < m"), atom;
        }
        pos_ = close + 1;
      } else {
        break;
      }
      if (peek() == '?' || peek() == '+') ++pos_;  // lazy / possessive: same language
      atom = "(" + atom + ")" + suffix;
    }
    return atom;
  }

  // A literal code point as grammar text, in the target's encoding.
  std::string literal(uint32_t cp) {
    if (target_ == RegexTarget::kJsonString) {
      if (cp == '"') return "\"\\\\\\\"\"";      // the two bytes \"
      if (cp == '\\') return "\"\\\\\\\\\"";     // the two bytes \\ (grammar "\\\\")
      if (cp < 0x20) {
        char buf[16];
        snprintf(buf, sizeof buf, "\\\\u%04X", cp);  // \uXXXX spelled out
        return "\"" + std::string(buf) + "\"";
      }
    }
    return "\"" + class_char(cp) + "\"";
  }

  std::string class_expr(Ranges ranges) {
    ranges = normalized(std::move(ranges));
    if (target_ == RegexTarget::kJsonString) {
      // Unescaped in a JSON string: everything but " \ and controls; those as escapes.
      std::string extra;
      auto in = [&](uint32_t cp) {
        for (auto [lo, hi] : ranges) {
          if (cp >= lo && cp <= hi) return true;
        }
        return false;
      };
      Ranges plain = subtract(ranges, {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}});
      std::vector<std::string> alts;
      if (!plain.empty()) alts.push_back(class_text(plain));
      if (in('"')) alts.push_back(literal('"'));
      if (in('\\')) alts.push_back(literal('\\'));
      for (uint32_t c = 0; c < 0x20; ++c) {
        if (in(c)) alts.push_back(literal(c));
      }
      if (alts.empty()) return "[^\\x00-\\U0010FFFF]";
      if (alts.size() == 1) return alts[0];
      std::string out = "(";
      for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
      return out + ")";
    }
    if (ranges.empty()) return "[^\\x00-\\U0010FFFF]";
    return class_text(ranges);
  }

  std::optional<uint32_t> read_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char h = peek();
      const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                  : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) return set_error("expected a hex digit"), std::nullopt;
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) {
      return set_error("escape is not a Unicode scalar value"), std::nullopt;
    }
    return v;
  }

  // After a backslash: a class (\d...) into `ranges` and true, or a code point in `cp`.
  bool read_escape(Ranges& ranges, uint32_t& cp, bool in_class) {
    const char e = peek();
    ++pos_;
    switch (e) {
      case 'd': ranges = kDigit; return true;
      case 'w': ranges = kWord; return true;
      case 's': ranges = kSpace; return true;
      case 'D': ranges = complement_ranges(kDigit); return true;
      case 'W': ranges = complement_ranges(kWord); return true;
      case 'S': ranges = complement_ranges(kSpace); return true;
      case 'n': cp = '\n'; return false;
      case 't': cp = '\t'; return false;
      case 'r': cp = '\r'; return false;
      case 'f': cp = '\f'; return false;
      case 'v': cp = '\v'; return false;
      case '0': cp = 0; return false;
      case 'x': cp = read_hex(2).value_or(0); return false;
      case 'u': cp = read_hex(4).value_or(0); return false;
      case 'b':
        if (in_class) {
          cp = '\b';
          return false;
        }
        set_error("word boundary \\b is not supported");
        return false;
      default:
        if (isdigit(static_cast<unsigned char>(e))) {
          set_error("backreferences are not supported");
        } else if (isalnum(static_cast<unsigned char>(e))) {
          set_error(std::string("unsupported escape \\") + e);
        } else if (e == '\0') {
          set_error("trailing backslash");
        }
        cp = static_cast<unsigned char>(e);
        return false;
    }
  }

  std::string parse_atom() {
    const char c = peek();
    if (c == '(') {
      ++pos_;
      if (peek() == '?') {
        ++pos_;
        if (peek() == ':') {
          ++pos_;
        } else if (peek() == '<' && pos_ + 1 < text_.size() && text_[pos_ + 1] != '=' && text_[pos_ + 1] != '!') {
          pos_ = text_.find('>', pos_);
          if (pos_ == std::string_view::npos) return pos_ = text_.size(), set_error("bad group name"), "";
          ++pos_;
        } else if (peek() == 'P' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '<') {
          pos_ = text_.find('>', pos_);
          if (pos_ == std::string_view::npos) return pos_ = text_.size(), set_error("bad group name"), "";
          ++pos_;
        } else if (peek() == '=' || peek() == '!' || peek() == '<') {
          return set_error("lookaround assertions are not supported"), "";
        } else {
          return set_error("inline flags are not supported"), "";
        }
      }
      std::string inner = parse_alternation();
      if (peek() != ')') return set_error("expected ')'"), "";
      ++pos_;
      return "(" + inner + ")";
    }
    if (c == '[') return parse_class();
    if (c == '.') {
      ++pos_;
      return class_expr({{0, '\n' - 1}, {'\n' + 1, kMaxCodePoint}});
    }
    if (c == '^') return set_error("'^' anchor after the start"), "";
    if (c == '*' || c == '+' || c == '?' || c == '{') {
      if (c == '{') {
        ++pos_;
        return literal('{');
      }
      return set_error(std::string("nothing to repeat before '") + c + "'"), "";
    }
    if (c == '\\') {
      ++pos_;
      Ranges ranges;
      uint32_t cp = 0;
      if (read_escape(ranges, cp, false)) return class_expr(ranges);
      return literal(cp);
    }
    const int32_t cp = decode_utf8(text_, pos_);
    if (cp < 0) return set_error("invalid UTF-8"), "";
    return literal(static_cast<uint32_t>(cp));
  }

  std::string parse_class() {
    ++pos_;  // '['
    bool negate = false;
    if (peek() == '^') negate = true, ++pos_;
    Ranges ranges;
    bool first = true;
    while (!error_) {
      if (at_end()) return set_error("unterminated character class"), "";
      if (peek() == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      uint32_t lo = 0;
      if (peek() == '\\') {
        ++pos_;
        Ranges r;
        if (read_escape(r, lo, true)) {
          ranges.insert(ranges.end(), r.begin(), r.end());
          continue;
        }
      } else if (peek() == '[' && pos_ + 1 < text_.size() && text_[pos_ + 1] == ':') {
        return set_error("POSIX classes [:name:] are not supported"), "";
      } else {
        const int32_t cp = decode_utf8(text_, pos_);
        if (cp < 0) return set_error("invalid UTF-8"), "";
        lo = static_cast<uint32_t>(cp);
      }
      uint32_t hi = lo;
      if (peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        ++pos_;
        if (peek() == '\\') {
          ++pos_;
          Ranges r;
          if (read_escape(r, hi, true)) return set_error("class escape as a range end"), "";
        } else {
          const int32_t cp = decode_utf8(text_, pos_);
          if (cp < 0) return set_error("invalid UTF-8"), "";
          hi = static_cast<uint32_t>(cp);
        }
        if (hi < lo) return set_error("character range out of order"), "";
      }
      ranges.push_back({lo, hi});
    }
    if (negate) ranges = complement_ranges(ranges);
    return class_expr(ranges);
  }

  std::string_view text_;
  RegexTarget target_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::optional<Error> error_;
};

}  // namespace

std::string grammar_literal(std::string_view bytes) {
  std::string out = "\"";
  size_t pos = 0;
  while (pos < bytes.size()) {
    const int32_t cp = decode_utf8(bytes, pos);
    if (cp < 0) {  // a raw byte that is not UTF-8 cannot be spelled; callers pass valid text
      out += hex_escape(static_cast<unsigned char>(bytes[pos++]));
      continue;
    }
    if (cp == '"' || cp == '\\') out += std::string("\\") + static_cast<char>(cp);
    else if (cp < 0x20 || cp == 0x7F) out += hex_escape(static_cast<uint32_t>(cp));
    else append_utf8(static_cast<uint32_t>(cp), out);
  }
  return out + "\"";
}

Result<std::string> regex_to_grammar_expr(std::string_view regex, RegexTarget target) {
  return RegexParser(regex, target).run();
}

Result<std::string> regex_to_grammar(std::string_view regex) {
  auto expr = regex_to_grammar_expr(regex, RegexTarget::kRaw);
  if (!expr.ok()) return expr.error();
  return "root ::= " + expr.value() + "\n";
}

}  // namespace tessera::grammar
