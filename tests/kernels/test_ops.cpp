// kernels/ops.h: every fast op against its _ref twin at each ISA level, plus hand-computed values.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <cstring>
#include <random>
#include <vector>

#include "isa_skip.h"
#include "kernels/ops.h"
#include "util/cpu_features.h"

namespace tessera::kernels {
namespace {

// Relative error budgets of the fast paths against the scalar references.
constexpr float kMaxRelErrRmsnorm = 1e-5f;
constexpr float kMaxRelErrExpOps = 2e-6f;  // swiglu and softmax (polynomial exp)
constexpr float kMaxAbsErrRope = 0.0f;     // same cos/sin table: bit-exact

std::vector<float> random_vec(int64_t n, uint32_t seed, float lo = -3.0f, float hi = 3.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<IsaLevel> levels() {
  std::vector<IsaLevel> out;
  for (int l = 0; l <= static_cast<int>(detected_isa_level()); ++l) out.push_back(static_cast<IsaLevel>(l));
  return out;
}

struct IsaGuard {
  ~IsaGuard() { set_isa_level(detected_isa_level()); }
};

float max_rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) {
    const float denom = std::max(1e-6f, std::fabs(b[i]));
    worst = std::max(worst, std::fabs(a[i] - b[i]) / denom);
  }
  return worst;
}

TEST(Ops, RmsnormKnownValues) {
  const std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f};
  const std::vector<float> w = {1.0f, 1.0f, 2.0f, 0.5f};
  std::vector<float> out(4);
  rmsnorm_ref(x.data(), w.data(), 0.0f, out.data(), 4);
  const float inv = 1.0f / std::sqrt(7.5f);  // mean of squares = 30 / 4
  EXPECT_FLOAT_EQ(out[0], 1.0f * inv);
  EXPECT_FLOAT_EQ(out[2], 6.0f * inv);
  EXPECT_FLOAT_EQ(out[3], 2.0f * inv);
}

TEST(Ops, FastMatchesRef) {
  IsaGuard guard;
  for (IsaLevel level : levels()) {
    set_isa_level(level);
    SCOPED_TRACE(std::string(isa_name(level)));
    for (int64_t n : {1, 7, 8, 33, 576, 1537}) {
      const auto x = random_vec(n * 3, 1), w = random_vec(n, 2), up = random_vec(n, 3);
      std::vector<float> a(x.size()), b(x.size());
      rmsnorm(x.data(), w.data(), 1e-5f, a.data(), n, 3);
      rmsnorm_ref(x.data(), w.data(), 1e-5f, b.data(), n, 3);
      EXPECT_LE(max_rel_err(a, b), kMaxRelErrRmsnorm) << "rmsnorm n=" << n;

      std::vector<float> sa(n), sb(n);
      swiglu(x.data(), up.data(), sa.data(), n);
      swiglu_ref(x.data(), up.data(), sb.data(), n);
      EXPECT_LE(max_rel_err(sa, sb), kMaxRelErrExpOps) << "swiglu n=" << n;

      std::vector<float> ma(x.begin(), x.begin() + n), mb = ma;
      softmax(ma.data(), n);
      softmax_ref(mb.data(), n);
      EXPECT_LE(max_rel_err(ma, mb), kMaxRelErrExpOps) << "softmax n=" << n;

      std::vector<float> aa(x.begin(), x.begin() + n), ab = aa;
      add_inplace(aa.data(), up.data(), n);
      add_inplace_ref(ab.data(), up.data(), n);
      EXPECT_EQ(aa, ab);
      scale(aa.data(), 0.37f, n);
      scale_ref(ab.data(), 0.37f, n);
      EXPECT_EQ(aa, ab);
      EXPECT_EQ(scan_logits(x.data(), n).argmax, scan_logits_ref(x.data(), n).argmax);
    }
  }
}

// The AVX-512 swiglu gives the AVX2 path's bits (the same exp operations on 16 lanes; 8-15 left
// over take a half-masked chunk and the scalar tail what AVX2's does), so a model's outputs do not
// depend on which of the two a host runs. Inputs cover exp's clamped range and both tails.
TEST(Ops, SwigluAvx512MatchesAvx2BitForBit) {
  if (detected_isa_level() < IsaLevel::kAvx512) TESSERA_SKIP_ISA_ABSENT("AVX-512");
  IsaGuard guard;
  for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 23, 24, 31, 40, 4864, 8960}) {
    const auto g = random_vec(n, static_cast<uint32_t>(n + 11), -100.0f, 100.0f);
    const auto u = random_vec(n, static_cast<uint32_t>(n + 12));
    std::vector<float> y512(static_cast<size_t>(n)), y256(static_cast<size_t>(n));
    set_isa_level(IsaLevel::kAvx512);
    swiglu(g.data(), u.data(), y512.data(), n);
    set_isa_level(IsaLevel::kAvx2);
    swiglu(g.data(), u.data(), y256.data(), n);
    EXPECT_EQ(0, std::memcmp(y512.data(), y256.data(), y512.size() * sizeof(float))) << "n=" << n;
  }
}

