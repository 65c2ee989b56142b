#include "grammar/number_range.h"

#include <vector>

namespace tessera::grammar {
namespace {

std::string join_alts(const std::vector<std::string>& alts) {
  if (alts.empty()) return "[^\\x00-\\U0010FFFF]";  // nothing
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
  return out + " )";
}

std::string digit_class(char lo, char hi) {
  if (lo == hi) return std::string("\"") + lo + "\"";
  return std::string("[") + lo + "-" + hi + "]";
}

// Digit strings of equal length L with a <= s <= b (leading zeros allowed: these are suffixes).
std::string same_length(const std::string& a, const std::string& b) {
  const size_t n = a.size();
  if (n == 0) return "\"\"";
  if (a == std::string(n, '0') && b == std::string(n, '9')) {
    return n == 1 ? "[0-9]" : "[0-9]{" + std::to_string(n) + "}";
  }
  if (n == 1) return digit_class(a[0], b[0]);
  if (a[0] == b[0]) return std::string("\"") + a[0] + "\" " + same_length(a.substr(1), b.substr(1));
  std::vector<std::string> alts;
  alts.push_back(std::string("\"") + a[0] + "\" " + same_length(a.substr(1), std::string(n - 1, '9')));
  if (a[0] + 1 <= b[0] - 1) {
    alts.push_back(digit_class(static_cast<char>(a[0] + 1), static_cast<char>(b[0] - 1)) + " [0-9]{" +
                   std::to_string(n - 1) + "}");
  }
  alts.push_back(std::string("\"") + b[0] + "\" " + same_length(std::string(n - 1, '0'), b.substr(1)));
  return join_alts(alts);
}

// Non-negative integers in [lo, hi] (hi missing: unbounded), no leading zeros.
std::string natural_range(int64_t lo, std::optional<int64_t> hi) {
  std::vector<std::string> alts;
  std::string a = std::to_string(lo);
  const std::string b = hi ? std::to_string(*hi) : "";
  for (size_t len = a.size(); hi ? len <= b.size() : len == a.size(); ++len) {
    const std::string from = len == a.size() ? a : "1" + std::string(len - 1, '0');
    const std::string to = hi && len == b.size() ? b : std::string(len, '9');
    alts.push_back(same_length(from, to));
  }
  if (!hi) alts.push_back("[1-9] [0-9]{" + std::to_string(a.size()) + ",}");
  return join_alts(alts);
}

}  // namespace

std::string integer_range_expr(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<std::string> alts;
  // Negative part: magnitudes in [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    const int64_t mag_lo = hi && *hi < 0 ? -*hi : 1;
    std::optional<int64_t> mag_hi;
    if (lo) mag_hi = -*lo;
    alts.push_back("\"-\" " + natural_range(mag_lo, mag_hi));
  }
  if (!hi || *hi >= 0) alts.push_back(natural_range(lo && *lo > 0 ? *lo : 0, hi));
  return join_alts(alts);
}

std::string decimal_range_expr(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  const std::string fraction = "( \".\" [0-9]+ )?";
  const std::string zeros = "( \".\" \"0\"+ )?";
  // Magnitudes m with mag_lo <= m <= mag_hi (mag_hi missing: unbounded): integer part in
  // [mag_lo, mag_hi - 1] with any fraction, or exactly mag_hi with a zero fraction.
  auto magnitude = [&](int64_t mag_lo, std::optional<int64_t> mag_hi) {
    std::vector<std::string> alts;
    if (!mag_hi) {
      alts.push_back(natural_range(mag_lo, std::nullopt) + " " + fraction);
    } else {
      if (*mag_hi - 1 >= mag_lo) alts.push_back(natural_range(mag_lo, *mag_hi - 1) + " " + fraction);
      alts.push_back("\"" + std::to_string(*mag_hi) + "\" " + zeros);
    }
    return join_alts(alts);
  };
  std::vector<std::string> alts;
  if (!lo || *lo < 0) {
    // x = -m, m in [max(0, -hi), -lo].
    const int64_t mag_lo = hi && *hi < 0 ? -*hi : 0;
    std::optional<int64_t> mag_hi;
    if (lo) mag_hi = -*lo;
    alts.push_back("\"-\" " + magnitude(mag_lo, mag_hi));
  }
  if (!hi || *hi >= 0) alts.push_back(magnitude(lo && *lo > 0 ? *lo : 0, hi));
  return join_alts(alts);
}

}  // namespace tessera::grammar
