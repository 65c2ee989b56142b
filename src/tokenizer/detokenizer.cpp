// Incremental UTF-8-safe detokenization (see detokenizer.h).
#include "tokenizer/detokenizer.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace tessera::tokenizer {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Number of leading bytes of `s` that are a valid but truncated UTF-8 prefix (0 when the start is
// not such a prefix). s must not start with a complete valid sequence.
size_t incomplete_prefix_len(std::string_view s) {
  const auto b0 = static_cast<uint8_t>(s[0]);
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() >= need) return 0;  // long enough, so it is invalid, not incomplete
  for (size_t i = 1; i < s.size(); ++i) {
    const auto b = static_cast<uint8_t>(s[i]);
    const uint8_t l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
    if (b < l || b > h) return 0;
  }
  return s.size();
}

// Length of the maximal invalid subpart at the start of s (at least 1 byte).
size_t invalid_subpart_len(std::string_view s) {
  // The longest prefix that could start a valid sequence, cut where it went wrong.
  for (size_t len = std::min<size_t>(s.size(), 3); len > 1; --len) {
    if (incomplete_prefix_len(s.substr(0, len)) == len) return len;
  }
  return 1;
}

}  // namespace

size_t append_complete_utf8(std::string_view bytes, std::string& out) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    const std::string_view rest = bytes.substr(pos);
    const size_t len = valid_utf8_prefix_len(rest);
    if (len > 0) {
      out.append(rest.substr(0, len));
      pos += len;
      continue;
    }
    if (incomplete_prefix_len(rest) == rest.size()) return rest.size();  // wait for more bytes
    out.append(kReplacement);
    pos += invalid_subpart_len(rest);
  }
  return 0;
}

std::string IncrementalDetokenizer::feed(int32_t id) {
  std::string piece = tokenizer_.token_to_piece(id, render_special_);
  if (!seen_text_ && id == tokenizer_.bos_id()) {
    // BOS before any text: decode() renders it the same way.
  } else {
    if (!seen_text_ && tokenizer_.strips_leading_space() && piece.starts_with(' ')) {
      piece.erase(0, 1);
    }
    seen_text_ = true;
  }
  pending_ += piece;
  std::string out;
  const size_t held = append_complete_utf8(pending_, out);
  pending_.erase(0, pending_.size() - held);
  return out;
}

std::string IncrementalDetokenizer::flush() {
  std::string out;
  if (!pending_.empty()) out.append(kReplacement);
  pending_.clear();
  return out;
}

}  // namespace tessera::tokenizer
