// parse_byte_size: the one meaning of sizes on every command line (util/byte_size.h): KiB/MiB/GiB/TiB
// are powers of 2, KB/MB/GB/TB powers of 10, bare K/M/G/T powers of 2, case-insensitive.
#include <gtest/gtest.h>

#include "util/byte_size.h"

namespace tessera {
namespace {

int64_t bytes(const char* text) {
  auto r = parse_byte_size(text);
  EXPECT_TRUE(r.ok()) << text << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : -1;
}

TEST(ByteSize, BinaryUnitsArePowersOfTwo) {
  EXPECT_EQ(bytes("1KiB"), 1024);
  EXPECT_EQ(bytes("512MiB"), 536870912);
  EXPECT_EQ(bytes("2GiB"), 2147483648);
  EXPECT_EQ(bytes("1TiB"), 1099511627776);
  EXPECT_EQ(bytes("1.5gib"), 1610612736);
}

TEST(ByteSize, DecimalUnitsArePowersOfTen) {
  EXPECT_EQ(bytes("1KB"), 1000);
  EXPECT_EQ(bytes("1kB"), 1000);
  EXPECT_EQ(bytes("512MB"), 512000000);
  EXPECT_EQ(bytes("2GB"), 2000000000);
  EXPECT_EQ(bytes("80GB"), 80000000000);
  EXPECT_EQ(bytes("1TB"), 1000000000000);
  EXPECT_EQ(bytes("0.5GB"), 500000000);
}

TEST(ByteSize, BareLettersAndBytes) {
  EXPECT_EQ(bytes("512m"), 536870912);  // like docker -m 512m
  EXPECT_EQ(bytes("4G"), 4294967296);
  EXPECT_EQ(bytes("8k"), 8192);
  EXPECT_EQ(bytes("1048576"), 1048576);
  EXPECT_EQ(bytes("100B"), 100);
  EXPECT_EQ(bytes("256 MiB"), 268435456);  // one space allowed between number and unit
  EXPECT_EQ(bytes("0"), 0);
  EXPECT_EQ(bytes("1.0000000001"), 1);      // rounded to the nearest byte
}

TEST(ByteSize, RejectsWhatItCannotRead) {
  for (const char* bad : {"", "GiB", "lots", "-1GiB", "12XB", "1.2.3GB", "1e9", "2 GiB extra", "5 iB",
                          "nan", "99999999999TB"}) {
    auto r = parse_byte_size(bad);
    ASSERT_FALSE(r.ok()) << "'" << bad << "' parsed as " << *r;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace tessera
