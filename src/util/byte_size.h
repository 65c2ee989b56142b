// Byte sizes as users type them on the command line (`tessera serve --kv-cache`, `tessera kv-plan
// --memory/--weights`): one parser, one meaning.
//
//   <number>[unit], number decimal (fractions allowed: "1.5GiB"), unit case-insensitive, an optional
//   space between them:
//     ""  "b"                 bytes
//     "kib" "mib" "gib" "tib" powers of 2  (1 KiB = 1,024 bytes; 1 GiB = 1,073,741,824)
//     "kb"  "mb"  "gb"  "tb"  powers of 10 (1 kB = 1,000 bytes; 1 GB = 1,000,000,000), as vLLM and
//                             disk vendors mean them
//     "k"   "m"   "g"   "t"   powers of 2, as in `free -g`, docker `-m 512m` and java `-Xmx2g`
// The result is rounded to the nearest byte. Negative, NaN, empty, unknown units and sizes over
// 2^62 bytes are errors.
#pragma once
#include <cstdint>
#include <string_view>

#include "util/status.h"

namespace tessera {

Result<int64_t> parse_byte_size(std::string_view text);

}  // namespace tessera
