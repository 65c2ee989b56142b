// kernels/matmul.h: fast vs scalar twin (bit for bit, every type and ISA level, awkward shapes),
// against plain f32 dequantize-then-dot (per-family budgets), and batch invariance: a row of y has
// the same bits whatever m, the other rows of x, and the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/matmul_pack.h"
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
        WeightMatrix packed = w;
        packed.pack();  // 32-block types: the packed AVX2 / AVX-512 / AMX kernels
        for (int64_t m : {1, 2, 5, 16, 33}) {
          const auto x = random_x(m * cols, static_cast<uint32_t>(m));
          std::vector<float> ref(static_cast<size_t>(m * rows)), fast(ref.size());
          matmul_ref(w, x.data(), m, ref.data());
          for (IsaLevel level : available_levels()) {
            set_isa_level(level);
            for (const WeightMatrix* weights : {&w, static_cast<const WeightMatrix*>(&packed)}) {
              std::fill(fast.begin(), fast.end(), NAN);
              matmul(*weights, x.data(), m, fast.data(), pool);
              EXPECT_TRUE(same_bits(ref, fast)) << dtype_name(type) << " rows=" << rows
                                                << " cols=" << cols << " m=" << m << " "
                                                << isa_name(level) << (weights == &packed ? " packed" : "");
            }
          }
        }
      }
    }
  }
}

// The packed kernels (matmul_pack.h: AVX2, AVX-512 VNNI, AMX) against the scalar twin and the
// AVX2 kernel on the GGUF layout, on the shapes that hit their edges: an odd block count (cols 96,
// 1056), weight rows not a multiple of the 16-row group (a zero-padded last group, masked stores),
// m not a multiple of the 8-row (AVX-512) or 4-row (AVX2) tile (tails of 1 to 7 rows, one tile
// each), and row ranges that start and end inside a group or one of its 8-row halves (matmul_group
// splits the fused rows of outputs of 19 and 35 rows across the pool's chunks).
// K-quants (AVX-512 VNNI only): one super-block, an odd count of them (1280 = 5 x 256) and
// Qwen2.5-0.5B's ffn_down width (4864 = 19 x 256).
TEST(Matmul, PackedMatchesRefAndUnpackedBitForBit) {
  IsaRestorer restore;
  ThreadPool pool(2);
  const DType types[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                         DType::Q4_K, DType::Q5_K, DType::Q6_K};
  for (DType type : types) {
    ASSERT_TRUE(packable(type));
    const std::vector<int64_t> widths =
        is_kquant(type) ? std::vector<int64_t>{256, 1280, 4864} : std::vector<int64_t>{32, 96, 576, 1056};
    for (int64_t cols : widths) {
      const auto d0 = random_weights(type, 19, cols, static_cast<uint32_t>(cols + 1));
      const auto d1 = random_weights(type, 35, cols, static_cast<uint32_t>(cols + 2));
      WeightMatrix w0 = WeightMatrix::view(type, d0.data(), 19, cols);
      WeightMatrix w1 = WeightMatrix::view(type, d1.data(), 35, cols);
      const WeightMatrix unpacked0 = w0, unpacked1 = w1;
      w0.pack();
      w1.pack();
      ASSERT_NE(w0.packed(), nullptr);
      for (int64_t m : {1, 2, 3, 4, 6, 9, 15, 16, 33, 131}) {
        const auto x = random_x(m * cols, static_cast<uint32_t>(m * 3 + 1));
        std::vector<float> ref0(static_cast<size_t>(m * 19)), ref1(static_cast<size_t>(m * 35));
        matmul_ref(unpacked0, x.data(), m, ref0.data());
        matmul_ref(unpacked1, x.data(), m, ref1.data());
        for (IsaLevel level : available_levels()) {
          set_isa_level(level);
          // AMX tiles (m >= amx_min_rows(type) > 0, where usable), the VNNI packed kernel, the GGUF layout.
          for (const char* path : {"amx", "packed", "unpacked"}) {
            const std::string p = path;
            if (p == "amx" && (!matmul_amx_available() || amx_min_rows(type) == 0 || m < amx_min_rows(type))) continue;
            set_matmul_packed_enabled(p != "unpacked");
            set_matmul_amx_enabled(p == "amx");
            std::vector<float> y0(ref0.size(), NAN), y1(ref1.size(), NAN);
            const MatmulOut outs[] = {{&w0, y0.data()}, {&w1, y1.data()}};
            matmul_group(outs, x.data(), m, pool);
            set_matmul_packed_enabled(true);
            set_matmul_amx_enabled(true);
            EXPECT_TRUE(same_bits(ref0, y0) && same_bits(ref1, y1))
                << dtype_name(type) << " cols=" << cols << " m=" << m << " " << isa_name(level) << " " << p;
          }
        }
      }
    }
  }
}

