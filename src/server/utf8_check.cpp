// is_valid_utf8 (protocol.h): the strict UTF-8 check every request body passes before JSON parsing,
// so a bad byte gets an error with its offset instead of a parser message.
// Rejects overlong forms, surrogates (U+D800..U+DFFF), code points past U+10FFFF and truncated
// sequences, as RFC 3629 does.
#include <cstdint>
#include <string_view>

#include "server/protocol.h"

namespace tessera::server {

bool is_valid_utf8(std::string_view s, size_t* bad_offset) {
  size_t i = 0;
  const size_t n = s.size();
  auto fail = [&](size_t at) {
    if (bad_offset != nullptr) *bad_offset = at;
    return false;
  };
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len = 0;
    uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; }
    else return fail(i);
    if (i + len > n) return fail(i);
    for (int k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return fail(i);
      cp = (cp << 6) | (cc & 0x3F);
    }
    const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return fail(i);
    i += len;
  }
  return true;
}

}  // namespace tessera::server
