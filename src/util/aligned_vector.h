// AlignedVector<T>: a std::vector whose data starts on a 64-byte cache line.
//
// Why: the kernels store whole 64-byte vectors at offsets that are multiples of 64 bytes from the
// start of their output rows (the AMX matmul writes one line per 16 outputs of an activation row).
// malloc hands out 16-byte alignment, so each such store straddled two lines (a split store), and
// the lines at the edges of two threads' output ranges were written by both: the batched matmul
// ran 5-10% slower (bench_matmul, m = 16, bench/LOG.md B4).
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace tessera {

template <typename T, std::size_t kAlign = 64>
struct AlignedAllocator {
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = AlignedAllocator<U, kAlign>;
  };
  AlignedAllocator() = default;
  template <typename U>
  AlignedAllocator(const AlignedAllocator<U, kAlign>&) noexcept {}
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kAlign}));
  }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{kAlign}); }
  template <typename U>
  bool operator==(const AlignedAllocator<U, kAlign>&) const noexcept {
    return true;
  }
};

template <typename T>
using AlignedVector = std::vector<T, AlignedAllocator<T>>;

}  // namespace tessera
