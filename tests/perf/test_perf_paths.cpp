// The fast paths added for single-stream speed keep every bit: ThreadPool::for_chunks runs each
// chunk exactly once however workers join (including jobs closed before a sleeping worker wakes,
// mixed with run() jobs), and matmul_group (shared activation quantization, one dispatch, inline
// below a work threshold) equals one matmul_ref per weight bit for bit, at every ISA level,
// thread count and m.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/test_quant_util.h"
#include "util/cpu_features.h"
#include "util/thread_pool.h"

namespace tessera {
namespace {

TEST(ThreadPoolChunks, EveryChunkRunsExactlyOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 7, 16, 100, 1000}) {
      for (int64_t chunk : {1, 3, 16, 64, 5000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int> calls{0};
        const bool whole = threads == 1 || chunk >= n;  // one call for all of [0, n)
        pool.for_chunks(n, chunk, [&](int64_t b, int64_t e) {
          if (whole) {
            EXPECT_EQ(b, 0);
            EXPECT_EQ(e, n);
          } else {
            EXPECT_EQ(b % chunk, 0);
            EXPECT_TRUE(e == n || e - b == chunk);
          }
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
          calls.fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << " " << chunk;
        EXPECT_EQ(calls.load(), whole ? 1 : (n + chunk - 1) / chunk);
      }
    }
  }
}

// Thousands of tiny jobs, chunk jobs and run() jobs alternating: workers often wake after the
// caller has closed a chunk job; none may run a closed job or miss a run() job.
TEST(ThreadPoolChunks, ManyTinyJobsMixedWithRun) {
  ThreadPool pool(3);
  int64_t total = 0;
  std::atomic<int64_t> sum{0};
  for (int iter = 0; iter < 20000; ++iter) {
    const int64_t n = 1 + iter % 37;
    pool.for_chunks(n, 4, [&](int64_t b, int64_t e) { sum.fetch_add(e - b); });
    total += n;
    if (iter % 7 == 0) {
      std::atomic<int> ran{0};
      pool.run([&](int, int count) {
        EXPECT_EQ(count, 3);
        ran.fetch_add(1);
      });
      ASSERT_EQ(ran.load(), 3);
    }
  }
  EXPECT_EQ(sum.load(), total);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<float> random_x(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = dist(rng);
  return x;
}

// One group of weights with a shared cols: each output of matmul_group equals matmul_ref.
void check_group(const std::vector<DType>& types, const std::vector<int64_t>& rows, int64_t cols) {
  kernels::IsaRestorer restore;
  std::vector<std::vector<uint8_t>> data;
  std::vector<kernels::WeightMatrix> w;
  for (size_t k = 0; k < types.size(); ++k) {
    data.push_back(kernels::random_weights(types[k], rows[k], cols, static_cast<uint32_t>(11 + k)));
  }
  for (size_t k = 0; k < types.size(); ++k) w.push_back(kernels::WeightMatrix::view(types[k], data[k].data(), rows[k], cols));
  for (int64_t m : {1, 3, 9, 40}) {
    const auto x = random_x(m * cols, static_cast<uint32_t>(m + cols));
    std::vector<std::vector<float>> ref;
    for (size_t k = 0; k < w.size(); ++k) {
      ref.emplace_back(static_cast<size_t>(m * rows[k]));
      kernels::matmul_ref(w[k], x.data(), m, ref[k].data());
    }
    for (IsaLevel level : kernels::available_levels()) {
      set_isa_level(level);
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::vector<std::vector<float>> got;
        std::vector<kernels::MatmulOut> outs;
        for (size_t k = 0; k < w.size(); ++k) got.emplace_back(ref[k].size(), -1.0f);
        for (size_t k = 0; k < w.size(); ++k) outs.push_back({&w[k], got[k].data()});
        kernels::matmul_group(outs, x.data(), m, pool);
        for (size_t k = 0; k < w.size(); ++k) {
          EXPECT_TRUE(same_bits(got[k], ref[k])) << dtype_name(types[k]) << " out " << k << " m " << m
                                                  << " threads " << threads << " isa " << static_cast<int>(level);
          // A lone matmul (inline or pooled by size) gives the same bits too.
          std::vector<float> single(ref[k].size(), -1.0f);
          kernels::matmul(w[k], x.data(), m, single.data(), pool);
          EXPECT_TRUE(same_bits(single, ref[k])) << dtype_name(types[k]) << " m " << m;
        }
      }
    }
  }
}

TEST(MatmulGroup, QkvShapesMatchRefBitForBit) {
  // SmolLM2's q/k/v (576 -> 576, 192, 192): above the inline threshold at m >= 1.
  check_group({DType::Q4_1, DType::Q4_1, DType::Q4_1}, {576, 192, 192}, 576);
  check_group({DType::Q8_0, DType::Q8_0}, {1536, 1536}, 576);
}

TEST(MatmulGroup, MixedBlockTypesShareActivations) {
  // Q4_0 / Q4_1 / Q8_0 quantize activations the same way: one shared quantization.
  check_group({DType::Q4_0, DType::Q4_1, DType::Q8_0}, {17, 64, 33}, 96);
}

TEST(MatmulGroup, DifferentFamiliesFallBackPerWeight) {
  check_group({DType::F16, DType::Q4_K, DType::Q8_0}, {16, 31, 5}, 256);
  check_group({DType::F32}, {7}, 32);
}

}  // namespace
}  // namespace tessera
