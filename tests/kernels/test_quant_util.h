// Test helpers shared by the quant and matmul tests: random weights of any type, nmse, ISA levels.
#pragma once
#include <cstring>
#include <random>
#include <vector>

#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "util/cpu_features.h"
#include "util/fp16.h"

namespace tessera::kernels {

inline constexpr DType kAllWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0,
                                            DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                                            DType::Q4_K, DType::Q5_K, DType::Q6_K};

// Restores the detected ISA level when a test ends.
struct IsaRestorer {
  ~IsaRestorer() { set_isa_level(detected_isa_level()); }
};

inline std::vector<IsaLevel> available_levels() {
  std::vector<IsaLevel> out;
  for (int l = 0; l <= static_cast<int>(detected_isa_level()); ++l) out.push_back(static_cast<IsaLevel>(l));
  return out;
}

// nmse = mse(a, b) / mse(b, 0).
inline double nmse(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return den == 0.0 ? num : num / den;
}

// rows x cols weights of `type`: simple types quantized from U(-1, 1); K-quants random bytes with
// their fp16 super-scales set to small sane values (every bit pattern of the rest is valid).
inline std::vector<uint8_t> random_weights(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(dtype_row_bytes(type, cols) * static_cast<size_t>(rows));
  if (type == DType::Q4_K || type == DType::Q5_K || type == DType::Q6_K) {
    for (uint8_t& b : out) b = static_cast<uint8_t>(rng() & 0xFF);
    std::uniform_real_distribution<float> scale(0.001f, 0.01f);
    const size_t bb = dtype_block_bytes(type);
    for (size_t off = 0; off < out.size(); off += bb) {
      const uint16_t d = fp32_to_fp16(scale(rng)), dmin = fp32_to_fp16(scale(rng));
      if (type == DType::Q6_K) {
        std::memcpy(&out[off + offsetof(BlockQ6_K, d)], &d, 2);
      } else {
        std::memcpy(&out[off], &d, 2);
        std::memcpy(&out[off + 2], &dmin, 2);
      }
    }
    return out;
  }
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(cols));
  const size_t rb = dtype_row_bytes(type, cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = dist(rng);
    quantize_row_ref(type, row.data(), out.data() + static_cast<size_t>(r) * rb, cols);
  }
  return out;
}

}  // namespace tessera::kernels