// The layout itself, byte for byte, on one Q4_1 record: lane r of qs vector v holds row r's GGUF
// qs bytes 4v..4v+3, then the 16 d and 16 m fields.
TEST(Matmul, PackedLayoutOfOneQ4_1Record) {
  const int64_t rows = 16, cols = 32;
  std::vector<uint8_t> data(static_cast<size_t>(rows) * 20);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 3);
  ASSERT_EQ(packed_bytes(DType::Q4_1, rows, cols), 320u);
  std::vector<uint8_t> p(320);
  pack_weights(DType::Q4_1, data.data(), rows, cols, p.data());
  for (int v = 0; v < 4; ++v) {
    for (int r = 0; r < 16; ++r) {
      for (int t = 0; t < 4; ++t) EXPECT_EQ(p[64 * v + 4 * r + t], data[20 * r + 4 + 4 * v + t]);
    }
  }
  for (int r = 0; r < 16; ++r) {
    EXPECT_EQ(p[256 + 2 * r], data[20 * r]);          // d, low byte
    EXPECT_EQ(p[256 + 32 + 2 * r + 1], data[20 * r + 3]);  // m, high byte
  }
}

// One Q4_K and one Q6_K record, byte for byte (matmul_pack.h): qs bytes of row r in lane r,
// the sub-block scales and mins unpacked from their 6-bit fields, Q6_K's weights in 6 bits.
TEST(Matmul, PackedLayoutOfKQuantRecords) {
  const auto q4 = random_weights(DType::Q4_K, 16, 256, 5);
  std::vector<uint8_t> p(packed_bytes(DType::Q4_K, 16, 256));
  ASSERT_EQ(p.size(), PackedKLayout<DType::Q4_K>::kBytes);
  pack_weights(DType::Q4_K, q4.data(), 16, 256, p.data());
  using L4 = PackedKLayout<DType::Q4_K>;
  for (int r = 0; r < 16; ++r) {
    const auto* b = reinterpret_cast<const BlockQ4_K*>(q4.data() + 144 * r);
    for (int c = 0; c < 4; ++c) {
      for (int v = 0; v < 8; ++v) {
        for (int t = 0; t < 4; ++t) EXPECT_EQ(p[512 * c + 64 * v + 4 * r + t], b->qs[32 * c + 4 * v + t]);
      }
    }
    for (int j = 0; j < 8; ++j) {
      int sc, mn;
      scale_min_k4(j, b->scales, &sc, &mn);
      EXPECT_EQ(p[L4::kScAt + 16 * j + r], sc);
      EXPECT_EQ(p[L4::kMnAt + 16 * j + r], mn);
    }
    EXPECT_EQ(std::memcmp(&p[L4::kDAt + 2 * r], &b->d, 2), 0);
    EXPECT_EQ(std::memcmp(&p[L4::kDminAt + 2 * r], &b->dmin, 2), 0);
  }
  // Q6_K: dequantize row r and compare value by value: d * sc[j] * (q - 32).
  const auto q6 = random_weights(DType::Q6_K, 16, 256, 6);
  std::vector<uint8_t> p6(packed_bytes(DType::Q6_K, 16, 256));
  ASSERT_EQ(p6.size(), 3392u);  // 3072 weight bytes (6 bits each) + 256 scales + 32 d + 32 padding
  pack_weights(DType::Q6_K, q6.data(), 16, 256, p6.data());
  using L6 = PackedKLayout<DType::Q6_K>;
  std::vector<float> row(256);
  for (int r = 0; r < 16; ++r) {
    dequantize_row(DType::Q6_K, q6.data() + 210 * r, row.data(), 256);
    uint16_t d16;
    std::memcpy(&d16, &p6[L6::kDAt + 2 * r], 2);
    for (int e = 0; e < 256; ++e) {
      // Sub-block j = e / 16, vector k = e % 16 / 4: bits 0-5 of byte (j, k, r, t) for k < 3; vector
      // 3's weight from bits 6-7 of the three bytes (j, 0..2, r, t), low bits first.
      const int j = e / 16, k = e % 16 / 4, t = e % 4;
      const uint8_t* at = &p6[192 * j + 4 * r + t];
      const int q = k < 3 ? (at[64 * k] & 0x3F) : ((at[0] >> 6) | ((at[64] >> 6) << 2) | ((at[128] >> 6) << 4));
      const auto sc = static_cast<int8_t>(p6[L6::kScAt + 16 * (e / 16) + r]);
      EXPECT_EQ(row[e], fp16_to_fp32(d16) * static_cast<float>(sc * (q - 32))) << "row " << r << " element " << e;
    }
  }
}

