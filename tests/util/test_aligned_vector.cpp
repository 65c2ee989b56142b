// util/aligned_vector.h: the data of an AlignedVector starts on a 64-byte line whatever its element
// type and size, through growth and copies, and keeps its values like a std::vector.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>

#include "util/aligned_vector.h"

namespace tessera {
namespace {

bool on_line(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

TEST(AlignedVector, DataOnACacheLineThroughGrowth) {
  AlignedVector<float> f;
  AlignedVector<int8_t> b;
  for (size_t n : {1u, 3u, 17u, 1000u, 4097u, 200000u}) {  // small sizes too: malloc's own bins
    f.resize(n);
    b.resize(n);
    EXPECT_TRUE(on_line(f.data())) << n;
    EXPECT_TRUE(on_line(b.data())) << n;
  }
}

TEST(AlignedVector, KeepsValuesAcrossGrowthAndCopy) {
  AlignedVector<int32_t> v(100);
  std::iota(v.begin(), v.end(), 0);
  v.resize(5000, -1);
  EXPECT_EQ(v[99], 99);
  EXPECT_EQ(v[100], -1);
  const AlignedVector<int32_t> copy = v;
  EXPECT_TRUE(on_line(copy.data()));
  EXPECT_EQ(copy, v);
}

}  // namespace
}  // namespace tessera
