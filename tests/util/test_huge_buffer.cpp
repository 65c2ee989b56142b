// util/huge_buffer.h: zero-filled, 2 MiB aligned (so the kernel may back it with huge pages),
// writable to its last byte, and owned by exactly one object across moves.
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

#include "util/huge_buffer.h"

namespace tessera {
namespace {

TEST(HugeBuffer, ZeroFilledAlignedAndWritable) {
  const size_t bytes = (size_t{5} << 20) + 123;  // not a whole number of huge pages
  HugeBuffer b(bytes);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(b.size(), bytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % (size_t{2} << 20), 0u);
  size_t nonzero = 0;
  for (size_t i = 0; i < bytes; i += 511) nonzero += b.data()[i] != 0;
  EXPECT_EQ(nonzero, 0u);
  b.data()[0] = 1;
  b.data()[bytes - 1] = 2;
  EXPECT_EQ(b.data()[bytes - 1], 2);
}

TEST(HugeBuffer, MovesOwnership) {
  HugeBuffer a(4096);
  uint8_t* p = a.data();
  p[10] = 7;
  HugeBuffer b(std::move(a));
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(b.data(), p);
  HugeBuffer c;
  c = std::move(b);
  EXPECT_EQ(c.data()[10], 7);
  EXPECT_EQ(b.data(), nullptr);
  HugeBuffer empty(0);
  EXPECT_EQ(empty.data(), nullptr);
}

}  // namespace
}  // namespace tessera
