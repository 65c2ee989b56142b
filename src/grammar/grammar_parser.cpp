// parse_grammar: surface syntax -> rules of item sequences (grammar_rules.h) -> the flat Grammar
// (see grammar.h). This file is the text side: names, literals, classes, groups, repetition.
#include <algorithm>
#include <map>
#include <optional>

#include "grammar/grammar_rules.h"
#include "grammar/utf8_ranges.h"

namespace tessera::grammar {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<Grammar> run() {
    skip_space();
    if (at_end()) return fail("empty grammar: expected `root ::= ...`");
    while (!at_end()) {
      const size_t start = pos_;
      std::string name = read_name();
      if (name.empty()) return fail("expected a rule name");
      skip_space();
      if (!consume("::=")) return fail("expected `::=` after rule name '" + name + "'");
      const int32_t id = rule_id(name, start);
      if (rules_[id].defined) return fail_at(start, "rule '" + name + "' is defined twice");
      rules_[id].defined = true;
      auto alts = parse_alternatives(name);
      if (error_) return *error_;
      rules_[id].alts = std::move(alts);
      if (!at_end() && !at_rule_start()) {
        return fail(std::string("unexpected '") + text_[pos_] + "'");
      }
    }
    for (const auto& rule : rules_) {
      if (!rule.defined) return fail_at(rule.first_use, "undefined rule '" + rule.name + "'");
    }
    auto root = names_.find("root");
    if (root == names_.end()) return Error{ErrorCode::kInvalidArgument, "grammar has no `root` rule"};
    TESSERA_TRY(check_left_recursion(rules_));
    return flatten_rules(rules_, byte_sets_, root->second);
  }

 private:
  bool at_end() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  bool consume(std::string_view s) {
    if (text_.substr(pos_, s.size()) != s) return false;
    pos_ += s.size();
    return true;
  }

