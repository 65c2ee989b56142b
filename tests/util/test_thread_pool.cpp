#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "util/thread_pool.h"

namespace tessera {
namespace {

TEST(ThreadPool, EveryThreadRunsOncePerJob) {
  ThreadPool pool(4);
  for (int job = 0; job < 200; ++job) {
    std::vector<int> hits(4, 0);
    pool.run([&](int index, int count) {
      ASSERT_EQ(count, 4);
      hits[index] += 1;
    });
    ASSERT_EQ(hits, std::vector<int>({1, 1, 1, 1}));
  }
}

TEST(ThreadPool, ParallelForCoversRangeExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t n : {1, 2, 7, 64, 1000, 1001}) {
    for (int64_t grain : {1, 4, 16}) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)].load(), 1) << n;
    }
  }
}

TEST(ThreadPool, ForRangesCoversRangeExactlyOnceInGrainPieces) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 7, 16, 64, 1000, 1001, 49152}) {
      for (int64_t grain : {1, 4, 16}) {
        std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
        std::atomic<bool> misaligned{false};
        pool.for_ranges(n, grain, [&](int64_t b, int64_t e) {
          if (b % grain != 0 || (e % grain != 0 && e != n) || b >= e) misaligned = true;
          for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)]++;
        });
        ASSERT_FALSE(misaligned) << "threads " << threads << " n " << n << " grain " << grain;
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)].load(), 1) << n << " " << grain;
      }
    }
  }
}

// Past 32-bit bounds for_ranges falls back to one chunk per thread: still every item once.
TEST(ThreadPool, ForRangesBeyond32BitsCoversEveryItemOnce) {
  ThreadPool pool(2);
  const int64_t n = (int64_t{1} << 32) + 5;
  std::atomic<int64_t> covered{0};
  std::atomic<int> calls{0};
  pool.for_ranges(n, 16, [&](int64_t b, int64_t e) {
    covered += e - b;
    calls++;
  });
  EXPECT_EQ(covered.load(), n);
  EXPECT_LE(calls.load(), 2);
}

// The caller stalls in its first piece: the worker finishes its own range and then takes the
// caller's tail from the back, so some of the caller's range runs on the worker.
TEST(ThreadPool, ForRangesLetsAnIdleThreadTakeTheOthersTail) {
  ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  constexpr int64_t kN = 64, kGrain = 4;
  bool stolen = false;
  for (int attempt = 0; attempt < 20 && !stolen; ++attempt) {  // the worker may start late
    std::mutex mu;
    std::vector<std::thread::id> ran_on(kN);
    bool first = true;
    pool.for_ranges(kN, kGrain, [&](int64_t b, int64_t e) {
      const auto self = std::this_thread::get_id();
      bool stall = false;
      {
        std::lock_guard<std::mutex> lock(mu);
        for (int64_t i = b; i < e; ++i) ran_on[static_cast<size_t>(i)] = self;
        if (self == caller && first) {
          stall = true;
          first = false;
        }
      }
      if (stall) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    });
    for (int64_t i = 0; i < kN / 2; ++i) stolen = stolen || ran_on[static_cast<size_t>(i)] != caller;
  }
  EXPECT_TRUE(stolen);
}

TEST(ThreadPool, SingleThreadRunsInline) {
  ThreadPool pool(1);
  int calls = 0;
  pool.run([&](int index, int count) {
    EXPECT_EQ(index, 0);
    EXPECT_EQ(count, 1);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace tessera
