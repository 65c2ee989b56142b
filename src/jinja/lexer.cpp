// Jinja lexer (see lexer.h for the whitespace rules).
#include "jinja/lexer.h"

#include <algorithm>
#include <cctype>

#include "util/utf8.h"

namespace tessera::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Python's str.splitlines() line breaks become "\n"; one trailing newline is dropped.
std::string normalize_newlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\r') {
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
      out += '\n';
    } else if (c == '\n' || c == '\v' || c == '\f' || c == 0x1c || c == 0x1d || c == 0x1e) {
      out += '\n';
    } else if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x85) {
      out += '\n';
      ++i;
    } else if (c == 0xe2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
               (static_cast<unsigned char>(s[i + 2]) == 0xa8 || static_cast<unsigned char>(s[i + 2]) == 0xa9)) {
      out += '\n';
      i += 2;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}


int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python's "unicode-escape" decoding of a string literal's body. False on a bad \x/\u escape.
bool unescape(std::string_view body, std::string* out) {
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      *out += body[i];
      continue;
    }
    const char c = body[++i];
    switch (c) {
      case '\n': break;
      case '\\': *out += '\\'; break;
      case '\'': *out += '\''; break;
      case '"': *out += '"'; break;
      case 'a': *out += '\a'; break;
      case 'b': *out += '\b'; break;
      case 'f': *out += '\f'; break;
      case 'n': *out += '\n'; break;
      case 'r': *out += '\r'; break;
      case 't': *out += '\t'; break;
      case 'v': *out += '\v'; break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        if (i + n >= body.size()) return false;
        uint32_t cp = 0;
        for (size_t k = 1; k <= n; ++k) {
          const int h = hex_value(body[i + k]);
          if (h < 0) return false;
          cp = cp * 16 + static_cast<uint32_t>(h);
        }
        if (cp > 0x10ffff) return false;
        append_utf8(cp, *out);
        i += n;
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          uint32_t cp = static_cast<uint32_t>(c - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k) {
            cp = cp * 8 + static_cast<uint32_t>(body[++i] - '0');
          }
          append_utf8(cp, *out);
        } else {
          *out += '\\';
          *out += c;
        }
    }
  }
  return true;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  Result<std::vector<Token>> run() {
    size_t pos = 0;
    while (pos < src_.size()) {
      size_t at = src_.find('{', pos);
      while (at != std::string::npos && at + 1 < src_.size() && !is_tag_open(at)) at = src_.find('{', at + 1);
      if (at == std::string::npos || at + 1 >= src_.size()) {
        emit(TokenKind::kData, src_.substr(pos), pos);
        break;
      }
      const char type = src_[at + 1];
      const char sign = at + 2 < src_.size() ? src_[at + 2] : '\0';
      std::string text = src_.substr(pos, at - pos);
      if (sign == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (sign != '+' && type != '{') {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        const bool line_starting = pos == 0 || src_[pos - 1] == '\n';
        if ((l_pos > 0 || line_starting) &&
            std::all_of(text.begin() + static_cast<long>(l_pos), text.end(), is_space)) {
          text.resize(l_pos);
        }
      }
      emit(TokenKind::kData, text, pos);
      size_t p = at + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (type == '#') {
        const size_t end = src_.find("#}", p);
        if (end == std::string::npos) return error_at(at, "missing end of comment tag");
        pos = after_tag(end, end + 2);
        continue;
      }
      const bool block = type == '%';
      emit(block ? TokenKind::kBlockBegin : TokenKind::kVarBegin, "", at);
      const size_t first_token = tokens_.size();
      auto end = lex_tag(p, block);
      if (!end.ok()) return end.error();
      pos = *end;
      if (block && tokens_.size() == first_token + 2 && tokens_[first_token].kind == TokenKind::kName &&
          tokens_[first_token].text == "raw") {
        auto raw_end = lex_raw(pos);
        if (!raw_end.ok()) return raw_end.error();
        pos = *raw_end;
      }
    }
    emit(TokenKind::kEof, "", src_.size());
    return std::move(tokens_);
  }

 private:
  bool is_tag_open(size_t at) const {
    const char c = src_[at + 1];
    return c == '{' || c == '%' || c == '#';
  }

  std::pair<int, int> line_col(size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t line = static_cast<size_t>(it - line_starts_.begin());
    return {static_cast<int>(line), static_cast<int>(offset - line_starts_[line - 1] + 1)};
  }

  Error error_at(size_t offset, const std::string& what) const {
    auto [line, col] = line_col(offset);
    return make_error(ErrorCode::kInvalidArgument, "template line {} column {}: {}", line, col, what);
  }

  void emit(TokenKind kind, std::string text, size_t offset) {
    if (kind == TokenKind::kData && text.empty()) return;
    auto [line, col] = line_col(offset);
    tokens_.push_back(Token{kind, std::move(text), line, col});
  }

  // Position after a tag ending at close_start (the `-` or `%`/`}`/`#`), close_end one past it.
  size_t after_tag(size_t close_start, size_t close_end) const {
    size_t pos = close_end;
    if (close_start > 0 && src_[close_start - 1] == '-') {
      while (pos < src_.size() && is_space(src_[pos])) ++pos;
    } else if (src_[close_start] != '}' && pos < src_.size() && src_[pos] == '\n') {
      ++pos;  // trim_blocks: blocks and comments only
    }
    return pos;
  }

  // Tokens of one tag starting at p; returns the position after the closing marker.
  Result<size_t> lex_tag(size_t p, bool block) {
    int depth = 0;
    while (true) {
      while (p < src_.size() && is_space(src_[p])) ++p;
      if (p >= src_.size()) return error_at(p, block ? "unexpected end of template, expected '%}'" : "unexpected end of template, expected '}}'");
      const char c = src_[p];
      if (depth == 0) {
        const std::string_view close = block ? "%}" : "}}";
        const std::string_view rest = std::string_view(src_).substr(p);
        const bool minus_close = rest.size() >= 3 && rest[0] == '-' && rest.substr(1, 2) == close;
        const bool plus_close = block && rest.size() >= 3 && rest[0] == '+' && rest.substr(1, 2) == close;
        if (minus_close || plus_close || rest.starts_with(close)) {
          const size_t close_start = p + (minus_close || plus_close ? 1 : 0);
          emit(block ? TokenKind::kBlockEnd : TokenKind::kVarEnd, "", p);
          // after_tag looks at the character before the closing marker for '-'.
          if (minus_close) {
            size_t pos = close_start + 2;
            while (pos < src_.size() && is_space(src_[pos])) ++pos;
            return pos;
          }
          if (!block) return close_start + 2;
          size_t pos = close_start + 2;
          if (pos < src_.size() && src_[pos] == '\n') ++pos;
          return pos;
        }
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = p;
        while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        emit(TokenKind::kName, src_.substr(p, e - p), p);
        p = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        p = lex_number(p);
      } else if (c == '\'' || c == '"') {
        size_t e = p + 1;
        while (e < src_.size() && src_[e] != c) e += src_[e] == '\\' ? 2 : 1;
        if (e >= src_.size()) return error_at(p, "unterminated string literal");
        std::string value;
        if (!unescape(std::string_view(src_).substr(p + 1, e - p - 1), &value)) return error_at(p, "bad escape in string literal");
        emit(TokenKind::kString, std::move(value), p);
        p = e + 1;
      } else {
        static const char* kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op(1, c);
        for (const char* two : kTwo) {
          if (src_.compare(p, 2, two) == 0) op = two;
        }
        if (op.size() == 1 && std::string_view("+-*/%~()[]{},.:|=<>").find(c) == std::string_view::npos) {
          return error_at(p, std::string("unexpected character '") + c + "'");
        }
        if (op == "(" || op == "[" || op == "{") ++depth;
        if ((op == ")" || op == "]" || op == "}") && depth > 0) --depth;
        emit(TokenKind::kOp, op, p);
        p += op.size();
      }
    }
  }

  size_t lex_number(size_t p) {
    auto digits = [&](size_t q) {
      while (q < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[q])) ||
                                 (src_[q] == '_' && q + 1 < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q + 1]))))) {
        ++q;
      }
      return q;
    };
    const bool after_dot = !tokens_.empty() && tokens_.back().kind == TokenKind::kOp && tokens_.back().text == ".";
    size_t e = digits(p);
    bool is_float = false;
    if (!after_dot) {
      if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
        e = digits(e + 1);
        is_float = true;
      }
      if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
        size_t q = e + 1;
        if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
        if (q < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q]))) {
          e = digits(q);
          is_float = true;
        }
      }
    }
    std::string text;
    for (size_t i = p; i < e; ++i) {
      if (src_[i] != '_') text += src_[i];
    }
    emit(is_float ? TokenKind::kFloat : TokenKind::kInt, text, p);
    return e;
  }

  // Text up to {% endraw %} (with optional - / + whitespace control) is one data token.
  Result<size_t> lex_raw(size_t pos) {
    for (size_t at = src_.find("{%", pos); at != std::string::npos; at = src_.find("{%", at + 2)) {
      size_t q = at + 2;
      const bool strip_before = q < src_.size() && src_[q] == '-';
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ++q;
      while (q < src_.size() && is_space(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q += 6;
      while (q < src_.size() && is_space(src_[q])) ++q;
      const bool strip_after = q < src_.size() && src_[q] == '-';
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ++q;
      if (src_.compare(q, 2, "%}") != 0) continue;
      std::string text = src_.substr(pos, at - pos);
      if (strip_before) {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      }
      emit(TokenKind::kData, text, pos);
      emit(TokenKind::kBlockBegin, "", at);
      emit(TokenKind::kName, "endraw", at);
      emit(TokenKind::kBlockEnd, "", q);
      size_t end = q + 2;
      if (strip_after) {
        while (end < src_.size() && is_space(src_[end])) ++end;
      } else if (end < src_.size() && src_[end] == '\n') {
        ++end;
      }
      return end;
    }
    return error_at(pos, "missing {% endraw %}");
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

Result<std::vector<Token>> tokenize(std::string_view source) { return Lexer(normalize_newlines(source)).run(); }

}  // namespace tessera::jinja
