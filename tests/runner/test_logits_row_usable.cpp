// logits_row_usable (the bit-pattern check every decode step runs on each logits row) against its
// readable twin written with std::isnan / std::isinf, on every special value at every position.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "runner/model_runner.h"

namespace {

bool usable_ref(const std::vector<float>& row) {
  bool any_finite = false;
  for (float x : row) {
    if (std::isnan(x) || (std::isinf(x) && x > 0)) return false;
    any_finite |= std::isfinite(x);
  }
  return any_finite;
}

float from_bits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

TEST(LogitsRowUsable, MatchesTheIsnanIsinfTwinOnEverySpecialValue) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const std::vector<float> specials = {
      0.0f, -0.0f, 1.5f, -3.25f, std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
      std::numeric_limits<float>::denorm_min(), kInf, -kInf, std::numeric_limits<float>::quiet_NaN(),
      from_bits(0x7f800001u),  // signalling NaN, smallest payload
      from_bits(0xff800001u),  // negative NaN
      from_bits(0xffffffffu),  // negative NaN, all payload bits
      from_bits(0x7f7fffffu),  // largest finite
  };
  int checked = 0;
  for (size_t len : {1u, 7u, 33u, 49152u}) {
    for (float background : {0.5f, -kInf}) {
      for (float special : specials) {
        for (size_t pos : {size_t{0}, len / 2, len - 1}) {
          std::vector<float> row(len, background);
          row[pos] = special;
          EXPECT_EQ(tessera::logits_row_usable(row.data(), row.size()), usable_ref(row))
              << "len " << len << " background " << background << " special bits at " << pos;
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 4 * 2 * 14 * 3);
  // The cases that matter, pinned: one NaN anywhere fails; an all -Inf row fails; -Inf beside a
  // finite value passes (a grammar-masked row).
  std::vector<float> masked(100, -kInf);
  EXPECT_FALSE(tessera::logits_row_usable(masked.data(), masked.size()));
  masked[99] = 2.0f;
  EXPECT_TRUE(tessera::logits_row_usable(masked.data(), masked.size()));
  masked[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(tessera::logits_row_usable(masked.data(), masked.size()));
}

}  // namespace
