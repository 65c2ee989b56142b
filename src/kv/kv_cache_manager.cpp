#include "kv/kv_cache_manager.h"

#include <algorithm>

#include "util/check.h"

namespace tessera::kv {

KvCacheManager::KvCacheManager(const KvCacheConfig& config)
    : pool_(config.num_blocks, config.block_size, config.enable_prefix_caching) {
  pool_.set_record_events(config.record_block_events);
}

int32_t KvCacheManager::num_blocks_for_tokens(int64_t num_tokens) const {
  return static_cast<int32_t>((num_tokens + block_size() - 1) / block_size());
}

PrefixHit KvCacheManager::get_computed_blocks(const SeqTokens& seq) const {
  PrefixHit hit;
  hit.num_query_tokens = static_cast<int32_t>(seq.token_ids.size());
  if (!pool_.enable_caching() || seq.token_ids.empty()) return hit;
  const int32_t bs = block_size();
  const size_t max_blocks = std::min((seq.token_ids.size() - 1) / static_cast<size_t>(bs),
                                     seq.block_hashes.size());
  int32_t parent = kNoParentBlock;
  std::vector<int32_t> scratch;  // the block where prompt and output meet, if any
  for (size_t b = 0; b < max_blocks; ++b) {
    const auto tokens = seq.token_ids.range(b * static_cast<size_t>(bs), static_cast<size_t>(bs), scratch);
    auto id = pool_.find_cached_block(seq.block_hashes[b], tokens, parent,
                                      b == 0 ? seq.extra_key : 0);
    if (!id) break;
    hit.block_ids.push_back(*id);
    parent = *id;
  }
  hit.num_tokens = static_cast<int32_t>(hit.block_ids.size()) * bs;
  return hit;
}

std::optional<SlotAllocation> KvCacheManager::allocate_slots(int64_t seq_id,
                                                             int32_t num_computed_tokens,
                                                             int32_t num_new_tokens,
                                                             const PrefixHit* prefix_hit) {
  TESSERA_CHECK(num_computed_tokens >= 0 && num_new_tokens >= 0, "computed {} new {}",
                num_computed_tokens, num_new_tokens);
  auto it = tables_.find(seq_id);
  const std::vector<int32_t> no_blocks;
  const std::vector<int32_t>& table = it == tables_.end() ? no_blocks : it->second.block_ids;
  std::span<const int32_t> hit_blocks;
  if (prefix_hit != nullptr) {
    TESSERA_CHECK(table.empty(), "prefix hit for sequence {} that already holds blocks", seq_id);
    TESSERA_CHECK(prefix_hit->num_tokens == num_computed_tokens &&
                      prefix_hit->num_tokens ==
                          static_cast<int32_t>(prefix_hit->block_ids.size()) * block_size(),
                  "hit of {} tokens, computed {}", prefix_hit->num_tokens, num_computed_tokens);
    hit_blocks = prefix_hit->block_ids;
  }
  const int32_t num_held = static_cast<int32_t>(table.size() + hit_blocks.size());
  const int32_t num_needed = num_blocks_for_tokens(int64_t{num_computed_tokens} + num_new_tokens);
  const int32_t num_new_blocks = std::max(0, num_needed - num_held);

  // Blocks written this step that are shared with another table must be copied first.
  std::vector<int32_t> cow_indices;
  const int32_t first_written = num_computed_tokens / block_size();
  if (num_new_tokens > 0) {
    for (int32_t b = first_written; b < std::min<int32_t>(num_held, num_needed); ++b) {
      if (b >= static_cast<int32_t>(table.size())) break;  // hit blocks are never written
      if (pool_.block(table[static_cast<size_t>(b)]).ref_cnt > 1) cow_indices.push_back(b);
    }
  }
  int32_t num_hit_from_queue = 0;
  for (int32_t id : hit_blocks) num_hit_from_queue += pool_.block(id).ref_cnt == 0 ? 1 : 0;
  const int32_t num_from_queue =
      num_new_blocks + static_cast<int32_t>(cow_indices.size()) + num_hit_from_queue;
  if (num_from_queue > pool_.num_free_blocks()) return std::nullopt;

  SeqState& state = tables_[seq_id];
  if (prefix_hit != nullptr) {
    pool_.touch(hit_blocks);  // before get_new_blocks, so a hit block is not evicted under us
    state.block_ids.assign(hit_blocks.begin(), hit_blocks.end());
    state.num_cached_blocks = static_cast<int32_t>(hit_blocks.size());
    if (pool_.enable_caching()) {
      prefix_query_tokens_ += prefix_hit->num_query_tokens;
      prefix_hit_tokens_ += prefix_hit->num_tokens;
    }
  }
  SlotAllocation out;
  for (int32_t b : cow_indices) {
    int32_t& slot = state.block_ids[static_cast<size_t>(b)];
    const int32_t src = slot;
    const int32_t dst = pool_.get_new_blocks(1).front();
    const int32_t one[1] = {src};
    pool_.free_blocks(one);  // src stays held by the other tables (ref_cnt was > 1)
    slot = dst;
    out.cow_copies.push_back({src, dst});
    ++num_cow_copies_;
  }
  out.new_block_ids = pool_.get_new_blocks(num_new_blocks);
  state.block_ids.insert(state.block_ids.end(), out.new_block_ids.begin(), out.new_block_ids.end());
  return out;
}

void KvCacheManager::cache_blocks(const SeqTokens& seq, int32_t num_computed_tokens) {
  if (!pool_.enable_caching()) return;
  auto it = tables_.find(seq.seq_id);
  if (it == tables_.end()) return;
  SeqState& state = it->second;
  const int32_t bs = block_size();
  const int32_t num_full = std::min<int32_t>(
      std::min<int32_t>(num_computed_tokens, static_cast<int32_t>(seq.token_ids.size())) / bs,
      static_cast<int32_t>(state.block_ids.size()));
  TESSERA_CHECK(static_cast<int32_t>(seq.block_hashes.size()) >= num_full,
                "sequence {} has {} hashes for {} full blocks", seq.seq_id, seq.block_hashes.size(),
                num_full);
  std::vector<int32_t> scratch;  // the block where prompt and output meet, if any
  for (int32_t b = state.num_cached_blocks; b < num_full; ++b) {
    pool_.cache_full_block(state.block_ids[static_cast<size_t>(b)],
                           seq.block_hashes[static_cast<size_t>(b)],
                           seq.token_ids.range(static_cast<size_t>(b) * bs, static_cast<size_t>(bs), scratch),
                           b == 0 ? kNoParentBlock : state.block_ids[static_cast<size_t>(b) - 1],
                           b == 0 ? seq.extra_key : 0);
  }
  state.num_cached_blocks = std::max(state.num_cached_blocks, num_full);
}

void KvCacheManager::fork(int64_t parent_id, int64_t child_id) {
  auto it = tables_.find(parent_id);
  TESSERA_CHECK(it != tables_.end(), "fork of unknown sequence {}", parent_id);
  TESSERA_CHECK(!contains(child_id), "fork into existing sequence {}", child_id);
  SeqState child = it->second;
  pool_.touch(child.block_ids);
  tables_.emplace(child_id, std::move(child));
}

void KvCacheManager::truncate(int64_t seq_id, int32_t num_tokens) {
  auto it = tables_.find(seq_id);
  if (it == tables_.end()) return;
  SeqState& state = it->second;
  const size_t keep = static_cast<size_t>(num_blocks_for_tokens(num_tokens));
  if (keep >= state.block_ids.size()) return;
  std::vector<int32_t> dropped(state.block_ids.begin() + static_cast<ptrdiff_t>(keep),
                               state.block_ids.end());
  std::reverse(dropped.begin(), dropped.end());
  pool_.free_blocks(dropped);
  state.block_ids.resize(keep);
  state.num_cached_blocks = std::min(state.num_cached_blocks, static_cast<int32_t>(keep));
}

void KvCacheManager::free(int64_t seq_id) {
  auto it = tables_.find(seq_id);
  if (it == tables_.end()) return;
  std::vector<int32_t> blocks = std::move(it->second.block_ids);
  tables_.erase(it);
  std::reverse(blocks.begin(), blocks.end());
  pool_.free_blocks(blocks);
}

std::span<const int32_t> KvCacheManager::block_table(int64_t seq_id) const {
  auto it = tables_.find(seq_id);
  if (it == tables_.end()) return {};
  return it->second.block_ids;
}

KvCacheStats KvCacheManager::stats() const {
  KvCacheStats s;
  const BlockPoolCounts counts = pool_.check_integrity();
  s.num_blocks_total = num_usable_blocks();
  s.num_blocks_free = counts.num_free;
  s.num_blocks_cached = counts.num_cached;
  s.num_blocks_used = counts.num_used;
  s.usage = static_cast<double>(counts.num_used) / static_cast<double>(s.num_blocks_total);
  s.prefix_query_tokens = prefix_query_tokens_;
  s.prefix_hit_tokens = prefix_hit_tokens_;
  s.num_evictions = pool_.num_evictions();
  s.num_cow_copies = num_cow_copies_;
  s.num_hash_collisions = pool_.num_hash_collisions();
  return s;
}

void KvCacheManager::check_integrity() const {
  pool_.check_integrity();
  std::vector<int32_t> refs(static_cast<size_t>(pool_.num_blocks()), 0);
  for (const auto& [id, state] : tables_) {
    TESSERA_CHECK(state.num_cached_blocks <= static_cast<int32_t>(state.block_ids.size()),
                  "sequence {} cached {} of {} blocks", id, state.num_cached_blocks,
                  state.block_ids.size());
    for (int32_t block : state.block_ids) {
      TESSERA_CHECK(block > kNullBlockId && block < pool_.num_blocks(),
                    "sequence {} holds block {}", id, block);
      ++refs[static_cast<size_t>(block)];
    }
  }
  for (int32_t b = 1; b < pool_.num_blocks(); ++b) {
    TESSERA_CHECK(refs[static_cast<size_t>(b)] == pool_.block(b).ref_cnt,
                  "block {} ref_cnt {} but {} tables hold it", b, pool_.block(b).ref_cnt,
                  refs[static_cast<size_t>(b)]);
  }
}

}  // namespace tessera::kv
