// Code point ranges -> UTF-8 byte-range sequences, so a character class over Unicode becomes a
// few alternatives of byte sets. E.g. [U+0080, U+07FF] -> [C2-DF][80-BF].
// Surrogates (U+D800..U+DFFF) are never produced: they have no valid UTF-8 encoding.
#pragma once
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::grammar {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

struct ByteRange {
  uint8_t lo = 0, hi = 0;
};
using Utf8Sequence = std::vector<ByteRange>;  // 1 to 4 byte ranges, matched one after another

// Inclusive ranges [lo, hi], any order, overlaps allowed. Returns the byte sequences whose union
// is exactly the UTF-8 encodings of the code points covered.
std::vector<Utf8Sequence> utf8_sequences(std::vector<std::pair<uint32_t, uint32_t>> ranges);

// Sorted, merged complement of ranges within [0, kMaxCodePoint].
std::vector<std::pair<uint32_t, uint32_t>> complement_ranges(
    std::vector<std::pair<uint32_t, uint32_t>> ranges);

// Decodes one UTF-8 code point at text[pos]; advances pos. Returns -1 (pos unchanged) on
// invalid, overlong or truncated input and on surrogates.
int32_t decode_utf8(std::string_view text, size_t& pos);

}  // namespace tessera::grammar
