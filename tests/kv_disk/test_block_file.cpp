// Disk keys and the block file format: exact keys, round trips, and every kind of damage refused.
#include <gtest/gtest.h>

#include <xxhash.h>

#include <cstring>

#include "kv_disk/block_file.h"
#include "kv_disk/disk_key.h"

namespace tessera::kv_disk {
namespace {

std::vector<uint8_t> payload_of(size_t n) {
  std::vector<uint8_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(i * 7 + 3);
  return p;
}

BlockMeta meta_of(std::vector<int32_t> tokens) {
  BlockMeta m;
  m.ns = {1, 2};
  m.parent = kRootDiskKey;
  m.key = chain_disk_key(m.parent, tokens, 0);
  m.group = 0;
  m.pool_hash = 0xabc;
  m.tokens = std::move(tokens);
  return m;
}

TEST(DiskKey, ChainKeyIsXxh3128OfParentExtraAndTokens) {
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  const DiskKey key = chain_disk_key(kRootDiskKey, tokens, 7);
  // The layout the key is defined over: parent hi, parent lo, extra key, then the token ids.
  std::vector<uint8_t> bytes(24 + 16);
  const uint64_t head[3] = {kRootDiskKey.hi, kRootDiskKey.lo, 7};
  std::memcpy(bytes.data(), head, 24);
  std::memcpy(bytes.data() + 24, tokens.data(), 16);
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  EXPECT_EQ(key, (DiskKey{h.high64, h.low64}));
  EXPECT_EQ(to_hex(key), "59e0a676840748b8acdcca160b7e12f6");  // pinned: a change orphans every file on disk
  // Every input moves the key: a token, the extra key (salt / group), the parent.
  EXPECT_FALSE(chain_disk_key(kRootDiskKey, std::vector<int32_t>{1, 2, 3, 5}, 7) == key);
  EXPECT_FALSE(chain_disk_key(kRootDiskKey, tokens, 8) == key);
  EXPECT_FALSE(chain_disk_key(key, tokens, 7) == key);
}

TEST(DiskKey, HexRoundTrip) {
  const DiskKey key{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  EXPECT_EQ(to_hex(key), "0123456789abcdeffedcba9876543210");
  DiskKey back;
  ASSERT_TRUE(parse_disk_key(to_hex(key), &back));
  EXPECT_EQ(back, key);
  EXPECT_FALSE(parse_disk_key("0123", &back));
  EXPECT_FALSE(parse_disk_key("0123456789ABCDEFfedcba9876543210", &back));  // upper case is not ours
}

TEST(DiskKey, NamespaceSeparatesEveryField) {
  const DiskKey a = NamespaceBuilder().add("m").add(uint64_t{16}).add("f16").build();
  EXPECT_EQ(a, NamespaceBuilder().add("m").add(uint64_t{16}).add("f16").build());
  EXPECT_FALSE(a == NamespaceBuilder().add("m").add(uint64_t{16}).add("q8").build());
  EXPECT_FALSE(a == NamespaceBuilder().add("m").add(uint64_t{32}).add("f16").build());
  // Length-prefixed strings: "ab" + "c" is not "a" + "bc".
  EXPECT_FALSE(NamespaceBuilder().add("ab").add("c").build() == NamespaceBuilder().add("a").add("bc").build());
}

TEST(BlockFile, RoundTrip) {
  const BlockMeta m = meta_of({10, 11, 12, 13});
  const std::vector<uint8_t> payload = payload_of(100);
  const std::vector<uint8_t> file = encode_block_file(m, payload);
  EXPECT_EQ(file.size(), kBlockFileHeaderBytes + 16 + 100);
  std::span<const uint8_t> got;
  EXPECT_EQ(verify_block_file(file, m, 100, &got), "");
  EXPECT_TRUE(std::equal(got.begin(), got.end(), payload.begin(), payload.end()));
  uint64_t hash = 0;
  ASSERT_TRUE(read_pool_hash(file, &hash));
  EXPECT_EQ(hash, 0xabcu);
}

TEST(BlockFile, EveryDamageIsRefused) {
  const BlockMeta m = meta_of({10, 11, 12, 13});
  const std::vector<uint8_t> file = encode_block_file(m, payload_of(100));
  std::span<const uint8_t> got;
  auto verify = [&](const std::vector<uint8_t>& f, const BlockMeta& expected) { return verify_block_file(f, expected, 100, &got); };

  EXPECT_EQ(verify({}, m), "size 0 bytes, expected 220");                                        // zero length
  EXPECT_EQ(verify(std::vector<uint8_t>(file.begin(), file.end() - 1), m), "size 219 bytes, expected 220");  // truncated
  std::vector<uint8_t> garbage(file.size(), 0x5a);
  EXPECT_EQ(verify(garbage, m), "bad magic");
  for (size_t at : {size_t{20}, size_t{kBlockFileHeaderBytes + 2}, file.size() - 1}) {  // header, tokens, payload
    std::vector<uint8_t> flipped = file;
    flipped[at] ^= 0x10;
    EXPECT_EQ(verify(flipped, m), "checksum mismatch") << "flip at " << at;
  }
  BlockMeta other = m;  // a file renamed to another key's name
  other.key = chain_disk_key(kRootDiskKey, std::vector<int32_t>{9, 9, 9, 9}, 0);
  EXPECT_EQ(verify(file, other), "another key");
  other = m;
  other.ns = {1, 3};  // another model or KV dtype
  EXPECT_EQ(verify(file, other), "another namespace");
  other = m;
  other.parent = {5, 5};
  EXPECT_EQ(verify(file, other), "another parent key");
  other = m;
  other.tokens = {10, 11, 12, 14};  // same key (a collision), other tokens
  EXPECT_EQ(verify(file, other), "other token ids");
  other = m;
  other.group = 1;
  EXPECT_EQ(verify(file, other), "group 0");
  EXPECT_EQ(verify_block_file(file, m, 99, &got), "size 220 bytes, expected 219");  // another payload size
}

// The I/O thread's check of a file read in two parts (header + token ids, payload) says what the
// whole-file check says, for the good file and for damage in each part.
TEST(BlockFile, PartsCheckMatchesWholeFileCheck) {
  const BlockMeta m = meta_of({10, 11, 12, 13});
  const std::vector<uint8_t> file = encode_block_file(m, payload_of(100));
  const size_t head = block_file_head_bytes(4);
  EXPECT_EQ(head, kBlockFileHeaderBytes + 16);
  std::span<const uint8_t> got;
  for (size_t at : {size_t{0}, size_t{20}, head - 1, head, file.size() - 1}) {
    std::vector<uint8_t> f = file;
    if (at != 0) f[at] ^= 0x10;  // at 0: undamaged
    const std::span<const uint8_t> bytes(f);
    const std::string parts = verify_block_parts(bytes.first(head), bytes.subspan(head), m, 100);
    EXPECT_EQ(parts, verify_block_file(f, m, 100, &got)) << "flip at " << at;
    EXPECT_EQ(parts, at == 0 ? "" : "checksum mismatch") << "flip at " << at;
  }
  const std::span<const uint8_t> bytes(file);
  EXPECT_EQ(verify_block_parts(bytes.first(head), bytes.subspan(head, 99), m, 100), "size 219 bytes, expected 220");
  BlockMeta other = m;
  other.tokens = {10, 11, 12, 14};
  EXPECT_EQ(verify_block_parts(bytes.first(head), bytes.subspan(head), other, 100), "other token ids");
}

}  // namespace
}  // namespace tessera::kv_disk
