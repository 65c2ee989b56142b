// A counting global operator new for the steady-state allocation tests. Include it in exactly one
// source file of a test binary of its own: it replaces the process's operator new and delete.
//
//   const int64_t before = tessera::testing::num_allocations();
//   ...hot path...
//   EXPECT_EQ(tessera::testing::num_allocations() - before, 0);
#pragma once
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace tessera::testing {
inline std::atomic<int64_t> g_num_allocations{0};
inline int64_t num_allocations() { return g_num_allocations.load(std::memory_order_relaxed); }
}  // namespace tessera::testing

// noinline: once inlined into a caller, GCC pairs `new` with the free() inside delete and
// raises -Wmismatched-new-delete (seen with -O2 and sanitizers).
__attribute__((noinline)) void* operator new(std::size_t size) {
  tessera::testing::g_num_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
__attribute__((noinline)) void operator delete(void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, std::size_t) noexcept { std::free(p); }