// Seeded fuzz over shapes: every weight type, rows 1..70 (rarely a multiple of the 16-row group),
// cols any whole number of blocks (32-block types: mostly not a multiple of 256; K-quants: 1..20
// super-blocks), m 1..20, each ISA level, packed and not, through matmul and matmul_group (the
// group's fused row split starts ranges inside groups): bit for bit the scalar twin.
TEST(Matmul, FuzzOddShapesBitForBit) {
  IsaRestorer restore;
  ThreadPool pool(2);
  std::mt19937 rng(2026);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int iter = 0; iter < 48; ++iter) {
    const DType type = kAllWeightTypes[static_cast<size_t>(iter) % std::size(kAllWeightTypes)];
    const int64_t block = dtype_block_size(type) == 1 ? 8 : dtype_block_size(type);  // floats: odd widths too
    const int64_t cols = block * pick(1, is_kquant(type) ? 20 : 40), rows = pick(1, 70), rows2 = pick(1, 40);
    const int64_t m = iter % 3 == 2 ? pick(21, 48) : pick(1, 20);  // past the AMX thresholds too
    const auto d1 = random_weights(type, rows, cols, static_cast<uint32_t>(iter * 2 + 1));
    const auto d2 = random_weights(type, rows2, cols, static_cast<uint32_t>(iter * 2 + 2));
    const WeightMatrix w1 = WeightMatrix::view(type, d1.data(), rows, cols);
    const WeightMatrix w2 = WeightMatrix::view(type, d2.data(), rows2, cols);
    WeightMatrix p1 = w1, p2 = w2;
    p1.pack();
    p2.pack();
    const auto x = random_x(m * cols, static_cast<uint32_t>(iter + 100));
    std::vector<float> ref1(static_cast<size_t>(m * rows)), ref2(static_cast<size_t>(m * rows2));
    matmul_ref(w1, x.data(), m, ref1.data());
    matmul_ref(w2, x.data(), m, ref2.data());
    for (IsaLevel level : available_levels()) {
      set_isa_level(level);
      for (bool packed : {false, true}) {
        const WeightMatrix& a = packed ? p1 : w1;
        const WeightMatrix& b = packed ? p2 : w2;
        std::vector<float> y1(ref1.size(), NAN), y2(ref2.size(), NAN), g1(ref1.size(), NAN);
        matmul(a, x.data(), m, y1.data(), pool);
        const MatmulOut outs[] = {{&b, y2.data()}, {&a, g1.data()}};
        matmul_group(outs, x.data(), m, pool);
        EXPECT_TRUE(same_bits(ref1, y1) && same_bits(ref2, y2) && same_bits(ref1, g1))
            << dtype_name(type) << " rows=" << rows << "/" << rows2 << " cols=" << cols << " m=" << m << " "
            << isa_name(level) << (packed ? " packed" : "");
      }
    }
  }
}

