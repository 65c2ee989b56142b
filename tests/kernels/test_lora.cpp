// kernels/lora.h: lora_apply against its scalar twin (bit for bit, f32 and f16 weights, with and
// without a tail of n_in % 16, rows in any order, 1 or 2 threads, one job or many in one call),
// against the dense merged weight W + scale * B A through the scalar matmul (a different rounding:
// within 1e-5 of the largest output), and batch invariance (a row's result alone = in a batch).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/lora.h"
#include "kernels/matmul.h"
#include "util/fp16.h"
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

// A seeded adapter pair; with half, its values are rounded to f16 and the pair points at f16 bits.
struct Adapter {
  int32_t rank;
  int64_t n_in, n_out;
  float scale;
  bool half = false;
  std::vector<float> a, b, bt;  // [rank][n_in], [n_out][rank], [rank][n_out] (the f16 values, when half)
  std::vector<uint16_t> a16, bt16;
  LoraPair pair() const {
    if (half) return {a16.data(), bt16.data(), DType::F16, rank, n_in, n_out, scale};
    return {a.data(), bt.data(), DType::F32, rank, n_in, n_out, scale};
  }
};

Adapter make_adapter(int32_t rank, int64_t n_in, int64_t n_out, float scale, uint32_t seed, bool half = false) {
  Adapter ad{rank, n_in, n_out, scale, half, randv(static_cast<size_t>(rank * n_in), seed, 0.3f),
             randv(static_cast<size_t>(n_out * rank), seed + 1, 0.3f), {}, {}, {}};
  if (half) {
    for (float& v : ad.a) v = fp16_to_fp32(fp32_to_fp16(v));
    for (float& v : ad.b) v = fp16_to_fp32(fp32_to_fp16(v));
  }
  ad.bt.resize(ad.b.size());
  for (int64_t o = 0; o < n_out; ++o) {
    for (int32_t j = 0; j < rank; ++j) ad.bt[static_cast<size_t>(j * n_out + o)] = ad.b[static_cast<size_t>(o * rank + j)];
  }
  for (float v : ad.a) ad.a16.push_back(fp32_to_fp16(v));
  for (float v : ad.bt) ad.bt16.push_back(fp32_to_fp16(v));
  return ad;
}

// One job through lora_apply.
void apply_one(const LoraPair& p, const float* x, std::span<const int32_t> rows, float* y, ThreadPool& pool) {
  const LoraJob job{&p, x, y, rows};
  lora_apply({&job, 1}, pool);
}

TEST(Lora, FastMatchesRefBitForBit) {
  ThreadPool pool(2);
  for (const bool half : {false, true}) {
    for (const auto& [n_in, n_out, rank] : std::vector<std::tuple<int64_t, int64_t, int32_t>>{
             {576, 192, 8}, {100, 37, 3}, {1536, 576, 16}, {16, 16, 1}, {33, 64, 64}, {896, 4864, 16}}) {
      const Adapter ad = make_adapter(rank, n_in, n_out, 2.0f, 11, half);
      const LoraPair p = ad.pair();
      const int64_t m = 40;
      const std::vector<float> x = randv(static_cast<size_t>(m * n_in), 5);
      const std::vector<float> y0 = randv(static_cast<size_t>(m * n_out), 6);
      const std::vector<int32_t> rows = {39, 0, 7, 8, 9, 21, 3, 30, 31, 32, 33, 34, 35, 36, 1};
      std::vector<float> fast = y0, ref = y0;
      apply_one(p, x.data(), rows, fast.data(), pool);
      lora_apply_ref({&p, x.data(), ref.data(), rows});
      EXPECT_EQ(0, std::memcmp(fast.data(), ref.data(), fast.size() * sizeof(float)))
          << n_in << "x" << n_out << " r" << rank << " half " << half;
      // Rows not in the segment are untouched.
      EXPECT_EQ(fast[static_cast<size_t>(2 * n_out)], y0[static_cast<size_t>(2 * n_out)]);
      EXPECT_NE(fast[static_cast<size_t>(39 * n_out)], y0[static_cast<size_t>(39 * n_out)]);
    }
  }
}

