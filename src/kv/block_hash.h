// Prefix-cache block hashes. A full block of `block_size` token ids is named by a 64-bit chained
// hash: hash(parent block's hash, the block's token ids, extra key). The extra key (a hash of the
// request's cache salt, 0 when none) is mixed into the first block only; every later block inherits
// it through the chain, so two tenants with different salts never share a block.
// Invariants: only full blocks have a hash; hashes of a token sequence are computed incrementally
// (appending tokens never changes an existing hash); the hash is only a lookup key, the pool
// confirms every hit by comparing token ids (see block_pool.h), so a collision cannot return
// another prefix's KV.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace tessera::kv {

using BlockHash = uint64_t;

// Parent hash of a sequence's first block.
inline constexpr BlockHash kRootBlockHash = 0x7e55e7a0c0ffee01ULL;

// Hash of one full block: tokens.size() must equal the block size.
BlockHash hash_block_tokens(BlockHash parent_hash, std::span<const int32_t> tokens,
                            uint64_t extra_key);

// Group `group`'s copy of a key (a block hash or an extra key): group 0 keeps the key as is (one
// group = the single-table keys), later groups mix in a per-group salt, so no KV-cache group ever
// finds another group's block (they hold different layers).
uint64_t group_key(uint64_t key, int32_t group);

// The verified extra key of block `index` of a chain in group `group`: the salt key on the first
// block (as with one table), and the group's own key on every block of a later group, so a
// sliding group's block checked without its (released) parent still cannot match another group's.
uint64_t block_extra_key(uint64_t salt_key, size_t index, int32_t group);

// Extra key for a cache salt; 0 for the empty salt (no isolation).
uint64_t hash_cache_salt(std::string_view salt);

// A sequence's token ids read as one run from two contiguous pieces: the prompt (stored once per
// request, shared by its samples) then the sequence's own output. Either piece may be empty; a
// plain vector or span converts to a run with an empty tail.
struct TokenRun {
  std::span<const int32_t> head;  // [head.size()] positions 0..
  std::span<const int32_t> tail;  // [tail.size()] positions head.size()..
  TokenRun() = default;
  TokenRun(std::span<const int32_t> all) : head(all) {}          // NOLINT: implicit by design
  TokenRun(const std::vector<int32_t>& all) : head(all) {}       // NOLINT
  TokenRun(std::span<const int32_t> h, std::span<const int32_t> t) : head(h), tail(t) {}
  size_t size() const { return head.size() + tail.size(); }
  bool empty() const { return size() == 0; }
  int32_t operator[](size_t p) const { return p < head.size() ? head[p] : tail[p - head.size()]; }
  // Tokens [begin, begin + n) (within size()): a span into one piece, or copied into `scratch`
  // when the range straddles the two (one block per sequence at most).
  std::span<const int32_t> range(size_t begin, size_t n, std::vector<int32_t>& scratch) const;
};

// Appends to `hashes` the hashes of every block of `token_ids` that is full and not yet hashed
// (hashes.size() blocks are already hashed). Call after each append of tokens.
void extend_block_hashes(std::vector<BlockHash>& hashes, TokenRun token_ids, int32_t block_size,
                         uint64_t extra_key);

}  // namespace tessera::kv
