// kernels/matmul.h: fast vs scalar twin (bit for bit, every type and ISA level, awkward shapes),
// against plain f32 dequantize-then-dot (per-family budgets), and batch invariance: a row of y has
// the same bits whatever m, the other rows of x, and the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/test_quant_util.h"
#include "kernels/quant_blocks.h"
#include "util/cpu_features.h"
#include "util/fp16.h"
#include "util/thread_pool.h"

namespace tessera::kernels {
namespace {

// nmse of matmul against f32 dequantize-then-dot with x ~ U(-1, 1): only the 8-bit activation
// quantization separates them (none for float weights: only the summation order).
constexpr double kMaxMatmulNmseFloat = 1e-10;
constexpr double kMaxMatmulNmseBlock32 = 1e-4;
constexpr double kMaxMatmulNmseKQuant = 1e-4;

std::vector<float> random_x(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = dist(rng);
  return x;
}

bool is_kquant(DType t) { return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K; }

std::vector<int64_t> test_cols(DType t) {
  if (is_kquant(t)) return {256, 768};
  return {32, 96, 576, 1536};
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

TEST(Matmul, FastMatchesRefBitForBit) {
  IsaRestorer restore;
  ThreadPool pool(2);
  for (DType type : kAllWeightTypes) {
    for (int64_t cols : test_cols(type)) {
      for (int64_t rows : {1, 3, 17, 255}) {
        const auto data = random_weights(type, rows, cols, static_cast<uint32_t>(rows * 7 + cols));
        const WeightMatrix w = WeightMatrix::view(type, data.data(), rows, cols);
        for (int64_t m : {1, 2, 5, 16, 33}) {
          const auto x = random_x(m * cols, static_cast<uint32_t>(m));
          std::vector<float> ref(static_cast<size_t>(m * rows)), fast(ref.size());
          matmul_ref(w, x.data(), m, ref.data());
          for (IsaLevel level : available_levels()) {
            set_isa_level(level);
            std::fill(fast.begin(), fast.end(), NAN);
            matmul(w, x.data(), m, fast.data(), pool);
            EXPECT_TRUE(same_bits(ref, fast)) << dtype_name(type) << " rows=" << rows
                                              << " cols=" << cols << " m=" << m << " "
                                              << isa_name(level);
          }
        }
      }
    }
  }
}

// The register-blocked m > 1 kernel against the scalar twin and against the row-at-a-time tiled
// kernel it replaces, on the shapes that hit its edges: an odd block count (cols 96, 1056: a last
// single block), cols past kGemmMaxCols (1056: the tiled kernel), weight rows not a multiple of the
// 16-row chunk, m not a multiple of the 16-row tile (8, 4, 2, 1-row tiles), m past the 32-row panel.
TEST(Matmul, RegisterBlockedMatchesRefAndTiledBitForBit) {
  IsaRestorer restore;
  ThreadPool pool(2);
  const DType types[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0};
  for (DType type : types) {
    for (int64_t cols : {32, 96, 576, 1056}) {
      for (int64_t rows : {1, 19, 35}) {
        const auto data = random_weights(type, rows, cols, static_cast<uint32_t>(rows * 5 + cols));
        const WeightMatrix w = WeightMatrix::view(type, data.data(), rows, cols);
        for (int64_t m : {2, 9, 15, 16, 33, 131}) {
          const auto x = random_x(m * cols, static_cast<uint32_t>(m * 3 + 1));
          std::vector<float> ref(static_cast<size_t>(m * rows)), gemm(ref.size()), tiled(ref.size());
          matmul_ref(w, x.data(), m, ref.data());
          for (IsaLevel level : available_levels()) {
            set_isa_level(level);
            std::fill(gemm.begin(), gemm.end(), NAN);
            std::fill(tiled.begin(), tiled.end(), NAN);
            matmul(w, x.data(), m, gemm.data(), pool);
            set_matmul_gemm_enabled(false);
            matmul(w, x.data(), m, tiled.data(), pool);
            set_matmul_gemm_enabled(true);
            EXPECT_TRUE(same_bits(ref, gemm)) << dtype_name(type) << " rows=" << rows << " cols="
                                              << cols << " m=" << m << " " << isa_name(level);
            EXPECT_TRUE(same_bits(ref, tiled)) << dtype_name(type) << " rows=" << rows << " cols="
                                               << cols << " m=" << m << " " << isa_name(level);
          }
        }
      }
    }
  }
}

TEST(Matmul, FloatWeightsWithOddColumnCount) {
  ThreadPool pool(1);
  const int64_t rows = 5, cols = 24;  // not a multiple of 16: the fast path defers to the twin
  const auto data = random_weights(DType::F32, rows, cols, 3);
  const WeightMatrix w = WeightMatrix::view(DType::F32, data.data(), rows, cols);
  const auto x = random_x(2 * cols, 4);
  std::vector<float> ref(2 * rows), fast(2 * rows);
  matmul_ref(w, x.data(), 2, ref.data());
  matmul(w, x.data(), 2, fast.data(), pool);
  EXPECT_TRUE(same_bits(ref, fast));
}

TEST(Matmul, CloseToDequantizedF32Dot) {
  ThreadPool pool(2);
  for (DType type : kAllWeightTypes) {
    const int64_t rows = 64, cols = is_kquant(type) ? 768 : 576, m = 3;
    const auto data = random_weights(type, rows, cols, 21);
    const WeightMatrix w = WeightMatrix::view(type, data.data(), rows, cols);
    const auto x = random_x(m * cols, 22);
    std::vector<float> y(m * rows), expect(m * rows), wrow(cols);
    matmul(w, x.data(), m, y.data(), pool);
    for (int64_t r = 0; r < rows; ++r) {
      w.dequantize_row(r, wrow.data());
      for (int64_t i = 0; i < m; ++i) {
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) s += static_cast<double>(wrow[c]) * x[i * cols + c];
        expect[i * rows + r] = static_cast<float>(s);
      }
    }
    const double budget = type == DType::F32 || type == DType::F16 || type == DType::BF16
                              ? kMaxMatmulNmseFloat
                              : (is_kquant(type) ? kMaxMatmulNmseKQuant : kMaxMatmulNmseBlock32);
    const double e = nmse(y, expect);
    EXPECT_LE(e, budget) << dtype_name(type);
    EXPECT_GT(e, 0.0 - 1.0);  // nmse is finite
  }
}

TEST(Matmul, BatchInvariance) {
  const DType types[] = {DType::Q4_1, DType::Q8_0, DType::Q4_0, DType::Q5_1, DType::F16, DType::Q4_K};
  ThreadPool pool1(1), pool2(2), pool3(3);
  ThreadPool* pools[] = {&pool1, &pool2, &pool3};
  for (DType type : types) {
    const int64_t rows = 77, cols = is_kquant(type) ? 512 : 576;
    const auto data = random_weights(type, rows, cols, 31);
    const WeightMatrix w = WeightMatrix::view(type, data.data(), rows, cols);
    const auto x_alone = random_x(cols, 99);
    // Reference: m = 1, one thread.
    std::vector<float> y_alone(rows);
    matmul(w, x_alone.data(), 1, y_alone.data(), pool1);
    for (int64_t m : {1, 7, 33}) {
      for (int64_t slot : {int64_t{0}, m / 2, m - 1}) {
        auto x = random_x(m * cols, static_cast<uint32_t>(m * 13 + slot));
        std::copy(x_alone.begin(), x_alone.end(), x.begin() + slot * cols);
        for (ThreadPool* pool : pools) {
          std::vector<float> y(m * rows);
          matmul(w, x.data(), m, y.data(), *pool);
          const std::vector<float> row(y.begin() + slot * rows, y.begin() + (slot + 1) * rows);
          EXPECT_TRUE(same_bits(row, y_alone)) << dtype_name(type) << " m=" << m << " slot=" << slot
                                               << " threads=" << pool->num_threads();
        }
      }
    }
  }
}

TEST(Matmul, KnownValuesQ8_0) {
  // Hand-built W: row r is one block with q = r + 1 everywhere and d = 0.5; x = ones, so
  // y[r] = 32 * (r + 1) * 0.5 (x quantizes to q = 127 with d = 1/127).
  BlockQ8_0 blocks[2];
  for (int r = 0; r < 2; ++r) {
    blocks[r].d = fp32_to_fp16(0.5f);
    for (int c = 0; c < 32; ++c) blocks[r].qs[c] = static_cast<int8_t>(r + 1);
  }
  std::vector<uint8_t> data(sizeof(blocks));
  std::memcpy(data.data(), blocks, sizeof(blocks));
  const WeightMatrix w = WeightMatrix::view(DType::Q8_0, data.data(), 2, 32);
  const std::vector<float> x(32, 1.0f);
  std::vector<float> y(2);
  ThreadPool pool(1);
  matmul(w, x.data(), 1, y.data(), pool);
  EXPECT_FLOAT_EQ(y[0], 16.0f);
  EXPECT_FLOAT_EQ(y[1], 32.0f);
  EXPECT_EQ(w.bytes(), 2u * 34u);
}

}  // namespace
}  // namespace tessera::kernels