// The f16 pair computes exactly what an f32 pair holding the same (f16-rounded) values computes.
TEST(Lora, HalfPairEqualsF32PairOfTheSameValues) {
  ThreadPool pool(2);
  const Adapter h = make_adapter(16, 896, 896, 2.0f, 31, /*half=*/true);
  const LoraPair p16 = h.pair();
  const LoraPair p32{h.a.data(), h.bt.data(), DType::F32, h.rank, h.n_in, h.n_out, h.scale};
  const std::vector<float> x = randv(static_cast<size_t>(8 * h.n_in), 32);
  std::vector<float> y16(static_cast<size_t>(8 * h.n_out), 0.0f), y32 = y16;
  const std::vector<int32_t> rows = {0, 1, 2, 3, 4, 5, 6, 7};
  apply_one(p16, x.data(), rows, y16.data(), pool);
  apply_one(p32, x.data(), rows, y32.data(), pool);
  EXPECT_EQ(0, std::memcmp(y16.data(), y32.data(), y16.size() * sizeof(float)));
}

// One call with the jobs of a mixed batch (4 adapters' segments x q, k, v, one of them f16) gives
// what each job gives alone through the scalar twin, on 1 and 2 threads.
TEST(Lora, ManyJobsInOneCallMatchEachJobsRef) {
  const int64_t n_in = 576, m = 16;
  const int64_t outs[3] = {576, 192, 192};
  std::vector<Adapter> ads;
  for (int32_t s = 0; s < 4; ++s) {
    for (int32_t t = 0; t < 3; ++t) ads.push_back(make_adapter(8 + 4 * s, n_in, outs[t], 1.0f + s, 100 + 10 * s + t, s == 2));
  }
  std::vector<LoraPair> pairs;
  for (const Adapter& ad : ads) pairs.push_back(ad.pair());
  const std::vector<float> x = randv(static_cast<size_t>(m * n_in), 7);
  // Segments: adapter s owns rows s, s + 4, s + 8, s + 12 (the batch builder groups rows by adapter).
  std::vector<std::vector<int32_t>> rows(4);
  for (int32_t r = 0; r < m; ++r) rows[static_cast<size_t>(r % 4)].push_back(r);
  for (const int threads : {1, 2}) {
    ThreadPool pool(threads);
    std::vector<std::vector<float>> fast, ref;
    for (int32_t t = 0; t < 3; ++t) fast.push_back(randv(static_cast<size_t>(m * outs[t]), 50 + t));
    ref = fast;
    std::vector<LoraJob> jobs;
    for (size_t s = 0; s < 4; ++s) {
      for (size_t t = 0; t < 3; ++t) {
        jobs.push_back({&pairs[s * 3 + t], x.data(), fast[t].data(), rows[s]});
        lora_apply_ref({&pairs[s * 3 + t], x.data(), ref[t].data(), rows[s]});
      }
    }
    lora_apply(jobs, pool);
    for (size_t t = 0; t < 3; ++t) {
      EXPECT_EQ(0, std::memcmp(fast[t].data(), ref[t].data(), fast[t].size() * sizeof(float))) << threads << " " << t;
    }
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
  const LoraPair p = ad.pair();
  apply_one(p, x.data(), rows, y.data(), pool);
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
  // Rank 16 over 576 -> 1536: past the inline threshold, so every batch size splits over the pool.
  for (const bool half : {false, true}) {
    const Adapter ad = make_adapter(16, 576, 1536, 1.5f, 21, half);
    const LoraPair p = ad.pair();
    const int64_t m = 64;
    const std::vector<float> x = randv(static_cast<size_t>(m * ad.n_in), 22);
    std::vector<int32_t> all(m);
    for (int32_t i = 0; i < m; ++i) all[static_cast<size_t>(i)] = i;
    std::vector<float> batch(static_cast<size_t>(m * ad.n_out), 0.0f);
    apply_one(p, x.data(), all, batch.data(), pool2);
    for (ThreadPool* pool : {&pool1, &pool2}) {
      for (int32_t t : {0, 17, 63}) {
        std::vector<float> alone(batch.size(), 0.0f);
        const int32_t row[] = {t};
        apply_one(p, x.data(), row, alone.data(), *pool);
        EXPECT_EQ(0, std::memcmp(alone.data() + t * ad.n_out, batch.data() + t * ad.n_out, ad.n_out * sizeof(float))) << t;
      }
      std::vector<float> three(batch.size(), 0.0f);
      const int32_t rows3[] = {40, 2, 9};
      apply_one(p, x.data(), rows3, three.data(), *pool);
      for (int32_t t : rows3) {
        EXPECT_EQ(0, std::memcmp(three.data() + t * ad.n_out, batch.data() + t * ad.n_out, ad.n_out * sizeof(float))) << t;
      }
    }
    std::vector<float> ref(batch.size(), 0.0f);
    lora_apply_ref({&p, x.data(), ref.data(), all});
    EXPECT_EQ(0, std::memcmp(ref.data(), batch.data(), batch.size() * sizeof(float)));
  }
}

}  // namespace
}  // namespace tessera::kernels
