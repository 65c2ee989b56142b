#include "grammar/utf8_ranges.h"

#include <algorithm>

namespace tessera::grammar {
namespace {

using Range = std::pair<uint32_t, uint32_t>;

std::vector<Range> normalize(std::vector<Range> ranges) {
  std::vector<Range> out;
  for (auto& r : ranges) {
    if (r.first > r.second) std::swap(r.first, r.second);
    r.second = std::min(r.second, kMaxCodePoint);
  }
  std::sort(ranges.begin(), ranges.end());
  for (const auto& r : ranges) {
    if (r.first > kMaxCodePoint) continue;
    if (!out.empty() && r.first <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, r.second);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

int encoded_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void encode(uint32_t cp, uint8_t* bytes) {
  const int n = encoded_length(cp);
  if (n == 1) {
    bytes[0] = static_cast<uint8_t>(cp);
    return;
  }
  for (int i = n - 1; i > 0; --i) {
    bytes[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    cp >>= 6;
  }
  static constexpr uint8_t kLead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
  bytes[0] = static_cast<uint8_t>(kLead[n] | cp);
}

// Splits [lo, hi] (no surrogates inside) until each piece is a product of byte ranges: pieces
// share their encoded length, and below the first differing byte every byte spans 80-BF.
void split(uint32_t lo, uint32_t hi, std::vector<Utf8Sequence>& out) {
  static constexpr uint32_t kLengthEnd[3] = {0x7F, 0x7FF, 0xFFFF};
  for (uint32_t end : kLengthEnd) {
    if (lo <= end && hi > end) {
      split(lo, end, out);
      split(end + 1, hi, out);
      return;
    }
  }
  for (int i = 1; i < 4; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;  // the low i continuation bytes
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  encode(lo, a);
  encode(hi, b);
  Utf8Sequence seq;
  for (int i = 0; i < encoded_length(lo); ++i) seq.push_back({a[i], b[i]});
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<Range> complement_ranges(std::vector<Range> ranges) {
  std::vector<Range> out;
  uint32_t next = 0;
  for (const auto& r : normalize(std::move(ranges))) {
    if (r.first > next) out.push_back({next, r.first - 1});
    next = r.second + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

std::vector<Utf8Sequence> utf8_sequences(std::vector<Range> ranges) {
  std::vector<Utf8Sequence> out;
  for (const auto& r : normalize(std::move(ranges))) {
    // Cut the surrogate block out.
    if (r.second < 0xD800 || r.first > 0xDFFF) {
      split(r.first, r.second, out);
      continue;
    }
    if (r.first < 0xD800) split(r.first, 0xD7FF, out);
    if (r.second > 0xDFFF) split(0xE000, r.second, out);
  }
  return out;
}

int32_t decode_utf8(std::string_view text, size_t& pos) {
  if (pos >= text.size()) return -1;
  const auto b0 = static_cast<uint8_t>(text[pos]);
  int n = 0;
  uint32_t cp = 0;
  if (b0 < 0x80) {
    ++pos;
    return b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    n = 2, cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, cp = b0 & 0x07;
  } else {
    return -1;
  }
  if (pos + n > text.size()) return -1;
  for (int i = 1; i < n; ++i) {
    const auto b = static_cast<uint8_t>(text[pos + i]);
    if ((b & 0xC0) != 0x80) return -1;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (encoded_length(cp) != n || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
  pos += n;
  return static_cast<int32_t>(cp);
}

}  // namespace tessera::grammar
