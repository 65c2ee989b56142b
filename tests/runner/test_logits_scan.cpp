// kernels::scan_logits (the one read of each logits row a sampling step makes) on every ISA path,
// against two readable twins: usable against a check written with std::isnan / std::isinf, and
// argmax against sample::argmax_lowest_id (the sampler's greedy token), on every special value at
// every position, on ties (+0 / -0 included) and on lengths around the vector widths.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/ops.h"
#include "sample/sampler.h"
#include "util/cpu_features.h"

namespace {

using tessera::IsaLevel;
using tessera::kernels::LogitsScan;
using tessera::kernels::scan_logits;
using tessera::kernels::scan_logits_ref;

bool usable_twin(const std::vector<float>& row) {
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

struct IsaGuard {
  ~IsaGuard() { tessera::set_isa_level(tessera::detected_isa_level()); }
};

// Every path on `row`: the same answer as the reference and the twins.
void expect_all_paths_agree(const std::vector<float>& row, const char* what) {
  IsaGuard guard;
  const LogitsScan ref = scan_logits_ref(row.data(), static_cast<int64_t>(row.size()));
  ASSERT_EQ(ref.usable, usable_twin(row)) << what;
  if (ref.usable) {
    ASSERT_EQ(ref.argmax, tessera::sample::argmax_lowest_id(row.data(), static_cast<int32_t>(row.size()))) << what;
  }
  for (int l = 0; l <= static_cast<int>(tessera::detected_isa_level()); ++l) {
    tessera::set_isa_level(static_cast<IsaLevel>(l));
    const LogitsScan got = scan_logits(row.data(), static_cast<int64_t>(row.size()));
    EXPECT_EQ(got.usable, ref.usable) << what << ", isa level " << l;
    if (ref.usable) {
      EXPECT_EQ(got.argmax, ref.argmax) << what << ", isa level " << l;
    }
  }
}

TEST(LogitsScan, EverySpecialValueAtEveryPositionOnEveryPath) {
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
  for (size_t len : {1u, 7u, 15u, 16u, 17u, 33u, 47u, 64u, 49152u}) {
    for (float background : {0.5f, -kInf}) {
      for (float special : specials) {
        for (size_t pos : {size_t{0}, len / 2, len - 1}) {
          std::vector<float> row(len, background);
          row[pos] = special;
          expect_all_paths_agree(row, "one special value");
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 9 * 2 * 14 * 3);
}

TEST(LogitsScan, TiesGoToTheFirstPositionOnEveryPath) {
  std::mt19937 rng(11);
  for (size_t len : {5u, 31u, 32u, 100u, 151936u}) {
    for (int trial = 0; trial < 8; ++trial) {
      // Few distinct values, so the maximum repeats at many positions and in many lanes.
      std::uniform_int_distribution<int> value(-3, 3);
      std::vector<float> row(len);
      for (float& x : row) x = 0.25f * static_cast<float>(value(rng));
      expect_all_paths_agree(row, "repeated values");
      for (float& x : row) x = x == 0.75f ? (trial % 2 == 0 ? 0.0f : -0.0f) : std::min(x, 0.0f) - 1.0f;
      row[len - 1] = trial % 2 == 0 ? -0.0f : 0.0f;  // the max is zero, of both signs
      expect_all_paths_agree(row, "signed zeros");
    }
  }
  // Pinned: the first of equal maxima; a NaN anywhere fails; an all -Inf row fails; -Inf beside a
  // finite value passes (a grammar-masked row) and picks the finite one.
  const std::vector<float> ties = {1.0f, 5.0f, -2.0f, 5.0f, 5.0f, 0.0f};
  EXPECT_EQ(scan_logits(ties.data(), 6).argmax, 1);
  std::vector<float> masked(100, -std::numeric_limits<float>::infinity());
  EXPECT_FALSE(scan_logits(masked.data(), 100).usable);
  masked[99] = 2.0f;
  EXPECT_TRUE(scan_logits(masked.data(), 100).usable);
  EXPECT_EQ(scan_logits(masked.data(), 100).argmax, 99);
  masked[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(scan_logits(masked.data(), 100).usable);
}

}  // namespace