// The K-quant kernels' 16-bit chains at their bounds (x86/matmul_packed_kquant_avx2.cpp: Q6_K's
// chains start at -32 times their activations' sum and reach |32512| when every weight is 0 or 63
// and every activation +-127): weights of all-0x00 or all-0xFF bytes (Q6_K: q = 0 or 63, its
// scales -128 or 127), activations all +1 or all -1 (quantized to +-127) or alternating, m 1, 4
// and 5, each ISA level, packed and not: bit for bit the scalar twin.
TEST(Matmul, KQuantChainBoundsBitForBit) {
  IsaRestorer restore;
  ThreadPool pool(2);
  const int64_t rows = 16, cols = 512;
  for (DType type : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    for (uint8_t fill : {uint8_t{0x00}, uint8_t{0xFF}}) {
      std::vector<uint8_t> d(dtype_row_bytes(type, cols) * rows, fill);
      const uint16_t scale = fp32_to_fp16(0.01f);
      for (size_t off = 0; off < d.size(); off += dtype_block_bytes(type)) {
        if (type == DType::Q6_K) {
          std::memset(&d[off + offsetof(BlockQ6_K, scales)], fill == 0 ? 0x80 : 0x7F, 16);
          std::memcpy(&d[off + offsetof(BlockQ6_K, d)], &scale, 2);
        } else {
          std::memcpy(&d[off], &scale, 2);
          std::memcpy(&d[off + 2], &scale, 2);
        }
      }
      const WeightMatrix w = WeightMatrix::view(type, d.data(), rows, cols);
      WeightMatrix packed = w;
      packed.pack();
      for (int sign : {1, -1, 0}) {  // 0: alternating +1, -1
        for (int64_t m : {1, 4, 5}) {
          std::vector<float> x(static_cast<size_t>(m * cols));
          for (size_t i = 0; i < x.size(); ++i) x[i] = sign != 0 ? static_cast<float>(sign) : (i % 2 ? -1.0f : 1.0f);
          std::vector<float> ref(static_cast<size_t>(m * rows));
          matmul_ref(w, x.data(), m, ref.data());
          for (IsaLevel level : available_levels()) {
            set_isa_level(level);
            for (const WeightMatrix* a : {&w, static_cast<const WeightMatrix*>(&packed)}) {
              std::vector<float> y(ref.size(), NAN);
              matmul(*a, x.data(), m, y.data(), pool);
              EXPECT_TRUE(same_bits(ref, y)) << dtype_name(type) << " fill=" << int{fill} << " sign=" << sign
                                             << " m=" << m << " " << isa_name(level) << (a == &w ? "" : " packed");
            }
          }
        }
      }
    }
  }
}

