#include "util/byte_size.h"

#include <cctype>
#include <cmath>
#include <string>

namespace tessera {
namespace {

struct Unit {
  std::string_view name;
  double scale;  // bytes per unit
};

constexpr double kKi = 1024.0;
constexpr Unit kUnits[] = {
    {"", 1.0},   {"b", 1.0},
    {"k", kKi},  {"kib", kKi},  {"kb", 1e3},
    {"m", kKi * kKi},  {"mib", kKi * kKi},  {"mb", 1e6},
    {"g", kKi * kKi * kKi},  {"gib", kKi * kKi * kKi},  {"gb", 1e9},
    {"t", kKi * kKi * kKi * kKi},  {"tib", kKi * kKi * kKi * kKi},  {"tb", 1e12},
};

}  // namespace

Result<int64_t> parse_byte_size(std::string_view text) {
  // The number: digits with at most one '.', at least one digit (no sign, no exponent: "1e9" would
  // read as 1 with an unknown unit "e9", so it is refused rather than misread).
  size_t i = 0, digits = 0, dots = 0;
  for (; i < text.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(text[i]))) {
      ++digits;
    } else if (text[i] == '.' && dots == 0) {
      ++dots;
    } else {
      break;
    }
  }
  if (digits == 0) {
    return make_error(ErrorCode::kInvalidArgument, "'{}' is not a size (e.g. 512MiB, 2GiB, 80GB)", text);
  }
  const double value = std::stod(std::string(text.substr(0, i)));
  while (i < text.size() && text[i] == ' ') ++i;
  std::string unit;
  for (; i < text.size(); ++i) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
  for (const Unit& u : kUnits) {
    if (unit != u.name) continue;
    const double bytes = value * u.scale;
    if (!(bytes <= 4.611686018427388e18)) {  // 2^62: far beyond any memory, and safe in int64
      return make_error(ErrorCode::kInvalidArgument, "size '{}' is out of range", text);
    }
    return static_cast<int64_t>(std::llround(bytes));
  }
  return make_error(ErrorCode::kInvalidArgument,
                    "unknown size unit in '{}' (use B, KiB/MiB/GiB/TiB = powers of 2, KB/MB/GB/TB = "
                    "powers of 10, K/M/G/T = powers of 2)",
                    text);
}

}  // namespace tessera
