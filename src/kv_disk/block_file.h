// The file of one block on disk: a fixed header, the block's token ids, then its K/V bytes.
//
//   offset  size               field
//   0       8                  magic "TSKVBLK1"
//   8       4                  format version (kBlockFileVersion)
//   12      4                  group: the KV-cache group whose tables held the block
//   16      16                 namespace key (disk_key.h: model content, KV dtype, layout, ...)
//   32      16                 this block's chained key
//   48      16                 its parent's key (kRootDiskKey for a chain's first block)
//   64      8                  the pool's 64-bit prefix-cache hash (for KV events' BlockRemoved)
//   72      8                  the pool hash of the parent block (0 = none)
//   80      4                  number of token ids (the block size)
//   84      4                  flags: bit 0 = the parent pool hash is known
//   88      8                  payload bytes
//   96      8                  XXH3-64 checksum of bytes [0, 96) and everything after 104
//   104     4 x num_tokens     token ids (int32, little-endian as in memory)
//   ...     payload bytes      the block's K/V (model/kv_storage.h's copy_block_out layout)
//
// A read is accepted only if the size, magic, version, namespace, key, parent key, token ids,
// payload size and checksum are exactly what the reader expects: a torn, truncated, bit-flipped,
// renamed or foreign file is refused (verify_block_file says why).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kv_disk/disk_key.h"

namespace tessera::kv_disk {

inline constexpr uint32_t kBlockFileVersion = 1;
inline constexpr size_t kBlockFileHeaderBytes = 104;

struct BlockMeta {
  DiskKey ns;                   // namespace
  DiskKey key;                  // this block
  DiskKey parent;               // previous block of the chain (kRootDiskKey for the first)
  int32_t group = 0;            // KV-cache group
  uint64_t pool_hash = 0;       // kv::BlockHash of the block in the pool (group-keyed)
  uint64_t pool_parent_hash = 0;
  bool has_pool_parent = false;
  std::vector<int32_t> tokens;  // [block_size]
};

// Header + tokens + payload as one buffer (what is written to the file).
std::vector<uint8_t> encode_block_file(const BlockMeta& meta, std::span<const uint8_t> payload);

// Empty string when `file` is the block `expected` describes (namespace, key, parent, group,
// tokens) with a payload of payload_bytes; else what is wrong. On success *payload views the bytes.
std::string verify_block_file(std::span<const uint8_t> file, const BlockMeta& expected, size_t payload_bytes,
                              std::span<const uint8_t>* payload);

// The same check on a file read in two parts (the I/O thread reads the payload straight into its
// own buffer): `head` = header + token ids (block_file_head_bytes), `payload` = the rest.
std::string verify_block_parts(std::span<const uint8_t> head, std::span<const uint8_t> payload, const BlockMeta& expected,
                               size_t payload_bytes);
// Header + token-id bytes of a block of num_tokens tokens.
inline size_t block_file_head_bytes(size_t num_tokens) { return kBlockFileHeaderBytes + num_tokens * sizeof(int32_t); }

// The header's pool hash, when `file` starts with a well-formed header (the I/O thread reads it
// from a file it evicts, for the DISK BlockRemoved event); false otherwise.
bool read_pool_hash(std::span<const uint8_t> file, uint64_t* pool_hash);

}  // namespace tessera::kv_disk