// A group whose outputs share the activations but differ in type within a family (a Q4_K_M file's
// ffn_down and attn_v mix Q4_K and Q6_K): each output takes its own kernel (Q6_K has no tile
// kernel, Q4_K/Q5_K tiles start at 32 rows), and the bits are the scalar twin's either way round.
TEST(Matmul, GroupOfMixedTypesBitForBit) {
  IsaRestorer restore;
  ThreadPool pool(2);
  const std::pair<DType, DType> pairs[] = {{DType::Q6_K, DType::Q4_K}, {DType::Q4_K, DType::Q6_K},
                                           {DType::Q5_K, DType::Q6_K}, {DType::Q8_0, DType::Q5_0},
                                           {DType::Q5_0, DType::Q4_1}};
  constexpr int64_t kCols = 512, kRows0 = 21, kRows1 = 40;
  for (const auto& [t0, t1] : pairs) {
    const auto d0 = random_weights(t0, kRows0, kCols, 7), d1 = random_weights(t1, kRows1, kCols, 8);
    WeightMatrix w0 = WeightMatrix::view(t0, d0.data(), kRows0, kCols);
    WeightMatrix w1 = WeightMatrix::view(t1, d1.data(), kRows1, kCols);
    const WeightMatrix plain0 = w0, plain1 = w1;
    w0.pack();
    w1.pack();
    for (int64_t m : {16, 33}) {
      const auto x = random_x(m * kCols, static_cast<uint32_t>(m));
      std::vector<float> ref0(static_cast<size_t>(m * kRows0)), ref1(static_cast<size_t>(m * kRows1));
      matmul_ref(plain0, x.data(), m, ref0.data());
      matmul_ref(plain1, x.data(), m, ref1.data());
      for (IsaLevel level : available_levels()) {
        set_isa_level(level);
        std::vector<float> y0(ref0.size(), NAN), y1(ref1.size(), NAN);
        const MatmulOut outs[] = {{&w0, y0.data()}, {&w1, y1.data()}};
        matmul_group(outs, x.data(), m, pool);
        EXPECT_TRUE(same_bits(ref0, y0) && same_bits(ref1, y1))
            << dtype_name(t0) << "+" << dtype_name(t1) << " m=" << m << " " << isa_name(level);
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

// The packed K-quant kernels keep each vpdpbusd chain inside int16 and scale it with vpdpwssd
// (x86/matmul_packed_kquant_avx512.cpp): Q4_K's chain of 16 weights of 15 against x = +-127 sits
// at +-30,480, Q6_K's chain of 8 weights of q - 32 = -32 or 31 at -32,512 / 31,496. Weights and
// activations at those bounds must still give the scalar twin's bits, with the largest scales.
TEST(Matmul, KQuantIntegerChainsAtTheirBounds) {
  IsaRestorer restore;
  ThreadPool pool(2);
  constexpr int64_t kRows = 16, kCols = 512;
  for (DType type : {DType::Q4_K, DType::Q6_K}) {
    std::vector<uint8_t> data(static_cast<size_t>(kRows * (kCols / 256)) * dtype_block_bytes(type));
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t b = 0; b < kCols / 256; ++b) {
        uint8_t* blk = data.data() + static_cast<size_t>(r * (kCols / 256) + b) * dtype_block_bytes(type);
        if (type == DType::Q4_K) {
          BlockQ4_K q{};
          q.d = fp32_to_fp16(1.0f), q.dmin = fp32_to_fp16(r % 3 == 0 ? 0.0f : 0.5f);
          std::memset(q.scales, 0xFF, sizeof(q.scales));          // every 6-bit scale and min 63
          std::memset(q.qs, r % 2 == 0 ? 0xFF : 0x0F, sizeof(q.qs));  // q = 15 (odd rows: 15 and 0)
          std::memcpy(blk, &q, sizeof(q));
        } else {
          BlockQ6_K q{};
          std::memset(q.ql, r % 2 == 0 ? 0x00 : 0xFF, sizeof(q.ql));  // q = 0 (-32) or 63 (31)
          std::memset(q.qh, r % 2 == 0 ? 0x00 : 0xFF, sizeof(q.qh));
          for (int8_t& sc : q.scales) sc = r % 4 < 2 ? -128 : 127;
          q.d = fp32_to_fp16(1.0f);
          std::memcpy(blk, &q, sizeof(q));
        }
      }
    }
    const WeightMatrix plain = WeightMatrix::view(type, data.data(), kRows, kCols);
    WeightMatrix packed = plain;
    packed.pack();
    for (int64_t m : {1, 2, 9, 17}) {  // 17: two full 8-row tiles and a tail
      std::vector<float> x(static_cast<size_t>(m * kCols));
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t c = 0; c < kCols; ++c) x[static_cast<size_t>(i * kCols + c)] = i % 2 == 0 ? 1.0f : -1.0f;
      }
      std::vector<float> ref(static_cast<size_t>(m * kRows));
      matmul_ref(plain, x.data(), m, ref.data());
      for (IsaLevel level : available_levels()) {
        set_isa_level(level);
        std::vector<float> y(ref.size(), NAN);
        matmul(packed, x.data(), m, y.data(), pool);
        EXPECT_TRUE(same_bits(ref, y)) << dtype_name(type) << " m=" << m << " " << isa_name(level);
      }
      // Row 0 by hand: Q4_K, 2 super-blocks of 8 sub-blocks of (63 * 32 * 15 * 127 - 0.0 * mins) / 127.
      // Q6_K row 0: 2 x 16 sub-blocks of -128 * 16 * -32 * 127 / 127.
      const double row0 = type == DType::Q4_K ? 2 * 8 * 63 * 32 * 15 : 2 * 16 * 128 * 16 * 32;
      EXPECT_NEAR(ref[0], row0, 0.5);
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
