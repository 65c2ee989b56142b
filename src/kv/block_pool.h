// BlockPool: every KV block of the cache, its reference count, the free queue and the prefix-cache
// map (hash -> block ids). Bookkeeping only: the KV tensors live in the runner's storage, indexed by
// the same block ids.
//
// States of a block (id 0 is the null block, a placeholder never handed out or freed):
//   free      ref_cnt == 0, no hash      in the free queue
//   cached    ref_cnt == 0, has a hash   in the free queue, reusable by a prefix hit until evicted
//   in use    ref_cnt  > 0 (hash or not) not in the free queue
// Invariants (check_integrity): 1 + free + cached + in use == num_blocks; the queue holds exactly the
// blocks with ref_cnt == 0; the map holds exactly the blocks with a hash, under that hash.
// Eviction is LRU through the queue: get_new_blocks pops the front, dropping the hash of a cached
// block; callers free a sequence's blocks tail first so a chain's last block is evicted first.
// Hits are verified, never trusted: a cached block matches only if its token ids, extra key and
// parent block (id and generation) are the ones looked up, so a 64-bit hash collision cannot hand
// out another prefix's KV. Duplicates (two blocks with one hash) are allowed: tables stay append-only.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_events.h"
#include "kv/block_hash.h"
#include "kv/free_block_queue.h"

namespace tessera::kv {

inline constexpr int32_t kNullBlockId = 0;
inline constexpr int32_t kNoParentBlock = -1;
// Parent of a sliding-window group's block whose previous table entry was already given back.
// Cached with it, a block matches only a lookup that also passes it; passed to find_cached_block it
// accepts any parent (the block is then verified by hash, tokens and extra key alone).
inline constexpr int32_t kUnknownParentBlock = -2;

struct KvBlock {
  int32_t id = 0;                    // index into the pool and into KV storage
  int32_t ref_cnt = 0;               // number of block tables that hold this block
  bool has_hash = false;             // true while the block is in the prefix cache (full, computed)
  BlockHash hash = 0;                // chained hash, valid when has_hash
  uint64_t extra_key = 0;            // extra key mixed into the hash (first block of a chain only)
  int32_t parent_id = kNoParentBlock;  // block holding the previous block of the chain when cached
  uint32_t parent_generation = 0;    // parent's generation at that time
  uint32_t generation = 0;           // bumped each time the block loses its hash (evicted / reset)
};

struct BlockPoolCounts {
  int32_t num_free = 0;    // ref_cnt == 0, no hash
  int32_t num_cached = 0;  // ref_cnt == 0 with a hash (evictable prefix-cache blocks)
  int32_t num_used = 0;    // ref_cnt > 0 (null block excluded)
};

class BlockPool {
 public:
  // num_blocks includes the null block; block_size in tokens.
  BlockPool(int32_t num_blocks, int32_t block_size, bool enable_caching);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return block_size_; }
  bool enable_caching() const { return enable_caching_; }
  int32_t num_free_blocks() const { return free_queue_.size(); }  // free + cached (allocatable)
  const KvBlock& block(int32_t id) const { return blocks_.at(static_cast<size_t>(id)); }
  std::vector<int32_t> free_queue_order() const { return free_queue_.to_vector(); }
  std::span<const int32_t> cached_tokens(int32_t id) const;  // [block_size] when has_hash

  // Pops `n` blocks from the front of the free queue (evicting cached ones), ref_cnt = 1 each.
  // Caller checks n <= num_free_blocks().
  std::vector<int32_t> get_new_blocks(int32_t n);
  // A new holder for each block (prefix hit, fork): ref_cnt++, unlinked from the queue if it was 0.
  void touch(std::span<const int32_t> block_ids);
  // Drops one reference per block, in the given order; blocks reaching 0 join the queue's back.
  void free_blocks(std::span<const int32_t> block_ids);

  // Enters a full, computed block into the prefix cache. No-op when caching is off or the block
  // already has this hash (it was a hit or is shared with a fork). group, block_index and seq_id
  // only go into the kStored record (BlockEvent).
  void cache_full_block(int32_t block_id, BlockHash hash, std::span<const int32_t> tokens,
                        int32_t parent_block_id, uint64_t extra_key, int32_t group = 0,
                        int32_t block_index = -1, int64_t seq_id = -1);
  // A cached block with this hash whose tokens, extra key and parent (kNoParentBlock for the first
  // block of a chain) match; nullopt on a miss or an unverified hash match.
  std::optional<int32_t> find_cached_block(BlockHash hash, std::span<const int32_t> tokens,
                                           int32_t parent_block_id, uint64_t extra_key) const;
  // Drops every hash. Refused (false) while any block is in use, as stale hits would be unsafe.
  bool reset_prefix_cache();

  // The state counts in O(1), kept as blocks move (stats every engine step read them).
  BlockPoolCounts counts() const {
    const int32_t num_queued = free_queue_.size();
    return {num_queued - num_cached_free_, num_cached_free_, num_blocks() - 1 - num_queued};
  }
  // Aborts with a message on any broken invariant (O(num_blocks): tests, debug builds); returns
  // the state counts, recounted, which must equal counts().
  BlockPoolCounts check_integrity() const;

  int64_t num_evictions() const { return num_evictions_; }

  // The record of blocks entering and leaving the prefix cache (kv/block_events.h); off by default.
  void set_record_events(bool on) { events_.set_enabled(on); }
  std::vector<BlockEvent> drain_events() { return events_.drain(); }
  int64_t num_hash_collisions() const { return num_hash_collisions_; }

 private:
  void drop_hash(KvBlock& block);

  int32_t block_size_;
  bool enable_caching_;
  std::vector<KvBlock> blocks_;                 // [num_blocks]
  FreeBlockQueue free_queue_;                   // blocks with ref_cnt == 0, eviction order
  std::vector<int32_t> cached_tokens_;          // [num_blocks * block_size] token ids of cached blocks
  std::unordered_map<BlockHash, std::vector<int32_t>> cached_block_ids_;  // hash -> block ids
  int32_t num_cached_free_ = 0;                 // blocks in the free queue that still have a hash
  int64_t num_evictions_ = 0;                   // cached blocks whose hash was dropped for reuse
  mutable int64_t num_hash_collisions_ = 0;     // hash matches rejected by verification
  BlockEventLog events_;                        // stored / removed / cleared, when enabled
};

}  // namespace tessera::kv
