// Unicode helpers for the tokenizers: UTF-8 decoding/encoding and the codepoint classes the
// pre-tokenizer regexes use (\p{L}, \p{N}, \p{P}, \s). The class table is generated data
// (unicode_data.cpp, from gen_unicode_data.py); lookups are a binary search over its ranges with
// an ASCII fast path.
// Invariant: decode_utf8 never fails: every byte that does not start a valid, complete, shortest
// form sequence decodes to U+FFFD, consuming exactly one byte.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/utf8.h"

namespace tessera::tokenizer {

// Flag bits of a codepoint.
enum CodepointFlag : uint8_t {
  kCpAssigned = 1,     // general category is not Cn
  kCpLetter = 2,       // \p{L}
  kCpNumber = 4,       // \p{N}
  kCpPunctuation = 8,  // \p{P}
  kCpWhitespace = 16,  // Unicode White_Space (\s)
};

struct CodepointRange {
  uint32_t first;  // first codepoint of the range
  uint32_t last;   // last codepoint (inclusive)
  uint32_t flags;  // CodepointFlag bits shared by the whole range
};
extern const CodepointRange kCodepointRanges[];
extern const size_t kNumCodepointRanges;

constexpr uint32_t kReplacementChar = 0xFFFD;
// Codepoint returned past the end of a piece (no class flags).
constexpr uint32_t kOutOfRange = 0xFFFFFFFF;

uint32_t codepoint_flags(uint32_t cp);
inline bool is_letter(uint32_t cp) { return codepoint_flags(cp) & kCpLetter; }
inline bool is_number(uint32_t cp) { return codepoint_flags(cp) & kCpNumber; }
inline bool is_whitespace(uint32_t cp) { return codepoint_flags(cp) & kCpWhitespace; }

// Length in bytes of the valid UTF-8 sequence at the start of `s`, or 0 if it does not start with
// one (invalid lead byte, bad continuation, overlong, surrogate, > U+10FFFF, truncated).
size_t valid_utf8_prefix_len(std::string_view s);

// Decodes one codepoint at s[pos], advancing pos; invalid bytes give U+FFFD (one byte consumed).
uint32_t decode_utf8_at(std::string_view s, size_t& pos);
std::vector<uint32_t> decode_utf8(std::string_view s);
using ::tessera::append_utf8;  // util/utf8.h

// Byte length a UTF-8 lead byte announces (1 for ASCII and for invalid lead bytes).
inline size_t utf8_len_from_lead(uint8_t lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF8) return 4;
  return 1;
}

}  // namespace tessera::tokenizer
