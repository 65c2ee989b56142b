// KvCacheManager: the scheduler's only entry into the KV cache. It keeps one block table per
// sequence and KV-cache group (append-only: blocks are added at the end, removed only from the end
// by truncate/free, and in a sliding-window group replaced by the null block once every query has
// passed them) and decides allocation, prefix-cache hits, forks and copy-on-write; the KV data itself
// is moved by the runner's storage, which performs the `cow_copies` it is handed before the forward.
//
// KV-cache groups: the layers are split into groups of equal per-block bytes; every group shares
// the one BlockPool (a block id names the same bytes whatever its group), and each sequence has
// one table per group. A sliding group (window W tokens: a query at p sees keys (p - W, p]) gives
// back, at allocate_slots(seq, computed, ...), every block wholly before position computed - W + 1:
//
//   block_size 16, W = 32, computed = 64:  group 0 (full) [b1 b2 b3 b4 b5]
//                                          group 1 (W 32) [ 0  b6 b7 b8 b9]   block 0 held [0, 16)
// The default config (no groups listed) is one full group: today's behaviour, block for block.
//
// Slot layout of one sequence, block_size = 4, 10 tokens known, 6 computed, 3 scheduled now:
//
//   position  0 1 2 3 | 4 5 6 7 | 8 9 . .
//   table     [  b7   |   b2    |   b5   ]    prefix-hit blocks, then blocks allocated on demand
//             <-computed---><new-->            allocate_slots(seq, 6, 3) covers positions [0, 9)
//
// Contracts:
//  * allocate_slots allocates a block only when a new token slot needs one (waste < block_size
//    slots per sequence), and answers nullopt ("not now": preempt someone, retry) changing nothing.
//  * A block written by this step and shared (ref_cnt > 1, after a fork) is first replaced by a
//    private copy: the pair (src, dst) is returned in cow_copies.
//  * Only computed, non-draft, full blocks enter the prefix cache (cache_blocks); a hit is capped at
//    num_tokens - 1 so the last prompt token is always computed (its logits are needed).
//  * free releases blocks tail first, so the tail of a chain is evicted first.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"

namespace tessera::kv {

struct KvCacheGroupSpec {
  int32_t sliding_window = 0;  // tokens a query sees, itself included; 0 = full attention
};

struct KvCacheConfig {
  int32_t num_blocks = 0;             // blocks in the pool, the null block included
  int32_t block_size = 16;            // token slots per block
  bool enable_prefix_caching = true;  // automatic prefix caching on/off
  bool record_block_events = false;   // keep the pool's BlockEventLog (kv/block_events.h)
  std::vector<KvCacheGroupSpec> groups = {};  // [num_groups]; empty = one full-attention group
};

// A read-only view of a sequence's tokens, taken from the scheduler's Request.
struct SeqTokens {
  int64_t seq_id = 0;                        // sequence id (key of the block table)
  TokenRun token_ids;                        // [num_tokens] prompt ++ output, no draft tokens
  std::span<const BlockHash> block_hashes;   // [num_tokens / block_size] chained hashes
  uint64_t extra_key = 0;                    // cache-salt key (hash_cache_salt), 0 = none
};

struct PrefixHit {
  // [num_groups x num_tokens / block_size], group-major: group g's table is the slice
  // [g x n, (g + 1) x n) (KvCacheManager::hit_blocks). Sliding groups hold kNullBlockId before
  // their window. With one group this is the chain of cached blocks, in order.
  std::vector<int32_t> block_ids;
  int32_t num_tokens = 0;          // tokens covered by block_ids (a multiple of block_size)
  int32_t num_query_tokens = 0;    // tokens of the request that looked (for hit-rate counters)
};

struct CowCopy {
  int32_t src_block = 0;  // shared block to read from
  int32_t dst_block = 0;  // private copy, now in the writer's table at the same index
  int32_t group = 0;      // KV-cache group: the runner copies this group's layers only
};

struct SlotAllocation {
  std::vector<int32_t> new_block_ids;  // blocks appended to the tables, group 0's first (prefix
                                       // hits excluded); each group gets the same number
  std::vector<CowCopy> cow_copies;     // copies the runner performs before the forward
};

// A block of a sequence's chain that a lower tier (the engine's disk tier) holds: KV-cache group,
// and index in the chain (block b covers tokens [b x block_size, (b + 1) x block_size)).
struct ImportBlock {
  int32_t group = 0;
  int32_t index = 0;
};

struct KvCacheStats {
  int32_t num_blocks_total = 0;      // usable blocks (null block excluded)
  int32_t num_blocks_free = 0;       // ref_cnt 0, not cached
  int32_t num_blocks_cached = 0;     // ref_cnt 0, cached (evictable)
  int32_t num_blocks_used = 0;       // held by at least one sequence
  double usage = 0.0;                // num_blocks_used / num_blocks_total
  int64_t prefix_query_tokens = 0;   // prompt tokens looked up in the prefix cache
  int64_t prefix_hit_tokens = 0;     // of those, found cached
  int64_t num_evictions = 0;         // cached blocks reused for new data
  int64_t num_cow_copies = 0;        // copy-on-write block copies ordered
  int64_t num_hash_collisions = 0;   // hash matches rejected by the token comparison
  std::vector<int32_t> group_blocks_used;  // [num_groups] distinct blocks in each group's tables
  int64_t num_window_releases = 0;   // blocks given back by sliding groups (table entries nulled)
};

class KvCacheManager {
 public:
  explicit KvCacheManager(const KvCacheConfig& config);