  void skip_space() {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string read_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  // True at `name ::=` (the next rule begins).
  bool at_rule_start() {
    const size_t save = pos_;
    const std::string name = read_name();
    skip_space();
    const bool yes = !name.empty() && text_.substr(pos_, 3) == "::=";
    pos_ = save;
    return yes;
  }

  Error fail_at(size_t offset, const std::string& what) {
    int line = 1, col = 1;
    for (size_t i = 0; i < offset && i < text_.size(); ++i) {
      if (text_[i] == '\n') ++line, col = 1;
      else ++col;
    }
    return Error{ErrorCode::kInvalidArgument,
                 "grammar: " + what + " at line " + std::to_string(line) + ", column " +
                     std::to_string(col)};
  }
  Error fail(const std::string& what) { return fail_at(pos_, what); }
  void set_error(const std::string& what) {
    if (!error_) error_ = fail(what);
  }

  int32_t rule_id(const std::string& name, size_t use) {
    auto [it, inserted] = names_.emplace(name, static_cast<int32_t>(rules_.size()));
    if (inserted) rules_.push_back({name, {}, false, use});
    return it->second;
  }
  int32_t helper_rule(const std::string& base, std::vector<Seq> alts) {
    std::string name;
    do {
      name = base + "_" + std::to_string(++helper_count_);
    } while (names_.count(name));
    const int32_t id = rule_id(name, pos_);
    rules_[id].defined = true;
    rules_[id].alts = std::move(alts);
    return id;
  }

  int32_t byte_set_id(const ByteSet& set) {
    auto [it, inserted] = byte_set_ids_.emplace(set.bits, static_cast<int32_t>(byte_sets_.size()));
    if (inserted) byte_sets_.push_back(set);
    return it->second;
  }
  Item single_byte(uint8_t b) {
    ByteSet set;
    set.set(b);
    return {Element::kBytes, byte_set_id(set)};
  }

  std::vector<Seq> parse_alternatives(const std::string& owner) {
    std::vector<Seq> alts;
    if (++depth_ > 200) {
      set_error("groups nested too deeply");
      return alts;
    }
    alts.push_back(parse_sequence(owner));
    while (!error_) {
      skip_space();
      if (peek() != '|') break;
      ++pos_;
      alts.push_back(parse_sequence(owner));
    }
    --depth_;
    return alts;
  }

  Seq parse_sequence(const std::string& owner) {
    Seq seq;
    while (!error_) {
      skip_space();
      const char c = peek();
      if (at_end() || c == '|' || c == ')') break;
      if (is_name_char(c) && at_rule_start()) break;
      Seq primary = parse_primary(owner);
      if (error_) break;
      skip_space();
      const char op = peek();
      if (op == '*' || op == '+' || op == '?' || op == '{') {
        Item x = primary.size() == 1 ? primary[0]
                                     : Item{Element::kRule, helper_rule(owner, {primary})};
        primary = parse_repetition(owner, x);
      }
      seq.insert(seq.end(), primary.begin(), primary.end());
      if (total_items_ += primary.size(); total_items_ > kMaxGrammarPositions) {
        set_error("grammar too large");
      }
    }
    return seq;
  }

  Item star(const std::string& owner, Item x) {
    const int32_t id = helper_rule(owner, {});
    rules_[id].alts = {{x, Item{Element::kRule, id}}, {}};
    return {Element::kRule, id};
  }

  Seq parse_repetition(const std::string& owner, Item x) {
    const char op = peek();
    ++pos_;
    if (op == '*') return {star(owner, x)};
    if (op == '+') return {x, star(owner, x)};
    if (op == '?') return {Item{Element::kRule, helper_rule(owner, {{x}, {}})}};
    // {m}, {m,}, {m,n}
    skip_space();
    auto read_int = [&]() -> std::optional<int64_t> {
      size_t start = pos_;
      int64_t v = 0;
      while (!at_end() && peek() >= '0' && peek() <= '9') {
        v = std::min<int64_t>(v * 10 + (peek() - '0'), int64_t{kMaxRepeat} + 1);
        ++pos_;
      }
      if (pos_ == start) return std::nullopt;
      return v;
    };
    auto m = read_int();
    if (!m) return set_error("expected a number in {m,n}"), Seq{};
    std::optional<int64_t> n = m;
    skip_space();
    if (peek() == ',') {
      ++pos_;
      skip_space();
      n = read_int();  // nullopt: unbounded
    }
    skip_space();
    if (peek() != '}') return set_error("expected '}' to close {m,n}"), Seq{};
    ++pos_;
    if (*m > kMaxRepeat || (n && *n > kMaxRepeat)) {
      return set_error("repetition count above " + std::to_string(kMaxRepeat)), Seq{};
    }
    if (n && *n < *m) return set_error("{m,n} with n < m"), Seq{};
    Seq out(static_cast<size_t>(*m), x);
    if (!n) {
      out.push_back(star(owner, x));
    } else if (*n > *m) {
      // Nested optionals from the innermost out: O_k ::= x O_{k+1} | "".
      int32_t inner = helper_rule(owner, {{x}, {}});
      for (int64_t k = *m + 1; k < *n; ++k) {
        inner = helper_rule(owner, {{x, Item{Element::kRule, inner}}, {}});
      }
      out.push_back({Element::kRule, inner});
    }
    return out;
  }

  Seq parse_primary(const std::string& owner) {
    const char c = peek();
    if (c == '"' || c == '\'') return parse_literal();
    if (c == '[') return parse_class(owner);
    if (c == '.') {
      ++pos_;
      return class_items(owner, {{0, kMaxCodePoint}});
    }
    if (c == '(') {
      ++pos_;
      auto alts = parse_alternatives(owner);
      skip_space();
      if (error_) return {};
      if (peek() != ')') return set_error("expected ')'"), Seq{};
      ++pos_;
      if (alts.size() == 1) return alts[0];
      return {Item{Element::kRule, helper_rule(owner, std::move(alts))}};
    }
    if (is_name_char(c)) {
      const size_t start = pos_;
      const std::string name = read_name();
      return {Item{Element::kRule, rule_id(name, start)}};
    }
    set_error(std::string("unexpected character '") + c + "'");
    return {};
  }

  // One code point of a literal or class: an escape or a UTF-8 character. -1 on error.
  int32_t read_code_point() {
    if (peek() != '\\') {
      const int32_t cp = decode_utf8(text_, pos_);
      if (cp < 0) set_error("invalid UTF-8 in grammar text");
      return cp;
    }
    ++pos_;
    const char e = peek();
    ++pos_;
    switch (e) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '0': return 0;
      case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/':
        return static_cast<unsigned char>(e);
      case 'x': return read_hex(2);
      case 'u': return read_hex(4);
      case 'U': return read_hex(8);
      default:
        set_error(std::string("unknown escape '\\") + e + "'");
        return -1;
    }
  }
  int32_t read_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char h = peek();
      int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
            : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) return set_error("expected a hex digit"), -1;
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) {
      return set_error("escape is not a Unicode scalar value"), -1;
    }
    return static_cast<int32_t>(v);
  }

  Seq parse_literal() {
    const char quote = peek();
    ++pos_;
    Seq seq;
    std::string bytes;
    while (!error_) {
      if (at_end() || peek() == '\n') return set_error("unterminated string literal"), Seq{};
      if (peek() == quote) {
        ++pos_;
        break;
      }
      const int32_t cp = read_code_point();
      if (cp < 0) return {};
      bytes.clear();
      append_utf8(static_cast<uint32_t>(cp), bytes);
      for (char b : bytes) seq.push_back(single_byte(static_cast<uint8_t>(b)));
    }
    return seq;
  }

  Seq parse_class(const std::string& owner) {
    ++pos_;  // '['
    bool negate = false;
    if (peek() == '^') negate = true, ++pos_;
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    while (!error_) {
      if (at_end()) return set_error("unterminated character class"), Seq{};
      if (peek() == ']') {
        ++pos_;
        break;
      }
      const int32_t lo = read_code_point();
      if (lo < 0) return {};
      int32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        hi = read_code_point();
        if (hi < 0) return {};
        if (hi < lo) return set_error("character range out of order"), Seq{};
      }
      ranges.push_back({static_cast<uint32_t>(lo), static_cast<uint32_t>(hi)});
    }
    if (negate) ranges = complement_ranges(std::move(ranges));
    return class_items(owner, std::move(ranges));
  }

  // A class as one byte set when every code point is ASCII, else a helper rule whose
  // alternatives are the UTF-8 byte-range sequences. An empty class matches nothing.
  Seq class_items(const std::string& owner, std::vector<std::pair<uint32_t, uint32_t>> ranges) {
    const auto seqs = utf8_sequences(std::move(ranges));
    ByteSet ascii;
    std::vector<Seq> alts;
    for (const auto& s : seqs) {
      if (s.size() == 1 && s[0].hi < 0x80) {
        ascii.set_range(s[0].lo, s[0].hi);
        continue;
      }
      Seq alt;
      for (const auto& r : s) {
        ByteSet set;
        set.set_range(r.lo, r.hi);
        alt.push_back({Element::kBytes, byte_set_id(set)});
      }
      alts.push_back(std::move(alt));
    }
    if (alts.empty()) return {Item{Element::kBytes, byte_set_id(ascii)}};
    if (ascii != ByteSet{}) alts.insert(alts.begin(), Seq{Item{Element::kBytes, byte_set_id(ascii)}});
    return {Item{Element::kRule, helper_rule(owner, std::move(alts))}};
  }

  std::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;
  int helper_count_ = 0;
  size_t total_items_ = 0;
  std::optional<Error> error_;
  std::vector<RuleDef> rules_;
  std::map<std::string, int32_t> names_;
  std::vector<ByteSet> byte_sets_;
  std::map<std::array<uint64_t, 4>, int32_t> byte_set_ids_;
};

}  // namespace

Result<Grammar> parse_grammar(std::string_view text) { return Parser(text).run(); }

}  // namespace tessera::grammar
