#include "kv/kv_cache_manager.h"

#include <algorithm>

#include "util/check.h"

namespace tessera::kv {

namespace {
uint64_t block_extra_key(const SeqTokens& seq, size_t b, int32_t group) {
  return kv::block_extra_key(seq.extra_key, b, group);
}
}  // namespace

KvCacheManager::KvCacheManager(const KvCacheConfig& config)
    : pool_(config.num_blocks, config.block_size, config.enable_prefix_caching) {
  pool_.set_record_events(config.record_block_events);
  for (const KvCacheGroupSpec& g : config.groups) {
    TESSERA_CHECK(g.sliding_window >= 0, "sliding window {}", g.sliding_window);
    windows_.push_back(g.sliding_window);
  }
  if (windows_.empty()) windows_.push_back(0);  // one full-attention group
}

int32_t KvCacheManager::num_blocks_for_tokens(int64_t num_tokens) const {
  return static_cast<int32_t>((num_tokens + block_size() - 1) / block_size());
}

int32_t KvCacheManager::num_releasable(int32_t group, int32_t num_computed) const {
  const int32_t window = windows_[static_cast<size_t>(group)];
  if (window == 0) return 0;
  // A query at p >= num_computed sees keys (p - W, p]: a block ending at or before
  // num_computed - W + 1 is seen by none.
  return std::max(0, num_computed - window + 1) / block_size();
}

std::span<const int32_t> KvCacheManager::hit_blocks(const PrefixHit& hit, int32_t group) const {
  const size_t n = static_cast<size_t>(hit.num_tokens / block_size());
  if (hit.block_ids.empty()) return {};
  return std::span<const int32_t>(hit.block_ids).subspan(static_cast<size_t>(group) * n, n);
}

PrefixHit KvCacheManager::get_computed_blocks(const SeqTokens& seq) const {
  PrefixHit hit;
  hit.num_query_tokens = static_cast<int32_t>(seq.token_ids.size());
  if (!pool_.enable_caching() || seq.token_ids.empty()) return hit;
  const int32_t bs = block_size();
  const int32_t max_blocks = static_cast<int32_t>(std::min(
      (seq.token_ids.size() - 1) / static_cast<size_t>(bs), seq.block_hashes.size()));
  std::vector<int32_t> scratch;  // the block where prompt and output meet, if any
  auto lookup = [&](int32_t g, int32_t b, int32_t parent) {
    const size_t i = static_cast<size_t>(b);
    return pool_.find_cached_block(group_key(seq.block_hashes[i], g),
                                   seq.token_ids.range(i * static_cast<size_t>(bs), static_cast<size_t>(bs), scratch),
                                   parent, block_extra_key(seq, i, g));
  };
  const int32_t num_groups_ = num_groups();
  // found[g][b]: a verified cached block for block b of group g, else kNullBlockId.
  std::vector<std::vector<int32_t>> found(static_cast<size_t>(num_groups_),
                                          std::vector<int32_t>(static_cast<size_t>(max_blocks), kNullBlockId));
  int32_t limit = max_blocks;
  for (int32_t g = 0; g < num_groups_; ++g) {  // full groups: the verified chain from block 0
    if (sliding_window(g) != 0) continue;
    int32_t parent = kNoParentBlock;
    int32_t b = 0;
    for (; b < limit; ++b) {
      auto id = lookup(g, b, parent);
      if (!id) break;
      found[static_cast<size_t>(g)][static_cast<size_t>(b)] = parent = *id;
    }
    limit = b;
  }
  // Sliding groups: run_start[g][b] = first block of the run of found blocks ending at b, or -1.
  // A block is verified against its parent when the parent was found, else by hash + tokens + key.
  std::vector<std::vector<int32_t>> run_start(static_cast<size_t>(num_groups_));
  for (int32_t g = 0; g < num_groups_; ++g) {
    if (sliding_window(g) == 0) continue;
    auto& runs = run_start[static_cast<size_t>(g)];
    runs.assign(static_cast<size_t>(limit), -1);
    int32_t prev = kNullBlockId;
    for (int32_t b = 0; b < limit; ++b) {
      const int32_t parent = b == 0 ? kNoParentBlock : prev != kNullBlockId ? prev : kUnknownParentBlock;
      auto id = lookup(g, b, parent);
      if (!id && parent >= 0) id = lookup(g, b, kUnknownParentBlock);  // another copy of the chain
      prev = id ? *id : kNullBlockId;
      if (!id) continue;
      found[static_cast<size_t>(g)][static_cast<size_t>(b)] = *id;
      runs[static_cast<size_t>(b)] = b > 0 && runs[static_cast<size_t>(b) - 1] >= 0 ? runs[static_cast<size_t>(b) - 1] : b;
    }
  }
  int32_t n = limit;  // the longest L = n x bs every sliding group covers
  for (; n > 0; --n) {
    bool ok = true;
    for (int32_t g = 0; g < num_groups_ && ok; ++g) {
      if (sliding_window(g) == 0) continue;
      const int32_t first = num_releasable(g, n * bs);
      ok = first >= n || (run_start[static_cast<size_t>(g)][static_cast<size_t>(n) - 1] >= 0 &&
                          run_start[static_cast<size_t>(g)][static_cast<size_t>(n) - 1] <= first);
    }
    if (ok) break;
  }
  hit.num_tokens = n * bs;
  for (int32_t g = 0; g < num_groups_; ++g) {
    const int32_t first = num_releasable(g, n * bs);
    for (int32_t b = 0; b < n; ++b) {
      hit.block_ids.push_back(b < first ? kNullBlockId : found[static_cast<size_t>(g)][static_cast<size_t>(b)]);
    }
  }
  return hit;
}

void KvCacheManager::release(GroupTable& t, int32_t to) {
  if (to <= t.num_released) return;
  std::vector<int32_t> blocks(t.block_ids.begin() + t.num_released, t.block_ids.begin() + to);
  std::reverse(blocks.begin(), blocks.end());  // tail first: the chain's tail is evicted first
  pool_.free_blocks(blocks);
  std::fill(t.block_ids.begin() + t.num_released, t.block_ids.begin() + to, kNullBlockId);
  num_window_releases_ += to - t.num_released;
  t.num_released = to;
}

std::optional<SlotAllocation> KvCacheManager::allocate_slots(int64_t seq_id,
                                                             int32_t num_computed_tokens,
                                                             int32_t num_new_tokens,
                                                             const PrefixHit* prefix_hit) {
  TESSERA_CHECK(num_computed_tokens >= 0 && num_new_tokens >= 0, "computed {} new {}",
                num_computed_tokens, num_new_tokens);
  const int32_t num_groups_ = num_groups();
  auto it = tables_.find(seq_id);
  const SeqState* current = it == tables_.end() ? nullptr : &it->second;
  auto table_of = [&](int32_t g) -> std::span<const int32_t> {
    if (current == nullptr || current->groups.empty()) return {};
    return current->groups[static_cast<size_t>(g)].block_ids;
  };
  if (prefix_hit != nullptr) {
    TESSERA_CHECK(table_of(0).empty(), "prefix hit for sequence {} that already holds blocks", seq_id);
    TESSERA_CHECK(prefix_hit->num_tokens == num_computed_tokens &&
                      prefix_hit->block_ids.size() ==
                          static_cast<size_t>(num_groups_) * static_cast<size_t>(prefix_hit->num_tokens / block_size()) &&
                      prefix_hit->num_tokens % block_size() == 0,
                  "hit of {} tokens, computed {}", prefix_hit->num_tokens, num_computed_tokens);
  }
  const int32_t num_needed = num_blocks_for_tokens(int64_t{num_computed_tokens} + num_new_tokens);
  const int32_t first_written = num_computed_tokens / block_size();

  // Count what every group takes from the queue, and what its window release gives back.
  std::vector<std::vector<int32_t>> cow_indices(static_cast<size_t>(num_groups_));
  int32_t num_from_queue = 0;
  int32_t num_returned = 0;
  int32_t num_new_blocks = 0;
  for (int32_t g = 0; g < num_groups_; ++g) {
    const auto table = table_of(g);
    const auto hit = prefix_hit != nullptr ? hit_blocks(*prefix_hit, g) : std::span<const int32_t>{};
    const int32_t num_held = static_cast<int32_t>(table.size() + hit.size());
    num_new_blocks = std::max(0, num_needed - num_held);  // the same in every group
    // Blocks written this step that are shared with another table must be copied first.
    if (num_new_tokens > 0) {
      for (int32_t b = first_written; b < std::min<int32_t>(static_cast<int32_t>(table.size()), num_needed); ++b) {
        if (pool_.block(table[static_cast<size_t>(b)]).ref_cnt > 1) cow_indices[static_cast<size_t>(g)].push_back(b);
      }
    }
    for (int32_t id : hit) num_from_queue += id != kNullBlockId && pool_.block(id).ref_cnt == 0 ? 1 : 0;
    num_from_queue += num_new_blocks + static_cast<int32_t>(cow_indices[static_cast<size_t>(g)].size());
    if (current != nullptr && !current->groups.empty()) {
      const GroupTable& t = current->groups[static_cast<size_t>(g)];
      const int32_t to = std::min(num_releasable(g, num_computed_tokens), static_cast<int32_t>(table.size()));
      for (int32_t b = t.num_released; b < to; ++b) num_returned += pool_.block(table[static_cast<size_t>(b)]).ref_cnt == 1 ? 1 : 0;
    }
  }
  if (num_from_queue > pool_.num_free_blocks() + num_returned) return std::nullopt;

  SeqState& state = tables_[seq_id];
  state.groups.resize(static_cast<size_t>(num_groups_));
  if (prefix_hit != nullptr) {
    for (int32_t g = 0; g < num_groups_; ++g) {
      GroupTable& t = state.groups[static_cast<size_t>(g)];
      const auto hit = hit_blocks(*prefix_hit, g);
      t.block_ids.assign(hit.begin(), hit.end());
      t.num_cached_blocks = static_cast<int32_t>(hit.size());
      t.num_released = std::min(num_releasable(g, num_computed_tokens), t.num_cached_blocks);
      // Before get_new_blocks, so a hit block is not evicted under us.
      for (int32_t id : hit) {
        if (id != kNullBlockId) pool_.touch(std::span<const int32_t>(&id, 1));
      }
    }
    if (pool_.enable_caching()) {
      prefix_query_tokens_ += prefix_hit->num_query_tokens;
      prefix_hit_tokens_ += prefix_hit->num_tokens;
    }
  }
  for (int32_t g = 0; g < num_groups_; ++g) {  // window releases first: they refill the queue
    GroupTable& t = state.groups[static_cast<size_t>(g)];
    release(t, std::min(num_releasable(g, num_computed_tokens), static_cast<int32_t>(t.block_ids.size())));
  }
  SlotAllocation out;
  for (int32_t g = 0; g < num_groups_; ++g) {
    GroupTable& t = state.groups[static_cast<size_t>(g)];
    for (int32_t b : cow_indices[static_cast<size_t>(g)]) {
      int32_t& slot = t.block_ids[static_cast<size_t>(b)];
      const int32_t src = slot;
      const int32_t dst = pool_.get_new_blocks(1).front();
      const int32_t one[1] = {src};
      pool_.free_blocks(one);  // src stays held by the other tables (ref_cnt was > 1)
      slot = dst;
      out.cow_copies.push_back({src, dst, g});
      ++num_cow_copies_;
    }
    const std::vector<int32_t> fresh = pool_.get_new_blocks(num_new_blocks);
    t.block_ids.insert(t.block_ids.end(), fresh.begin(), fresh.end());
    out.new_block_ids.insert(out.new_block_ids.end(), fresh.begin(), fresh.end());
  }
  return out;
}

void KvCacheManager::cache_blocks(const SeqTokens& seq, int32_t num_computed_tokens) {
  if (!pool_.enable_caching()) return;
  auto it = tables_.find(seq.seq_id);
  if (it == tables_.end()) return;
  const int32_t bs = block_size();
  std::vector<int32_t> scratch;  // the block where prompt and output meet, if any
  for (int32_t g = 0; g < num_groups(); ++g) {
    GroupTable& t = it->second.groups[static_cast<size_t>(g)];
    const int32_t num_full = std::min<int32_t>(
        std::min<int32_t>(num_computed_tokens, static_cast<int32_t>(seq.token_ids.size())) / bs,
        static_cast<int32_t>(t.block_ids.size()));
    TESSERA_CHECK(static_cast<int32_t>(seq.block_hashes.size()) >= num_full,
                  "sequence {} has {} hashes for {} full blocks", seq.seq_id, seq.block_hashes.size(),
                  num_full);
    for (int32_t b = t.num_cached_blocks; b < num_full; ++b) {
      const size_t i = static_cast<size_t>(b);
      if (t.block_ids[i] == kNullBlockId) continue;  // released before it was offered
      const int32_t parent = b == 0                                 ? kNoParentBlock
                             : t.block_ids[i - 1] != kNullBlockId ? t.block_ids[i - 1]
                                                                    : kUnknownParentBlock;
      pool_.cache_full_block(t.block_ids[i], group_key(seq.block_hashes[i], g),
                             seq.token_ids.range(i * static_cast<size_t>(bs), static_cast<size_t>(bs), scratch),
                             parent, block_extra_key(seq, i, g), g, b, seq.seq_id);
    }
    t.num_cached_blocks = std::max(t.num_cached_blocks, num_full);
  }
}

std::vector<int32_t> KvCacheManager::import_blocks(const SeqTokens& seq, std::span<const ImportBlock> blocks) {
  std::vector<int32_t> out(blocks.size(), kNullBlockId);
  if (!pool_.enable_caching() || blocks.empty()) return out;
  const int32_t bs = block_size();
  std::vector<int32_t> scratch;
  auto tokens_of = [&](int32_t b) {
    return seq.token_ids.range(static_cast<size_t>(b) * static_cast<size_t>(bs), static_cast<size_t>(bs), scratch);
  };
  auto lookup = [&](int32_t g, int32_t b, int32_t parent) {
    return pool_.find_cached_block(group_key(seq.block_hashes[static_cast<size_t>(b)], g), tokens_of(b), parent,
                                   block_extra_key(seq, static_cast<size_t>(b), g));
  };
  std::vector<int32_t> held;  // blocks this call holds (found ones touched, new ones), freed at the end
  auto hold = [&](int32_t id) {
    pool_.touch(std::span<const int32_t>(&id, 1));
    held.push_back(id);
  };
  // A new block for (g, b) chained to `parent`; kNullBlockId when the pool has no free block.
  auto enter = [&](int32_t g, int32_t b, int32_t parent) {
    if (pool_.num_free_blocks() == 0) return kNullBlockId;
    const int32_t id = pool_.get_new_blocks(1).front();
    held.push_back(id);
    pool_.cache_full_block(id, group_key(seq.block_hashes[static_cast<size_t>(b)], g), tokens_of(b), parent,
                           block_extra_key(seq, static_cast<size_t>(b), g), g, b);
    return id;
  };
  const auto max_index = static_cast<int32_t>(std::min(seq.block_hashes.size(), seq.token_ids.size() / static_cast<size_t>(bs)));
  for (size_t i = 0; i < blocks.size();) {
    const int32_t g = blocks[i].group;
    size_t end = i;
    while (end < blocks.size() && blocks[end].group == g) ++end;
    if (sliding_window(g) == 0) {  // the verified chain from block 0
      int32_t parent = kNoParentBlock;
      size_t next = i;  // next import of this group
      for (int32_t b = 0; next < end && b <= blocks[end - 1].index && b < max_index; ++b) {
        const bool wanted = blocks[next].index == b;
        int32_t id = kNullBlockId;
        if (auto found = lookup(g, b, parent)) {
          id = *found;
          hold(id);
        } else if (wanted) {
          id = out[next] = enter(g, b, parent);
        }
        if (wanted) ++next;
        if (id == kNullBlockId) break;
        parent = id;
      }
    } else {
      int32_t prev_index = -2;
      int32_t prev_id = kNullBlockId;
      for (size_t k = i; k < end; ++k) {
        const int32_t b = blocks[k].index;
        if (b >= max_index) break;
        const int32_t parent = b == 0 ? kNoParentBlock : prev_index == b - 1 && prev_id != kNullBlockId ? prev_id
                                                                                                        : kUnknownParentBlock;
        std::optional<int32_t> found = lookup(g, b, parent);
        if (!found && parent >= 0) found = lookup(g, b, kUnknownParentBlock);
        if (found) {
          hold(*found);
          prev_id = *found;
        } else {
          prev_id = out[k] = enter(g, b, parent);
        }
        prev_index = b;
      }
    }
    i = end;
  }
  std::reverse(held.begin(), held.end());  // tail first: the chain's tail is evicted first
  pool_.free_blocks(held);
  return out;
}

void KvCacheManager::fork(int64_t parent_id, int64_t child_id) {
  auto it = tables_.find(parent_id);
  TESSERA_CHECK(it != tables_.end(), "fork of unknown sequence {}", parent_id);
  TESSERA_CHECK(!contains(child_id), "fork into existing sequence {}", child_id);
  SeqState child = it->second;
  for (const GroupTable& t : child.groups) {
    for (int32_t id : t.block_ids) {
      if (id != kNullBlockId) pool_.touch(std::span<const int32_t>(&id, 1));
    }
  }
  tables_.emplace(child_id, std::move(child));
}

void KvCacheManager::truncate(int64_t seq_id, int32_t num_tokens) {
  auto it = tables_.find(seq_id);
  if (it == tables_.end()) return;
  const int32_t keep = num_blocks_for_tokens(num_tokens);
  for (int32_t g = 0; g < num_groups(); ++g) {
    GroupTable& t = it->second.groups[static_cast<size_t>(g)];
    if (keep >= static_cast<int32_t>(t.block_ids.size())) continue;
    TESSERA_CHECK(t.num_released <= num_releasable(g, num_tokens),
                  "truncating sequence {} to {} tokens cuts into group {}'s released blocks", seq_id,
                  num_tokens, g);
    std::vector<int32_t> dropped(t.block_ids.begin() + keep, t.block_ids.end());
    std::reverse(dropped.begin(), dropped.end());
    pool_.free_blocks(dropped);
    t.block_ids.resize(static_cast<size_t>(keep));
    t.num_cached_blocks = std::min(t.num_cached_blocks, keep);
  }
}

void KvCacheManager::free(int64_t seq_id) {
  auto it = tables_.find(seq_id);
  if (it == tables_.end()) return;
  std::vector<GroupTable> groups = std::move(it->second.groups);
  tables_.erase(it);
  for (GroupTable& t : groups) {
    std::vector<int32_t> blocks(t.block_ids.begin() + t.num_released, t.block_ids.end());
    std::reverse(blocks.begin(), blocks.end());
    pool_.free_blocks(blocks);
  }
}

std::span<const int32_t> KvCacheManager::block_table(int64_t seq_id, int32_t group) const {
  auto it = tables_.find(seq_id);
  if (it == tables_.end() || it->second.groups.empty()) return {};
  return it->second.groups.at(static_cast<size_t>(group)).block_ids;
}

int32_t KvCacheManager::num_blocks_held(int64_t seq_id) const {
  auto it = tables_.find(seq_id);
  if (it == tables_.end()) return 0;
  int32_t n = 0;
  for (const GroupTable& t : it->second.groups) n += static_cast<int32_t>(t.block_ids.size()) - t.num_released;
  return n;
}

KvCacheStats KvCacheManager::stats() const {
  KvCacheStats s;
  const BlockPoolCounts counts = pool_.counts();  // O(1): the engine reads stats every step
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
  s.num_window_releases = num_window_releases_;
  s.group_blocks_used.assign(static_cast<size_t>(num_groups()), 0);
  if (num_groups() == 1) {  // one group holds every used block
    s.group_blocks_used[0] = counts.num_used;
    return s;
  }
  std::vector<char> seen(static_cast<size_t>(pool_.num_blocks()), 0);
  for (const auto& [id, state] : tables_) {
    for (size_t g = 0; g < state.groups.size(); ++g) {
      for (int32_t block : state.groups[g].block_ids) {
        if (block == kNullBlockId || seen[static_cast<size_t>(block)] != 0) continue;
        seen[static_cast<size_t>(block)] = 1;
        ++s.group_blocks_used[g];
      }
    }
  }
  return s;
}

void KvCacheManager::check_integrity() const {
  pool_.check_integrity();
  std::vector<int32_t> refs(static_cast<size_t>(pool_.num_blocks()), 0);
  std::vector<int32_t> owner(static_cast<size_t>(pool_.num_blocks()), -1);  // group of each block
  for (const auto& [id, state] : tables_) {
    TESSERA_CHECK(state.groups.size() == static_cast<size_t>(num_groups()), "sequence {} has {} groups",
                  id, state.groups.size());
    for (int32_t g = 0; g < num_groups(); ++g) {
      const GroupTable& t = state.groups[static_cast<size_t>(g)];
      const int32_t size = static_cast<int32_t>(t.block_ids.size());
      TESSERA_CHECK(size == static_cast<int32_t>(state.groups[0].block_ids.size()),
                    "sequence {} group {} has {} blocks, group 0 {}", id, g, size,
                    state.groups[0].block_ids.size());
      TESSERA_CHECK(t.num_cached_blocks <= size && t.num_released <= size &&
                        (sliding_window(g) != 0 || t.num_released == 0),
                    "sequence {} group {} cached {} released {} of {} blocks", id, g,
                    t.num_cached_blocks, t.num_released, size);
      for (int32_t b = 0; b < size; ++b) {
        const int32_t block = t.block_ids[static_cast<size_t>(b)];
        if (b < t.num_released) {
          TESSERA_CHECK(block == kNullBlockId, "sequence {} group {} released entry {} holds {}", id, g, b, block);
          continue;
        }
        TESSERA_CHECK(block > kNullBlockId && block < pool_.num_blocks(), "sequence {} holds block {}", id, block);
        int32_t& o = owner[static_cast<size_t>(block)];
        TESSERA_CHECK(o == -1 || o == g, "block {} is in groups {} and {}", block, o, g);
        o = g;
        ++refs[static_cast<size_t>(block)];
      }
    }
  }
  for (int32_t b = 1; b < pool_.num_blocks(); ++b) {
    TESSERA_CHECK(refs[static_cast<size_t>(b)] == pool_.block(b).ref_cnt,
                  "block {} ref_cnt {} but {} tables hold it", b, pool_.block(b).ref_cnt,
                  refs[static_cast<size_t>(b)]);
  }
}

}  // namespace tessera::kv
