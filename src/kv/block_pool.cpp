#include "kv/block_pool.h"

#include <algorithm>

#include "util/check.h"

namespace tessera::kv {

BlockPool::BlockPool(int32_t num_blocks, int32_t block_size, bool enable_caching)
    : block_size_(block_size),
      enable_caching_(enable_caching),
      blocks_(static_cast<size_t>(num_blocks)),
      free_queue_(num_blocks),
      cached_tokens_(static_cast<size_t>(num_blocks) * static_cast<size_t>(block_size), 0) {
  TESSERA_CHECK(num_blocks >= 2, "a pool needs the null block and at least one more, got {}",
                num_blocks);
  TESSERA_CHECK(block_size > 0, "block_size {}", block_size);
  for (int32_t id = 0; id < num_blocks; ++id) {
    blocks_[static_cast<size_t>(id)].id = id;
    if (id != kNullBlockId) free_queue_.push_back(id);
  }
}

std::span<const int32_t> BlockPool::cached_tokens(int32_t id) const {
  return std::span<const int32_t>(cached_tokens_).subspan(
      static_cast<size_t>(id) * static_cast<size_t>(block_size_), static_cast<size_t>(block_size_));
}

void BlockPool::drop_hash(KvBlock& block) {
  auto it = cached_block_ids_.find(block.hash);
  TESSERA_CHECK(it != cached_block_ids_.end(), "block {} hash {:#x} missing from the map", block.id,
                block.hash);
  auto& ids = it->second;
  ids.erase(std::find(ids.begin(), ids.end(), block.id));
  if (ids.empty()) cached_block_ids_.erase(it);
  block.has_hash = false;
  block.hash = 0;
  block.extra_key = 0;
  block.parent_id = kNoParentBlock;
  block.parent_generation = 0;
  ++block.generation;
}

std::vector<int32_t> BlockPool::get_new_blocks(int32_t n) {
  TESSERA_CHECK(n >= 0 && n <= free_queue_.size(), "asked for {} blocks, {} free", n,
                free_queue_.size());
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    KvBlock& block = blocks_[static_cast<size_t>(free_queue_.pop_front())];
    TESSERA_CHECK(block.ref_cnt == 0, "free block {} has ref_cnt {}", block.id, block.ref_cnt);
    if (block.has_hash) {
      --num_cached_free_;
      events_.append({.kind = BlockEventKind::kRemoved, .block_id = block.id, .hash = block.hash,
                      .has_parent = false, .parent_hash = 0, .token_ids = {}});
      drop_hash(block);
      ++num_evictions_;
    }
    block.ref_cnt = 1;
    out.push_back(block.id);
  }
  return out;
}

void BlockPool::touch(std::span<const int32_t> block_ids) {
  for (int32_t id : block_ids) {
    TESSERA_CHECK(id != kNullBlockId, "touch of the null block");
    KvBlock& block = blocks_.at(static_cast<size_t>(id));
    if (block.ref_cnt == 0) {
      free_queue_.remove(id);
      if (block.has_hash) --num_cached_free_;
    }
    ++block.ref_cnt;
  }
}

void BlockPool::free_blocks(std::span<const int32_t> block_ids) {
  for (int32_t id : block_ids) {
    TESSERA_CHECK(id != kNullBlockId, "free of the null block");
    KvBlock& block = blocks_.at(static_cast<size_t>(id));
    TESSERA_CHECK(block.ref_cnt > 0, "double free of block {}", id);
    if (--block.ref_cnt == 0) {
      free_queue_.push_back(id);
      if (block.has_hash) ++num_cached_free_;
    }
  }
}

void BlockPool::cache_full_block(int32_t block_id, BlockHash hash, std::span<const int32_t> tokens,
                                 int32_t parent_block_id, uint64_t extra_key) {
  if (!enable_caching_) return;
  TESSERA_CHECK(static_cast<int32_t>(tokens.size()) == block_size_, "caching {} tokens, block {}",
                tokens.size(), block_size_);
  KvBlock& block = blocks_.at(static_cast<size_t>(block_id));
  TESSERA_CHECK(block.ref_cnt > 0, "caching block {} that nobody holds", block_id);
  if (block.has_hash) {
    TESSERA_CHECK(block.hash == hash, "block {} cached as {:#x}, now {:#x}", block_id, block.hash,
                  hash);
    return;
  }
  block.has_hash = true;
  block.hash = hash;
  block.extra_key = extra_key;
  block.parent_id = parent_block_id;
  block.parent_generation =
      parent_block_id < 0 ? 0 : blocks_.at(static_cast<size_t>(parent_block_id)).generation;
  std::copy(tokens.begin(), tokens.end(),
            cached_tokens_.begin() + static_cast<ptrdiff_t>(block_id) * block_size_);
  cached_block_ids_[hash].push_back(block_id);
  if (events_.enabled()) {
    // The parent is held by the same sequence (ref_cnt > 0), so it is still cached under the
    // hash this block's hash was chained from; a sliding group's released parent
    // (kUnknownParentBlock) gives a record without one.
    const KvBlock* parent =
        parent_block_id < 0 ? nullptr : &blocks_.at(static_cast<size_t>(parent_block_id));
    events_.append({.kind = BlockEventKind::kStored,
                    .block_id = block_id,
                    .hash = hash,
                    .has_parent = parent != nullptr && parent->has_hash,
                    .parent_hash = parent != nullptr && parent->has_hash ? parent->hash : 0,
                    .token_ids = std::vector<int32_t>(tokens.begin(), tokens.end()),
                    .extra_key = extra_key});
  }
}

