#include <gtest/gtest.h>

#include <cmath>

#include "util/dtype.h"
#include "util/fp16.h"

namespace tessera {
namespace {

TEST(Fp16, KnownValues) {
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(1e6f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(fp16_to_fp32(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(NAN))));
}

TEST(Fp16, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_fp16(f), h) << h;
  }
}

TEST(Fp16, RoundsToNearestEven) {
  // 1 + 2^-11 lies exactly between 1 and the next half (1 + 2^-10): ties to even -> 1.0.
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
}

TEST(Bf16, RoundTrip) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_fp32(fp32_to_bf16(3.140625f)), 3.140625f);
}

TEST(DType, Geometry) {
  EXPECT_EQ(dtype_block_size(DType::Q4_1), 32);
  EXPECT_EQ(dtype_block_bytes(DType::Q4_1), 20u);
  EXPECT_EQ(dtype_block_bytes(DType::Q8_0), 34u);
  EXPECT_EQ(dtype_block_bytes(DType::Q4_K), 144u);
  EXPECT_EQ(dtype_block_bytes(DType::Q5_K), 176u);
  EXPECT_EQ(dtype_block_bytes(DType::Q6_K), 210u);
  EXPECT_EQ(dtype_row_bytes(DType::Q4_0, 576), 18u * 18u);
  EXPECT_EQ(dtype_from_name("q4_1"), DType::Q4_1);
  EXPECT_FALSE(dtype_traits(99).has_value());
}

}  // namespace
}  // namespace tessera
