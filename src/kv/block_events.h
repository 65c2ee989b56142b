// BlockEventLog: the prefix cache's own record of what it gained and lost, in order. The block pool
// appends a kStored record when a full block enters the hash map (cache_full_block), a kRemoved
// record when a cached block loses its hash to eviction (get_new_blocks), and one kAllCleared when
// every hash is dropped (reset_prefix_cache). Nothing is recorded while the log is disabled (the
// default), so a server without KV-event subscribers keeps no growing buffer.
//
// The engine drains the log once per step and hands the records up (kv_events/ turns them into
// vLLM's BlockStored / BlockRemoved / AllBlocksCleared wire events); kv/ itself stays bookkeeping.
// Duplicates follow the pool: two blocks with one hash give two kStored records, and each one's
// eviction its own kRemoved.
#pragma once
#include <cstdint>
#include <vector>

#include "kv/block_hash.h"

namespace tessera::kv {

enum class BlockEventKind : uint8_t { kStored, kRemoved, kAllCleared };

struct BlockEvent {
  BlockEventKind kind = BlockEventKind::kStored;
  int32_t block_id = 0;            // pool block (kStored / kRemoved); 0 for kAllCleared
  BlockHash hash = 0;              // the block's chained hash (kStored / kRemoved)
  bool has_parent = false;         // kStored: false for the first block of a chain
  BlockHash parent_hash = 0;       // kStored: hash of the previous block of the chain
  std::vector<int32_t> token_ids;  // kStored: the block's [block_size] token ids; else empty
  uint64_t extra_key = 0;          // kStored: the extra key it was cached with (a chain's first block's
                                   // names the request's salt; later blocks inherit it via the parent)
};

class BlockEventLog {
 public:
  bool enabled() const { return enabled_; }
  void set_enabled(bool on) {
    enabled_ = on;
    if (!on) events_.clear();
  }
  void append(BlockEvent event) {
    if (enabled_) events_.push_back(std::move(event));
  }
  // Every record since the last drain, oldest first; the log is empty afterwards.
  std::vector<BlockEvent> drain() {
    std::vector<BlockEvent> out;
    out.swap(events_);
    return out;
  }
  size_t size() const { return events_.size(); }

 private:
  bool enabled_ = false;
  std::vector<BlockEvent> events_;
};

}  // namespace tessera::kv
