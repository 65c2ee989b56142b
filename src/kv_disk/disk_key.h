// Keys of the disk tier. A block on disk is named by a 128-bit chained key (XXH3-128):
//   key[b] = H(key[b - 1], token ids of block b, extra key of block b),   key[-1] = kRootDiskKey
// so a key names the block's whole prefix. The in-memory prefix cache's 64-bit hash is verified
// against token ids in the pool; a file is verified against its own key, its parent's key and its
// token ids (block_file.h), and 128 bits make a false chain match impossible in practice.
// The extra key is the pool's verified extra key of that block (kv::block_extra_key: the cache salt
// on block 0, the KV-cache group's key on every block of a group g > 0), so tenants and groups
// never share a key. What changes the K/V bytes but not the tokens (the model's content, KV dtype,
// block size, the layer layout) is the namespace (namespace_key): one subdirectory per namespace.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>

namespace tessera::kv_disk {

struct DiskKey {
  uint64_t hi = 0;
  uint64_t lo = 0;
  bool operator==(const DiskKey&) const = default;
};

struct DiskKeyHash {
  size_t operator()(const DiskKey& k) const { return static_cast<size_t>(k.lo ^ (k.hi * 0x9e3779b97f4a7c15ULL)); }
};

inline constexpr DiskKey kRootDiskKey{0x7e55e7a0d15c0001ULL, 0x6b76d15c0ffee001ULL};

// Key of one full block from its parent's key.
DiskKey chain_disk_key(const DiskKey& parent, std::span<const int32_t> tokens, uint64_t extra_key);

// 32 lowercase hex digits (hi then lo); parse_disk_key is its inverse (false on anything else).
std::string to_hex(const DiskKey& key);
bool parse_disk_key(std::string_view hex, DiskKey* out);

// XXH3-128 of bytes (the model file's content fingerprint) and of several fields in turn.
DiskKey hash_bytes(std::span<const uint8_t> bytes);

// The namespace of everything that changes a block's bytes without changing its tokens. Feed it
// every such field in a fixed order; the result names the subdirectory.
class NamespaceBuilder {
 public:
  NamespaceBuilder& add(uint64_t value);
  NamespaceBuilder& add(const DiskKey& key) { return add(key.hi).add(key.lo); }
  NamespaceBuilder& add(std::string_view text);
  DiskKey build() const;

 private:
  std::string bytes_;
};

}  // namespace tessera::kv_disk
