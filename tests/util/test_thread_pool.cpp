#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
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
