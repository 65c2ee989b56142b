// UTF-8 coding and codepoint class lookup (see unicode.h).
#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace tessera::tokenizer {
namespace {

std::array<uint8_t, 128> make_ascii_flags() {
  std::array<uint8_t, 128> table{};
  for (uint32_t cp = 0; cp < 128; ++cp) {
    const CodepointRange* end = kCodepointRanges + kNumCodepointRanges;
    const CodepointRange* it = std::upper_bound(
        kCodepointRanges, end, cp, [](uint32_t c, const CodepointRange& r) { return c < r.first; });
    if (it != kCodepointRanges && cp <= (it - 1)->last) table[cp] = (it - 1)->flags;
  }
  return table;
}

}  // namespace

uint32_t codepoint_flags(uint32_t cp) {
  static const std::array<uint8_t, 128> ascii = make_ascii_flags();
  if (cp < 128) return ascii[cp];
  const CodepointRange* end = kCodepointRanges + kNumCodepointRanges;
  const CodepointRange* it = std::upper_bound(
      kCodepointRanges, end, cp, [](uint32_t c, const CodepointRange& r) { return c < r.first; });
  if (it == kCodepointRanges) return 0;
  --it;
  return cp <= it->last ? it->flags : 0;
}

size_t valid_utf8_prefix_len(std::string_view s) {
  if (s.empty()) return 0;
  const auto b0 = static_cast<uint8_t>(s[0]);
  if (b0 < 0x80) return 1;
  size_t len = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;   // overlong
    if (b0 == 0xED) hi = 0x9F;   // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;   // overlong
    if (b0 == 0xF4) hi = 0x8F;   // > U+10FFFF
  } else {
    return 0;
  }
  if (s.size() < len) return 0;
  const auto b1 = static_cast<uint8_t>(s[1]);
  if (b1 < lo || b1 > hi) return 0;
  for (size_t i = 2; i < len; ++i) {
    const auto b = static_cast<uint8_t>(s[i]);
    if (b < 0x80 || b > 0xBF) return 0;
  }
  return len;
}

uint32_t decode_utf8_at(std::string_view s, size_t& pos) {
  const size_t len = valid_utf8_prefix_len(s.substr(pos));
  if (len == 0) {
    ++pos;
    return kReplacementChar;
  }
  const auto* p = reinterpret_cast<const uint8_t*>(s.data() + pos);
  pos += len;
  switch (len) {
    case 1: return p[0];
    case 2: return ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu);
    case 3: return ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    default:
      return ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) |
             (p[3] & 0x3Fu);
  }
}

std::vector<uint32_t> decode_utf8(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) out.push_back(decode_utf8_at(s, pos));
  return out;
}


}  // namespace tessera::tokenizer