  int32_t block_size() const { return pool_.block_size(); }
  int32_t num_usable_blocks() const { return pool_.num_blocks() - 1; }
  int32_t num_free_blocks() const { return pool_.num_free_blocks(); }
  int32_t num_blocks_for_tokens(int64_t num_tokens) const;  // ceil(num_tokens / block_size)
  const BlockPool& pool() const { return pool_; }
  int32_t num_groups() const { return static_cast<int32_t>(windows_.size()); }
  int32_t sliding_window(int32_t group) const { return windows_.at(static_cast<size_t>(group)); }

  // Longest hit for a new sequence: the longest L (a multiple of block_size, <= num_tokens - 1)
  // such that each full group has blocks [0, L) and each sliding group the blocks covering
  // [max(0, L - W + 1), L) cached and verified. No side effects: pass the result to allocate_slots.
  PrefixHit get_computed_blocks(const SeqTokens& seq) const;
  // Group g's slice of hit.block_ids.
  std::span<const int32_t> hit_blocks(const PrefixHit& hit, int32_t group) const;

  // Makes positions [0, num_computed_tokens + num_new_tokens) addressable. For a sequence's first
  // allocation pass its prefix hit (possibly empty); num_computed_tokens must then equal
  // hit->num_tokens. Sliding groups first give back the blocks wholly before position
  // num_computed_tokens - W + 1 (tail first, still cached). nullopt when the free blocks (counting
  // those the window release would return) do not cover the new and copied blocks of all groups
  // together; nothing changes then, releases included.
  std::optional<SlotAllocation> allocate_slots(int64_t seq_id, int32_t num_computed_tokens,
                                               int32_t num_new_tokens,
                                               const PrefixHit* prefix_hit = nullptr);
  // Enters the sequence's full blocks within its first num_computed_tokens tokens into the cache.
  void cache_blocks(const SeqTokens& seq, int32_t num_computed_tokens);
  // Blocks of seq's chain read from a lower tier, entered into the prefix cache as if computed, so
  // the sequence's admission (get_computed_blocks) finds them. `blocks` sorted by group, then
  // index. A full group's block enters only when every earlier block of its chain is cached (or
  // enters here): the verified chain from block 0; a sliding group's block chains to the previous
  // block when that one enters here, else enters with an unknown parent (kUnknownParentBlock).
  // Returns per input the pool block now holding it, whose bytes the caller writes before the
  // next schedule(); kNullBlockId when skipped (cached already, chain broken, or no free block).
  // The blocks end free and cached (ref_cnt 0) at the back of the eviction queue, tail first.
  std::vector<int32_t> import_blocks(const SeqTokens& seq, std::span<const ImportBlock> blocks);
  // The child shares every block of the parent (ref counts); writes then copy on demand.
  void fork(int64_t parent_id, int64_t child_id);
  // Keeps the blocks covering the first num_tokens positions, frees the rest (rejected drafts).
  // Never cuts into a sliding group's released blocks (a checked error: drafts only ever follow
  // the computed tokens, which the window keeps).
  void truncate(int64_t seq_id, int32_t num_tokens);
  // Frees every block of the sequence, group by group, each tail first; no-op for an unknown id.
  void free(int64_t seq_id);
  // Drops all cached hashes; false while any sequence holds blocks.
  bool reset_prefix_cache() { return pool_.reset_prefix_cache(); }
  // Blocks stored into / removed from the prefix cache since the last call, in order (empty unless
  // record_block_events).
  std::vector<BlockEvent> drain_block_events() { return pool_.drain_events(); }

  bool contains(int64_t seq_id) const { return tables_.count(seq_id) != 0; }
  std::span<const int32_t> block_table(int64_t seq_id) const { return block_table(seq_id, 0); }
  // Group g's table (kNullBlockId entries before a sliding window); empty for an unknown id.
  std::span<const int32_t> block_table(int64_t seq_id, int32_t group) const;
  // Non-null blocks the sequence holds over all groups (kv_plan's kv_blocks_held counts the same).
  int32_t num_blocks_held(int64_t seq_id) const;
  int32_t num_sequences() const { return static_cast<int32_t>(tables_.size()); }

  KvCacheStats stats() const;
  // Pool invariants plus: each block's ref_cnt equals the number of tables holding it, a block
  // belongs to one group only, and a sliding table's released entries are exactly its leading nulls.
  void check_integrity() const;

 private:
  struct GroupTable {
    std::vector<int32_t> block_ids;  // the block table, kNullBlockId for released entries
    int32_t num_cached_blocks = 0;   // leading blocks already offered to the prefix cache
    int32_t num_released = 0;        // leading entries given back (all kNullBlockId)
  };
  struct SeqState {
    std::vector<GroupTable> groups;  // [num_groups]
  };

  // Entries of a sliding table that no query at or after `num_computed` can see.
  int32_t num_releasable(int32_t group, int32_t num_computed) const;
  // Entries [t.num_released, to) given back tail first (they stay cached), set to kNullBlockId.
  void release(GroupTable& t, int32_t to);

  BlockPool pool_;
  std::vector<int32_t> windows_;                  // [num_groups] sliding window, 0 = full
  std::unordered_map<int64_t, SeqState> tables_;  // seq id -> state
  int64_t prefix_query_tokens_ = 0;
  int64_t prefix_hit_tokens_ = 0;
  int64_t num_cow_copies_ = 0;
  int64_t num_window_releases_ = 0;
};

}  // namespace tessera::kv
