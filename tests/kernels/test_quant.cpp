// kernels/quant.h: hand-built blocks with hand-computed values, fast dequantize vs reference (bit
// for bit) at every ISA level, and quantize -> dequantize round trips within per-type budgets.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "kernels/test_quant_util.h"
#include "util/cpu_features.h"
#include "util/fp16.h"

namespace tessera::kernels {
namespace {

// Round-trip budgets: nmse = mse(dequant(quant(x)), x) / mse(x, 0) for x ~ U(-1, 1).
constexpr double kMaxRoundTripNmseF32 = 0.0;
constexpr double kMaxRoundTripNmseF16 = 1e-7;
constexpr double kMaxRoundTripNmseBF16 = 1e-5;
constexpr double kMaxRoundTripNmseQ8_0 = 2e-5;
constexpr double kMaxRoundTripNmseQ4_0 = 6e-3;
constexpr double kMaxRoundTripNmseQ4_1 = 6e-3;
constexpr double kMaxRoundTripNmseQ5_0 = 1.5e-3;
constexpr double kMaxRoundTripNmseQ5_1 = 1.2e-3;

TEST(Quant, Q4_0KnownBlock) {
  BlockQ4_0 b{};
  b.d = fp32_to_fp16(0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  dequantize_row_ref(DType::Q4_0, &b, y, 32);
  EXPECT_EQ(y[0], -4.0f);    // (0 - 8) * 0.5
  EXPECT_EQ(y[8], 0.0f);     // (8 - 8) * 0.5
  EXPECT_EQ(y[15], 3.5f);    // (15 - 8) * 0.5
  EXPECT_EQ(y[16], 3.5f);    // high nibble of byte 0 = 15
  EXPECT_EQ(y[31], -4.0f);   // high nibble of byte 15 = 0
}

TEST(Quant, Q4_1KnownBlock) {
  BlockQ4_1 b{};
  b.d = fp32_to_fp16(0.25f);
  b.m = fp32_to_fp16(-1.0f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(3 | (12 << 4));
  float y[32];
  dequantize_row_ref(DType::Q4_1, &b, y, 32);
  EXPECT_EQ(y[0], -0.25f);   // 3 * 0.25 - 1
  EXPECT_EQ(y[20], 2.0f);    // 12 * 0.25 - 1
}

TEST(Quant, Q8_0KnownBlock) {
  BlockQ8_0 b{};
  b.d = fp32_to_fp16(0.125f);
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j - 16);
  float y[32];
  dequantize_row_ref(DType::Q8_0, &b, y, 32);
  EXPECT_EQ(y[0], -2.0f);
  EXPECT_EQ(y[16], 0.0f);
  EXPECT_EQ(y[31], 1.875f);
  // A block that reaches |q| = 127 survives quantize(dequantize(.)) unchanged.
  b.qs[5] = -127;
  dequantize_row_ref(DType::Q8_0, &b, y, 32);
  BlockQ8_0 again{};
  quantize_row_ref(DType::Q8_0, y, &again, 32);
  EXPECT_EQ(std::memcmp(&again.qs, &b.qs, 32), 0);
  EXPECT_EQ(again.d, b.d);
}

TEST(Quant, Q4_0QuantizeRoundsLikeGgml) {
  // max |x| = -4 at j = 0 -> d = -4 / -8 = 0.5, id = 2; q = trunc(x * 2 + 8.5), capped at 15.
  float x[32] = {};
  x[0] = -4.0f;
  x[1] = 0.26f;   // 0.52 + 8.5 = 9.02 -> 9
  x[2] = 3.9f;    // 7.8 + 8.5 = 16.3 -> 15
  BlockQ4_0 b{};
  quantize_row_ref(DType::Q4_0, x, &b, 32);
  EXPECT_EQ(fp16_to_fp32(b.d), 0.5f);
  EXPECT_EQ(b.qs[0] & 0xF, 0);
  EXPECT_EQ(b.qs[1] & 0xF, 9);
  EXPECT_EQ(b.qs[2] & 0xF, 15);
  EXPECT_EQ(b.qs[3] & 0xF, 8);
}

TEST(Quant, FastDequantizeMatchesRefBitForBit) {
  IsaRestorer restore;
  const int64_t n = 768;  // 3 super-blocks, 24 small blocks
  for (DType type : kAllWeightTypes) {
    const std::vector<uint8_t> data = random_weights(type, 4, n, 11);
    std::vector<float> ref(n * 4), fast(n * 4);
    dequantize_row_ref(type, data.data(), ref.data(), n * 4);
    for (IsaLevel level : available_levels()) {
      set_isa_level(level);
      dequantize_row(type, data.data(), fast.data(), n * 4);
      EXPECT_EQ(0, std::memcmp(ref.data(), fast.data(), ref.size() * 4))
          << dtype_name(type) << " " << isa_name(level);
    }
  }
}

TEST(Quant, RoundTripWithinBudget) {
  const int64_t n = 4096;
  std::vector<float> x(n);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : x) v = dist(rng);
  const std::pair<DType, double> budgets[] = {
      {DType::F32, kMaxRoundTripNmseF32},   {DType::F16, kMaxRoundTripNmseF16},
      {DType::BF16, kMaxRoundTripNmseBF16}, {DType::Q8_0, kMaxRoundTripNmseQ8_0},
      {DType::Q4_0, kMaxRoundTripNmseQ4_0}, {DType::Q4_1, kMaxRoundTripNmseQ4_1},
      {DType::Q5_0, kMaxRoundTripNmseQ5_0}, {DType::Q5_1, kMaxRoundTripNmseQ5_1}};
  for (const auto& [type, budget] : budgets) {
    std::vector<uint8_t> q(dtype_row_bytes(type, n));
    std::vector<float> back(n);
    quantize_row_ref(type, x.data(), q.data(), n);
    dequantize_row(type, q.data(), back.data(), n);
    const double e = nmse(back, x);
    EXPECT_LE(e, budget) << dtype_name(type);
    RecordProperty(std::string(dtype_name(type)), std::to_string(e));
  }
}

TEST(Quant, SupportTables) {
  for (DType type : kAllWeightTypes) EXPECT_TRUE(dtype_supported_for_matmul(type));
  EXPECT_FALSE(dtype_supported_for_matmul(DType::Q2_K));
  EXPECT_TRUE(dtype_supported_for_quantize(DType::Q5_1));
  EXPECT_FALSE(dtype_supported_for_quantize(DType::Q4_K));
}

}  // namespace
}  // namespace tessera::kernels