std::optional<int32_t> BlockPool::find_cached_block(BlockHash hash, std::span<const int32_t> tokens,
                                                    int32_t parent_block_id,
                                                    uint64_t extra_key) const {
  if (!enable_caching_) return std::nullopt;
  auto it = cached_block_ids_.find(hash);
  if (it == cached_block_ids_.end()) return std::nullopt;
  for (int32_t id : it->second) {
    const KvBlock& block = blocks_[static_cast<size_t>(id)];
    const bool parent_ok =
        parent_block_id == kUnknownParentBlock ||
        (block.parent_id == parent_block_id &&
         (parent_block_id < 0 ||
          block.parent_generation == blocks_[static_cast<size_t>(parent_block_id)].generation));
    const auto stored = cached_tokens(id);
    if (parent_ok && block.extra_key == extra_key &&
        std::equal(stored.begin(), stored.end(), tokens.begin(), tokens.end())) {
      return id;
    }
    // NOTE(kvsched): with duplicates a parent mismatch is normal (another copy of the chain);
    // only a token or extra-key mismatch under the same parent is a true 64-bit collision.
    if (parent_ok) ++num_hash_collisions_;
  }
  return std::nullopt;
}

bool BlockPool::reset_prefix_cache() {
  for (const KvBlock& block : blocks_) {
    if (block.id != kNullBlockId && block.ref_cnt > 0) return false;
  }
  for (KvBlock& block : blocks_) {
    if (block.has_hash) drop_hash(block);
  }
  num_cached_free_ = 0;  // every block was free
  // One record for the whole reset (vLLM's AllBlocksCleared), not one kRemoved per block.
  events_.append({.kind = BlockEventKind::kAllCleared, .block_id = 0, .hash = 0, .has_parent = false,
                  .parent_hash = 0, .token_ids = {}});
  return true;
}

BlockPoolCounts BlockPool::check_integrity() const {
  BlockPoolCounts counts;
  const KvBlock& null_block = blocks_[kNullBlockId];
  TESSERA_CHECK(null_block.ref_cnt == 0 && !null_block.has_hash && !free_queue_.contains(kNullBlockId),
                "null block was handed out");
  int64_t num_hashed = 0;
  for (const KvBlock& block : blocks_) {
    if (block.id == kNullBlockId) continue;
    TESSERA_CHECK(block.ref_cnt >= 0, "block {} ref_cnt {}", block.id, block.ref_cnt);
    const bool queued = free_queue_.contains(block.id);
    TESSERA_CHECK(queued == (block.ref_cnt == 0), "block {} ref_cnt {} but queued={}", block.id,
                  block.ref_cnt, queued);
    if (block.ref_cnt > 0) {
      ++counts.num_used;
    } else if (block.has_hash) {
      ++counts.num_cached;
    } else {
      ++counts.num_free;
    }
    if (block.has_hash) {
      ++num_hashed;
      TESSERA_CHECK(enable_caching_, "block {} hashed with caching off", block.id);
      auto it = cached_block_ids_.find(block.hash);
      TESSERA_CHECK(it != cached_block_ids_.end() &&
                        std::count(it->second.begin(), it->second.end(), block.id) == 1,
                    "block {} hash {:#x} not mapped once", block.id, block.hash);
    }
  }
  int64_t num_mapped = 0;
  for (const auto& [hash, ids] : cached_block_ids_) {
    TESSERA_CHECK(!ids.empty(), "empty map entry {:#x}", hash);
    num_mapped += static_cast<int64_t>(ids.size());
  }
  TESSERA_CHECK(num_mapped == num_hashed, "map holds {} blocks, {} have a hash", num_mapped,
                num_hashed);
  TESSERA_CHECK(counts.num_free + counts.num_cached == free_queue_.size(),
                "queue holds {}, free {} + cached {}", free_queue_.size(), counts.num_free,
                counts.num_cached);
  TESSERA_CHECK(static_cast<int32_t>(free_queue_.to_vector().size()) == free_queue_.size(),
                "queue links broken");
  TESSERA_CHECK(1 + counts.num_free + counts.num_cached + counts.num_used == num_blocks(),
                "1 + {} + {} + {} != {}", counts.num_free, counts.num_cached, counts.num_used,
                num_blocks());
  const BlockPoolCounts kept = this->counts();
  TESSERA_CHECK(kept.num_free == counts.num_free && kept.num_cached == counts.num_cached &&
                    kept.num_used == counts.num_used,
                "kept counts free {} cached {} used {}, recounted {} {} {}", kept.num_free, kept.num_cached,
                kept.num_used, counts.num_free, counts.num_cached, counts.num_used);
  return counts;
}

}  // namespace tessera::kv
