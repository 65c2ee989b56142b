// Decimal numbers within integer bounds, as grammar expressions (JSON Schema minimum/maximum).
// Digits are written without leading zeros, as JSON requires.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace tessera::grammar {

// Integers n with lo <= n <= hi (a missing bound is unbounded); |bounds| < 1e18.
std::string integer_range_expr(std::optional<int64_t> lo, std::optional<int64_t> hi);
// Decimals x (an integer part and an optional fraction, no exponent) with lo <= x <= hi.
std::string decimal_range_expr(std::optional<int64_t> lo, std::optional<int64_t> hi);

}  // namespace tessera::grammar