// The KV cache's f16 conversion: every fast path gives fp32_to_fp16's bits, over normal,
// subnormal-half, rounding-tie, overflowing and special inputs (a NaN anywhere in a vector too).
TEST(Ops, Fp32ToFp16RowMatchesScalarBitForBit) {
  IsaGuard guard;
  std::vector<float> x;
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 4000; ++i) x.push_back(std::bit_cast<float>(bits(rng)));  // every exponent
  for (float v : {0.0f, -0.0f, 1.0f, 65504.0f, 65520.0f, 65519.99f, 1e-8f, -6.1e-5f, 5.96e-8f, 2.98e-8f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), std::bit_cast<float>(0x7f812345u)}) {
    x.push_back(v);
  }
  for (uint32_t m = 0; m < 64; ++m) x.push_back(std::bit_cast<float>(0x3f801000u + (m << 13)));  // ties
  for (IsaLevel level : levels()) {
    set_isa_level(level);
    for (size_t n : {x.size(), size_t{7}, size_t{64}}) {
      std::vector<uint16_t> fast(n), ref(n);
      fp32_to_fp16_row(x.data(), fast.data(), static_cast<int64_t>(n));
      fp32_to_fp16_row_ref(x.data(), ref.data(), static_cast<int64_t>(n));
      EXPECT_EQ(fast, ref) << isa_name(level) << " n=" << n;
    }
  }
}

TEST(Ops, SoftmaxKnownValuesAndLargeInputs) {
  std::vector<float> x = {0.0f, std::log(3.0f), 1000.0f - 1000.0f};
  softmax(x.data(), 3);
  EXPECT_NEAR(x[0], 0.2f, 1e-6f);
  EXPECT_NEAR(x[1], 0.6f, 1e-6f);
  std::vector<float> big = {1000.0f, 1000.0f};
  softmax(big.data(), 2);
  EXPECT_FLOAT_EQ(big[0], 0.5f);
}

TEST(Ops, SwigluKnownValues) {
  const float g[2] = {0.0f, 2.0f}, u[2] = {5.0f, 3.0f};
  float out[2];
  swiglu_ref(g, u, out, 2);
  EXPECT_FLOAT_EQ(out[0], 0.0f);
  EXPECT_FLOAT_EQ(out[1], 2.0f / (1.0f + std::exp(-2.0f)) * 3.0f);
}

TEST(Ops, RopeNormalKnownValues) {
  // head_dim 4: pairs (0,1) with theta = pos, (2,3) with theta = pos * base^(-1/2).
  std::vector<float> x = {1.0f, 0.0f, 1.0f, 0.0f};
  const int32_t pos[1] = {2};
  RopeParams p;
  p.layout = RopeLayout::kNormal;
  p.freq_base = 100.0f;
  rope_ref(x.data(), 1, 1, 4, pos, p);
  EXPECT_NEAR(x[0], std::cos(2.0), 1e-6);
  EXPECT_NEAR(x[1], std::sin(2.0), 1e-6);
  EXPECT_NEAR(x[2], std::cos(0.2), 1e-6);
  EXPECT_NEAR(x[3], std::sin(0.2), 1e-6);
}

TEST(Ops, RopeNeoxKnownValues) {
  // head_dim 4 neox: pairs (0,2) with theta = pos, (1,3) with theta = pos * base^(-1/2).
  std::vector<float> x = {1.0f, 1.0f, 0.0f, 0.0f};
  const int32_t pos[1] = {3};
  RopeParams p;
  p.layout = RopeLayout::kNeox;
  p.freq_base = 100.0f;
  p.freq_scale = 0.5f;  // theta halves
  rope_ref(x.data(), 1, 1, 4, pos, p);
  EXPECT_NEAR(x[0], std::cos(1.5), 1e-6);
  EXPECT_NEAR(x[2], std::sin(1.5), 1e-6);
  EXPECT_NEAR(x[1], std::cos(0.15), 1e-6);
  EXPECT_NEAR(x[3], std::sin(0.15), 1e-6);
}

TEST(Ops, RopeFastMatchesRef) {
  for (RopeLayout layout : {RopeLayout::kNormal, RopeLayout::kNeox}) {
    const int64_t tokens = 5, heads = 3, dim = 64;
    const auto x = random_vec(tokens * heads * dim, 7);
    const int32_t pos[5] = {0, 1, 17, 4095, 3};
    RopeParams p;
    p.layout = layout;
    p.freq_base = 10000.0f;
    std::vector<float> a = x, b = x;
    rope(a.data(), tokens, heads, dim, pos, p);
    rope_ref(b.data(), tokens, heads, dim, pos, p);
    float worst = 0.0f;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
    EXPECT_LE(worst, kMaxAbsErrRope);
    EXPECT_NE(a, x);
    // The forward computes the factors once per batch (rope_table) and rotates every layer's q
    // and k with them: the same bits as rope().
    std::vector<float> table(static_cast<size_t>(tokens * dim)), c = x;
    rope_table(pos, tokens, dim, p, table.data());
    rope_with_table(c.data(), tokens, heads, dim, layout, table.data());
    EXPECT_EQ(std::memcmp(a.data(), c.data(), a.size() * sizeof(float)), 0);
  }
}

}  // namespace
}  // namespace tessera::kernels
