// Hand-written pre-tokenizer regexes (see pre_tokenizer.h for the expressions). The matchers
// follow the regex alternatives in order; each works on codepoints of one piece [begin, end).
#include "tokenizer/pre_tokenizer.h"

#include <functional>

#include "tokenizer/unicode.h"

namespace tessera::tokenizer {
namespace {

// Codepoints of the text and the byte offset where each starts (offsets has one extra entry).
struct Codepoints {
  std::vector<uint32_t> cps;      // [num_cps]
  std::vector<uint32_t> offsets;  // [num_cps + 1] byte offsets into the text
};

// Cursor over one piece: codepoints past `end` read as kOutOfRange with no flags.
struct Piece {
  const Codepoints& text;
  size_t begin;  // first codepoint index
  size_t end;    // one past the last codepoint index
  uint32_t cp(size_t i) const { return i < end ? text.cps[i] : kOutOfRange; }
  uint32_t flags(size_t i) const { return i < end ? codepoint_flags(text.cps[i]) : 0; }
};

using Boundaries = std::vector<size_t>;  // piece end indices, increasing

bool is_contraction_letter(uint32_t c) { return c == 's' || c == 't' || c == 'm' || c == 'd'; }

// Length of a contraction ('s 't 're 've 'm 'll 'd) at pos, or 0.
size_t match_contraction(const Piece& p, size_t pos, bool ignore_case) {
  if (p.cp(pos) != '\'' || pos + 1 >= p.end) return 0;
  auto lower = [&](uint32_t c) { return ignore_case && c >= 'A' && c <= 'Z' ? c + 32 : c; };
  const uint32_t c1 = lower(p.cp(pos + 1));
  if (is_contraction_letter(c1)) return 2;
  if (pos + 2 >= p.end) return 0;
  const uint32_t c2 = lower(p.cp(pos + 2));
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  return 0;
}

constexpr uint32_t kLnw = kCpLetter | kCpNumber | kCpWhitespace;

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
void split_gpt2(const Piece& p, Boundaries& out) {
  size_t pos = p.begin;
  while (pos < p.end) {
    const uint32_t cp = p.cp(pos);
    if (size_t n = match_contraction(p, pos, false)) {
      pos += n;
      out.push_back(pos);
      continue;
    }
    const uint32_t f2 = cp == ' ' ? p.flags(pos + 1) : p.flags(pos);
    if (f2 & kCpLetter) {
      pos += cp == ' ';
      while (p.flags(pos) & kCpLetter) ++pos;
    } else if (f2 & kCpNumber) {
      pos += cp == ' ';
      while (p.flags(pos) & kCpNumber) ++pos;
    } else if (!(f2 & kLnw) && f2 != 0) {
      pos += cp == ' ';
      for (uint32_t f = p.flags(pos); !(f & kLnw) && f != 0; f = p.flags(pos)) ++pos;
    } else {
      size_t num_ws = 0;
      while (p.flags(pos + num_ws) & kCpWhitespace) ++num_ws;
      if (num_ws > 1 && p.cp(pos + num_ws) != kOutOfRange) {
        pos += num_ws - 1;  // \s+(?!\S): leave the last space to the next word
      } else if (num_ws > 0) {
        pos += num_ws;
      } else {
        ++pos;  // nothing matched (e.g. an unassigned codepoint): a piece of its own
      }
    }
    out.push_back(pos);
  }
}

// The Llama-3 expression; max_digits is 3 (llama3) or 1 (qwen2).
void split_llama3(const Piece& p, size_t max_digits, Boundaries& out) {
  size_t pos = p.begin;
  auto is_cr_lf = [](uint32_t c) { return c == '\r' || c == '\n'; };
  while (pos < p.end) {
    const uint32_t cp = p.cp(pos);
    const uint32_t flags = p.flags(pos);
    if (size_t n = match_contraction(p, pos, true)) {
      pos += n;
      out.push_back(pos);
      continue;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!is_cr_lf(cp) && !(flags & kCpNumber) &&
        ((flags & kCpLetter) || (p.flags(pos + 1) & kCpLetter))) {
      ++pos;
      while (p.flags(pos) & kCpLetter) ++pos;
      out.push_back(pos);
      continue;
    }
    // \p{N}{1,max_digits}
    if (flags & kCpNumber) {
      size_t start = pos;
      while (p.flags(pos) & kCpNumber) {
        if (++pos - start >= max_digits) {
          out.push_back(pos);
          start = pos;
        }
      }
      if (pos != start) out.push_back(pos);
      continue;
    }
    // ?[^\s\p{L}\p{N}]+[\r\n]*
    const uint32_t f2 = cp == ' ' ? p.flags(pos + 1) : flags;
    if (!(f2 & kLnw) && flags != 0) {
      pos += cp == ' ';
      for (uint32_t f = p.flags(pos); !(f & kLnw) && f != 0; f = p.flags(pos)) ++pos;
      while (is_cr_lf(p.cp(pos))) ++pos;
      out.push_back(pos);
      continue;
    }
    size_t num_ws = 0;
    size_t last_cr_lf_end = 0;
    while (p.flags(pos + num_ws) & kCpWhitespace) {
      if (is_cr_lf(p.cp(pos + num_ws))) last_cr_lf_end = pos + num_ws + 1;
      ++num_ws;
    }
    if (last_cr_lf_end > 0) {
      pos = last_cr_lf_end;  // \s*[\r\n]+
    } else if (num_ws > 1 && p.cp(pos + num_ws) != kOutOfRange) {
      pos += num_ws - 1;  // \s+(?!\S)
    } else if (num_ws > 0) {
      pos += num_ws;  // \s+
    } else {
      ++pos;
    }
    out.push_back(pos);
  }
}

// Splits a piece into runs of codepoints matching `in_class` and the text between them; with
// run_len > 0, a matched run is cut into chunks of exactly run_len (the rest stays unmatched).
void split_class_runs(const Piece& p, const std::function<bool(uint32_t)>& in_class,
                      size_t run_len, Boundaries& out) {
  size_t pos = p.begin;
  size_t piece_start = p.begin;
  auto flush = [&](size_t at) {
    if (at > piece_start) out.push_back(at);
    piece_start = at;
  };
  while (pos < p.end) {
    if (!in_class(p.cp(pos))) {
      ++pos;
      continue;
    }
    size_t run_end = pos;
    while (run_end < p.end && in_class(p.cp(run_end))) ++run_end;
    if (run_len == 0) {
      flush(pos);
      flush(run_end);
    } else {
      while (run_end - pos >= run_len) {
        flush(pos);
        flush(pos + run_len);
        pos += run_len;
      }
    }
    pos = run_end;
  }
  flush(p.end);
}

using Stage = std::function<void(const Piece&, Boundaries&)>;

std::vector<Stage> stages_for(PreTokenizerType type) {
  const Stage gpt2 = split_gpt2;
  switch (type) {
    case PreTokenizerType::kGpt2:
      return {gpt2};
    case PreTokenizerType::kStarcoder:
      return {[](const Piece& p, Boundaries& out) {
                split_class_runs(p, [](uint32_t c) { return is_number(c); }, 1, out);
              },
              gpt2};
    case PreTokenizerType::kLlama3:
      return {[](const Piece& p, Boundaries& out) { split_llama3(p, 3, out); }};
    case PreTokenizerType::kQwen2:
      return {[](const Piece& p, Boundaries& out) { split_llama3(p, 1, out); }};
    case PreTokenizerType::kDefault:
      return {[](const Piece& p, Boundaries& out) {
                split_class_runs(p, [](uint32_t c) {
                  return (codepoint_flags(c) & kCpPunctuation) || c == '$' || c == '+' ||
                         c == '<' || c == '=' || c == '>' || c == '^' || c == '~' || c == '|';
                }, 0, out);
              },
              gpt2,
              [](const Piece& p, Boundaries& out) {
                split_class_runs(p, [](uint32_t c) { return is_number(c); }, 0, out);
              },
              [](const Piece& p, Boundaries& out) {
                split_class_runs(p, [](uint32_t c) { return c >= '0' && c <= '9'; }, 3, out);
              }};
  }
  return {gpt2};
}

}  // namespace

Result<PreTokenizerType> pre_tokenizer_from_name(std::string_view name) {
  if (name == "default") return PreTokenizerType::kDefault;
  if (name == "gpt2" || name == "gpt-2") return PreTokenizerType::kGpt2;
  if (name == "smollm" || name == "starcoder") return PreTokenizerType::kStarcoder;
  if (name == "llama3" || name == "llama-v3" || name == "llama-bpe") return PreTokenizerType::kLlama3;
  if (name == "qwen2") return PreTokenizerType::kQwen2;
  return make_error(ErrorCode::kUnsupported,
                    "unknown pre-tokenizer tokenizer.ggml.pre = '{}' (supported: default, gpt2, "
                    "gpt-2, smollm, starcoder, llama3, llama-v3, llama-bpe, qwen2)",
                    name);
}

std::string_view pre_tokenizer_name(PreTokenizerType type) {
  switch (type) {
    case PreTokenizerType::kDefault: return "default";
    case PreTokenizerType::kGpt2: return "gpt2";
    case PreTokenizerType::kStarcoder: return "starcoder";
    case PreTokenizerType::kLlama3: return "llama3";
    case PreTokenizerType::kQwen2: return "qwen2";
  }
  return "?";
}

void pre_tokenize(PreTokenizerType type, std::string_view text,
                  std::vector<std::string_view>& words) {
  if (text.empty()) return;
  Codepoints cps;
  cps.cps.reserve(text.size());
  cps.offsets.reserve(text.size() + 1);
  size_t byte_pos = 0;
  while (byte_pos < text.size()) {
    cps.offsets.push_back(static_cast<uint32_t>(byte_pos));
    cps.cps.push_back(decode_utf8_at(text, byte_pos));
  }
  cps.offsets.push_back(static_cast<uint32_t>(text.size()));

  Boundaries bounds = {cps.cps.size()};
  Boundaries next;
  for (const Stage& stage : stages_for(type)) {
    next.clear();
    size_t begin = 0;
    for (size_t end : bounds) {
      stage(Piece{cps, begin, end}, next);
      begin = end;
    }
    bounds.swap(next);
  }
  size_t begin = 0;
  for (size_t end : bounds) {
    const size_t b = cps.offsets[begin], e = cps.offsets[end];
    words.push_back(text.substr(b, e - b));
    begin = end;
  }
}

}  // namespace tessera::tokenizer
