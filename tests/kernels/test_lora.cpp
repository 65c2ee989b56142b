// kernels/lora.h: lora_apply against its scalar twin (bit for bit, with and without a tail of
// n_in % 16, rows in any order, 1 or 2 threads), against the dense merged weight W + scale * B A
// through the scalar matmul (a different rounding: within 1e-5 of the largest output), and batch
// invariance (a row's result alone = in a batch).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/lora.h"
#include "kernels/matmul.h"
#include "util/thread_pool.h"

namespace tessera::kernels {
namespace {

std::vector<float> randv(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct Adapter {
  int32_t rank;
  int64_t n_in, n_out;
  float scale;
  std::vector<float> a, b, bt;  // [rank][n_in], [n_out][rank], [rank][n_out]
  LoraPair pair() const { return {a.data(), bt.data(), rank, n_in, n_out, scale}; }
};

Adapter make_adapter(int32_t rank, int64_t n_in, int64_t n_out, float scale, uint32_t seed) {
  Adapter ad{rank, n_in, n_out, scale, randv(static_cast<size_t>(rank * n_in), seed, 0.3f),
             randv(static_cast<size_t>(n_out * rank), seed + 1, 0.3f), {}};
  ad.bt.resize(ad.b.size());
  for (int64_t o = 0; o < n_out; ++o) {
    for (int32_t j = 0; j < rank; ++j) ad.bt[static_cast<size_t>(j * n_out + o)] = ad.b[static_cast<size_t>(o * rank + j)];
  }
  return ad;
}

TEST(Lora, FastMatchesRefBitForBit) {
  ThreadPool pool(2);
  for (const auto& [n_in, n_out, rank] : std::vector<std::tuple<int64_t, int64_t, int32_t>>{
           {576, 192, 8}, {100, 37, 3}, {1536, 576, 16}, {16, 16, 1}, {33, 64, 64}}) {
    const Adapter ad = make_adapter(rank, n_in, n_out, 2.0f, 11);
    const int64_t m = 40;
    const std::vector<float> x = randv(static_cast<size_t>(m * n_in), 5);
    const std::vector<float> y0 = randv(static_cast<size_t>(m * n_out), 6);
    const std::vector<int32_t> rows = {39, 0, 7, 8, 9, 21, 3, 30, 31, 32, 33, 34, 35, 36, 1};
    std::vector<float> fast = y0, ref = y0;
    lora_apply(ad.pair(), x.data(), rows, fast.data(), pool);
    lora_apply_ref(ad.pair(), x.data(), rows, ref.data());
    EXPECT_EQ(0, std::memcmp(fast.data(), ref.data(), fast.size() * sizeof(float))) << n_in << "x" << n_out << " r" << rank;
    // Rows not in the segment are untouched.
    EXPECT_EQ(fast[static_cast<size_t>(2 * n_out)], y0[static_cast<size_t>(2 * n_out)]);
    EXPECT_NE(fast[static_cast<size_t>(39 * n_out)], y0[static_cast<size_t>(39 * n_out)]);
  }
}

TEST(Lora, MatchesDenseMergedWeight) {
  ThreadPool pool(2);
  const int64_t n_in = 576, n_out = 192, m = 5;
  const int32_t rank = 16;
  const float scale = 32.0f / rank;  // alpha 32
  const Adapter ad = make_adapter(rank, n_in, n_out, scale, 3);
  const std::vector<float> w = randv(static_cast<size_t>(n_out * n_in), 4, 0.05f);
  std::vector<float> merged = w;  // W + scale * B A, the readable twin
  for (int64_t o = 0; o < n_out; ++o) {
    for (int64_t c = 0; c < n_in; ++c) {
      double s = 0.0;
      for (int32_t j = 0; j < rank; ++j) s += double{ad.b[static_cast<size_t>(o * rank + j)]} * ad.a[static_cast<size_t>(j * n_in + c)];
      merged[static_cast<size_t>(o * n_in + c)] += static_cast<float>(scale * s);
    }
  }
  const std::vector<float> x = randv(static_cast<size_t>(m * n_in), 9);
  std::vector<float> y(static_cast<size_t>(m * n_out)), dense(y.size());
  matmul(WeightMatrix::view(DType::F32, w.data(), n_out, n_in), x.data(), m, y.data(), pool);
  const std::vector<int32_t> rows = {0, 1, 2, 3, 4};
  lora_apply(ad.pair(), x.data(), rows, y.data(), pool);
  matmul_ref(WeightMatrix::view(DType::F32, merged.data(), n_out, n_in), x.data(), m, dense.data());
  float max_abs = 0.0f, max_diff = 0.0f;
  for (size_t i = 0; i < y.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(dense[i]));
    max_diff = std::max(max_diff, std::fabs(dense[i] - y[i]));
  }
  EXPECT_GT(max_abs, 1.0f);  // the delta is not negligible
  EXPECT_LT(max_diff, 1e-5f * max_abs);
}

TEST(Lora, RowResultIndependentOfBatch) {
  ThreadPool pool1(1), pool2(2);
  // Rank 16 over 576 -> 1536: past the inline threshold, so a batch of 1 to 3 rows takes the split
  // (shrink over (row, j), expand over output ranges) and a larger one the split over rows.
  const Adapter ad = make_adapter(16, 576, 1536, 1.5f, 21);
  const int64_t m = 64;
  const std::vector<float> x = randv(static_cast<size_t>(m * ad.n_in), 22);
  std::vector<int32_t> all(m);
  for (int32_t i = 0; i < m; ++i) all[static_cast<size_t>(i)] = i;
  std::vector<float> batch(static_cast<size_t>(m * ad.n_out), 0.0f);
  lora_apply(ad.pair(), x.data(), all, batch.data(), pool2);
  for (ThreadPool* pool : {&pool1, &pool2}) {
    for (int32_t t : {0, 17, 63}) {
      std::vector<float> alone(batch.size(), 0.0f);
      const int32_t row[] = {t};
      lora_apply(ad.pair(), x.data(), row, alone.data(), *pool);
      EXPECT_EQ(0, std::memcmp(alone.data() + t * ad.n_out, batch.data() + t * ad.n_out, ad.n_out * sizeof(float))) << t;
    }
    std::vector<float> three(batch.size(), 0.0f);
    const int32_t rows3[] = {40, 2, 9};
    lora_apply(ad.pair(), x.data(), rows3, three.data(), *pool);
    for (int32_t t : rows3) {
      EXPECT_EQ(0, std::memcmp(three.data() + t * ad.n_out, batch.data() + t * ad.n_out, ad.n_out * sizeof(float))) << t;
    }
  }
  std::vector<float> ref(batch.size(), 0.0f);
  lora_apply_ref(ad.pair(), x.data(), all, ref.data());
  EXPECT_EQ(0, std::memcmp(ref.data(), batch.data(), batch.size() * sizeof(float)));
}

}  // namespace
}  // namespace tessera::kernels
