#include "engine/engine_disk_tier.h"

#include <algorithm>
#include <cstdio>

#include "kv/block_hash.h"
#include "util/kv_dtype.h"

namespace tessera {

namespace {

// The namespace: everything that changes a block's bytes but not its tokens. The model by content
// (its file's bytes: weights, RoPE settings and every other key), not by path.
kv_disk::DiskKey namespace_of(const LlamaModel& model, const EngineConfigs& d, const KvStorage& storage, int32_t block_size) {
  kv_disk::NamespaceBuilder ns;
  ns.add("tessera kv disk tier").add(uint64_t{kv_disk::kBlockFileVersion});
  ns.add(kv_disk::hash_bytes(model.file().bytes()));
  ns.add(kv_dtype_name(d.kv_dtype)).add(static_cast<uint64_t>(block_size));
  ns.add(static_cast<uint64_t>(storage.block_payload_bytes())).add(static_cast<uint64_t>(d.kv_layout.num_slots));
  for (int32_t w : d.kv_layout.group_windows) ns.add(static_cast<uint64_t>(w));
  ns.add("layers");
  for (int32_t g : d.kv_layout.layer_group) ns.add(static_cast<uint64_t>(g));
  for (int32_t s : d.kv_layout.layer_slot) ns.add(static_cast<uint64_t>(s));
  return ns.build();
}

}  // namespace

std::unique_ptr<EngineDiskTier> EngineDiskTier::open(const EngineConfig& config, const LlamaModel& model,
                                                     const EngineConfigs& derived, const KvStorage& storage) {
  if (config.kv_cache_dir.empty()) return nullptr;
  kv_disk::DiskTierConfig tc;
  tc.store.dir = config.kv_cache_dir;
  tc.store.max_bytes = config.kv_cache_dir_bytes > 0 ? config.kv_cache_dir_bytes : defaults::kKvCacheDirBytes;
  tc.store.ns = namespace_of(model, derived, storage, config.block_size);
  tc.payload_bytes = storage.block_payload_bytes();
  tc.record_events = static_cast<bool>(config.on_kv_events);
  auto tier = kv_disk::DiskTier::open(tc);
  if (!tier) {
    std::fprintf(stderr, "tessera: warning: the KV disk tier is off: %s\n", tier.error().message.c_str());
    return nullptr;
  }
  std::unique_ptr<EngineDiskTier> out(new EngineDiskTier());
  out->tier_ = std::move(*tier);
  out->block_size_ = config.block_size;
  out->windows_ = derived.kv_layout.group_windows;
  // Per block: 10 us (page cache) to 1 s (a stalled disk).
  const std::vector<double> bounds = {1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0};
  out->read_seconds_ = Histogram::with_bounds(bounds);
  out->write_seconds_ = Histogram::with_bounds(bounds);
  if (out->windows_.empty()) out->windows_.push_back(0);
  return out;
}

bool EngineDiskTier::park(EngineMessage& msg, const sched::Scheduler& scheduler) {
  const kv::KvCacheManager& kv = scheduler.kv_cache();
  if (!tier_->enabled() || !kv.pool().enable_caching()) return false;
  const std::vector<int32_t>& prompt = *msg.request->prompt;
  const int32_t bs = block_size_;
  const auto max_blocks = static_cast<int32_t>((prompt.size() - 1) / static_cast<size_t>(bs));  // the hit cap
  const uint64_t salt = msg.request->cache_extra_key;
  std::vector<kv::BlockHash> hashes;
  kv::extend_block_hashes(hashes, prompt, bs, salt);
  const kv::SeqTokens view{msg.request_id, prompt, hashes, salt};
  const int32_t pool_hit = kv.get_computed_blocks(view).num_tokens;
  const int32_t first = pool_hit / bs;
  if (max_blocks <= first) return false;
  ++lookups_;
  const auto num_groups = static_cast<int32_t>(windows_.size());
  auto tokens_of = [&](int32_t b) {
    return std::span<const int32_t>(prompt).subspan(static_cast<size_t>(b) * static_cast<size_t>(bs), static_cast<size_t>(bs));
  };
  // keys[g][b]: block b's chain key in group g.
  std::vector<std::vector<kv_disk::DiskKey>> keys(static_cast<size_t>(num_groups));
  for (int32_t g = 0; g < num_groups; ++g) {
    kv_disk::DiskKey parent = kv_disk::kRootDiskKey;
    for (int32_t b = 0; b < max_blocks; ++b) {
      parent = kv_disk::chain_disk_key(parent, tokens_of(b), kv::block_extra_key(salt, static_cast<size_t>(b), g));
      keys[static_cast<size_t>(g)].push_back(parent);
    }
  }
  auto in_pool = [&](int32_t g, int32_t b) {
    if (windows_[static_cast<size_t>(g)] == 0) return b < first;
    return kv.pool()
        .find_cached_block(kv::group_key(hashes[static_cast<size_t>(b)], g), tokens_of(b), kv::kUnknownParentBlock,
                           kv::block_extra_key(salt, static_cast<size_t>(b), g))
        .has_value();
  };
  auto on_disk = [&](int32_t g, int32_t b) { return tier_->contains(keys[static_cast<size_t>(g)][static_cast<size_t>(b)]); };
  // Full groups: the chain continues on disk from the pool's hit.
  int32_t end = first;
  for (; end < max_blocks; ++end) {
    bool all = true;
    for (int32_t g = 0; g < num_groups && all; ++g) all = windows_[static_cast<size_t>(g)] != 0 || on_disk(g, end);
    if (!all) break;
  }
  // Sliding groups: a hit of `end` blocks needs each one's blocks covering its window's end.
  auto window_begin = [&](int32_t g, int32_t n) {
    const int32_t w = windows_[static_cast<size_t>(g)];
    return std::max(0, n * bs - w + 1) / bs;
  };
  for (; end > first; --end) {
    bool ok = true;
    for (int32_t g = 0; g < num_groups && ok; ++g) {
      if (windows_[static_cast<size_t>(g)] == 0) continue;
      for (int32_t b = window_begin(g, end); b < end && ok; ++b) ok = in_pool(g, b) || on_disk(g, b);
    }
    if (ok) break;
  }
  if (end <= first) return false;

  const int64_t id = msg.request_id;
  Parked& p = parked_[id];
  p.pool_hit_tokens = pool_hit;
  std::vector<kv_disk::ReadRequest> reads;
  for (int32_t g = 0; g < num_groups; ++g) {
    const bool sliding = windows_[static_cast<size_t>(g)] != 0;
    for (int32_t b = sliding ? window_begin(g, end) : first; b < end; ++b) {
      if (sliding && in_pool(g, b)) continue;
      kv_disk::ReadRequest r;
      r.ticket = id;
      r.index = static_cast<int32_t>(p.blocks.size());
      r.expected.ns = tier_->ns();
      r.expected.key = keys[static_cast<size_t>(g)][static_cast<size_t>(b)];
      r.expected.parent = b == 0 ? kv_disk::kRootDiskKey : keys[static_cast<size_t>(g)][static_cast<size_t>(b) - 1];
      r.expected.group = g;
      const auto t = tokens_of(b);
      r.expected.tokens.assign(t.begin(), t.end());
      reads.push_back(std::move(r));
      p.blocks.push_back({g, b});
    }
  }
  p.hashes = std::move(hashes);  // after the last in_pool(), which reads them
  p.reads = std::move(reads);
  p.payloads.resize(p.blocks.size());
  p.answered.assign(p.blocks.size(), 0);
  p.msg = std::move(msg);
  p.seq = {id, *p.msg.request->prompt, p.hashes, salt};
  return true;  // its reads are issued by ready() when it is its turn
}

void EngineDiskTier::issue_reads(const sched::Scheduler& scheduler) {
  const kv::KvCacheManager& kv = scheduler.kv_cache();
  // Allocatable blocks not yet spoken for by the issued requests' blocks still to import.
  int64_t free_blocks = kv.num_free_blocks();
  for (const auto& [id, p] : parked_) {
    if (p.issued) free_blocks -= static_cast<int64_t>(p.blocks.size()) - p.next_import;
  }
  std::vector<int64_t> waiting;
  for (auto& [id, p] : parked_) {
    if (p.issued) continue;
    // Its turn: nothing older still waits in the scheduler (preempted or not yet admitted), a
    // running slot is free, and the pool can take its blocks (or nothing runs that could free more).
    if (waiting.empty()) waiting = scheduler.waiting_ids();
    const bool older_waits = std::any_of(waiting.begin(), waiting.end(), [&](int64_t w) { return w < id; });
    const bool slot = scheduler.num_running() < scheduler.config().max_num_seqs;
    const bool room = free_blocks >= static_cast<int64_t>(p.blocks.size()) || scheduler.num_running() == 0;
    if (older_waits || !slot || !room) break;  // the younger ones wait behind it
    free_blocks -= static_cast<int64_t>(p.blocks.size());
    p.issued = true;
    p.num_pending = static_cast<int32_t>(p.reads.size());
    tier_->submit_reads(std::move(p.reads));
    p.reads = {};
  }
}

int32_t EngineDiskTier::import_landed(Parked& p, int32_t budget, sched::Scheduler& scheduler, KvStorage& storage) {
  const auto n = static_cast<int32_t>(p.blocks.size());
  int32_t end = p.next_import;
  while (end < n && end - p.next_import < budget && p.answered[static_cast<size_t>(end)] != 0) ++end;
  std::vector<kv::ImportBlock> blocks;
  std::vector<std::vector<uint8_t>*> payloads;
  for (int32_t i = p.next_import; i < end; ++i) {
    if (p.payloads[static_cast<size_t>(i)].empty()) continue;  // missing or corrupt: a full group's chain ends there
    blocks.push_back(p.blocks[static_cast<size_t>(i)]);
    payloads.push_back(&p.payloads[static_cast<size_t>(i)]);
  }
  // Earlier chunks are cached by now (or were evicted: the chain then stops, the rest is computed).
  const std::vector<int32_t> ids = scheduler.import_blocks(p.seq, blocks);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] != kv::kNullBlockId) {
      storage.copy_block_in(ids[i], payloads[i]->data());  // before the next schedule() can read it
      ++hit_blocks_;
    }
    tier_->recycle(std::move(*payloads[i]));
    *payloads[i] = {};
  }
  const int32_t done = end - p.next_import;
  p.next_import = end;
  return done;
}

std::vector<EngineMessage> EngineDiskTier::ready(sched::Scheduler& scheduler, KvStorage& storage) {
  std::vector<EngineMessage> out;
  if (parked_.empty()) return out;
  for (kv_disk::ReadResult& r : tier_->take_reads()) {
    auto it = parked_.find(r.ticket);
    if (it == parked_.end()) {  // aborted while its blocks were read
      tier_->recycle(std::move(r.payload));
      continue;
    }
    Parked& p = it->second;
    p.payloads[static_cast<size_t>(r.index)] = std::move(r.payload);
    p.answered[static_cast<size_t>(r.index)] = 1;
    --p.num_pending;
  }
  // At most this many blocks' bytes copied into the pool per engine loop (16 x 192 KiB = 3 MiB,
  // ~0.5 ms, a few % of a decode step): a long prefix loads over several steps instead of
  // stalling one (all 255 blocks of a 4k prompt at once: ~9 ms).
  constexpr int32_t kImportBudget = 16;
  int32_t budget = kImportBudget;
  for (auto it = parked_.begin(); it != parked_.end();) {
    Parked& p = it->second;
    if (!p.issued) break;  // the rest wait for their turn (issue_reads)
    if (budget > 0) budget -= import_landed(p, budget, scheduler, storage);
    if (p.num_pending > 0 || p.next_import < static_cast<int32_t>(p.blocks.size())) {
      ++it;
      continue;
    }
    const int32_t hit = scheduler.kv_cache().get_computed_blocks(p.seq).num_tokens;
    hit_tokens_ += std::max(0, hit - p.pool_hit_tokens);
    out.push_back(std::move(p.msg));
    it = parked_.erase(it);
  }
  issue_reads(scheduler);
  return out;
}

std::unique_ptr<ActiveRequest> EngineDiskTier::take_parked(int64_t request_id) {
  auto it = parked_.find(request_id);
  if (it == parked_.end()) return nullptr;
  std::unique_ptr<ActiveRequest> req = std::move(it->second.msg.request);
  parked_.erase(it);
  tier_->cancel_reads(request_id);  // its queued reads would only be thrown away (ticket = request id)
  return req;
}

std::vector<int64_t> EngineDiskTier::parked_ids() const {
  std::vector<int64_t> out;
  for (const auto& [id, p] : parked_) out.push_back(id);
  return out;
}

void EngineDiskTier::observe_pool_events(const std::vector<kv::BlockEvent>& events, const KvStorage& storage) {
  for (const kv::BlockEvent& e : events) {
    if (e.kind == kv::BlockEventKind::kAllCleared) {
      keys_.clear();
    } else if (e.kind == kv::BlockEventKind::kRemoved) {
      auto it = keys_.find(e.hash);
      if (it != keys_.end() && --it->second.count <= 0) keys_.erase(it);
    } else if (e.block_index >= 0) {
      kv_disk::DiskKey parent = kv_disk::kRootDiskKey;
      if (e.block_index > 0) {
        // The parent is cached (held by the same sequence) unless a sliding group released it:
        // without its key the block cannot be named, and is not written.
        auto it = e.has_parent ? keys_.find(e.parent_hash) : keys_.end();
        if (it == keys_.end()) continue;
        parent = it->second.key;
      }
      const kv_disk::DiskKey key = kv_disk::chain_disk_key(parent, e.token_ids, e.extra_key);
      KeyRef& ref = keys_[e.hash];
      ref.key = key;
      ++ref.count;
      if (!tier_->enabled() || tier_->contains(key)) continue;  // read from disk, or another writer's
      std::vector<uint8_t> payload(storage.block_payload_bytes());
      storage.copy_block_out(e.block_id, payload.data());
      kv_disk::BlockMeta meta{.ns = tier_->ns(), .key = key, .parent = parent, .group = e.group, .pool_hash = e.hash,
                              .pool_parent_hash = e.parent_hash, .has_pool_parent = e.has_parent, .tokens = e.token_ids};
      const int32_t window = windows_[static_cast<size_t>(e.group)];
      if (window == 0 || e.seq_id < 0) {
        tier_->submit_write(std::move(meta), std::move(payload));
        continue;
      }
      // Held back: dropped once it is behind the window of this sequence's newest block (keeping
      // two blocks of slack for a next turn's prompt ending a little earlier) unless the prompt's
      // end needs it.
      auto& groups = held_[e.seq_id];
      groups.resize(windows_.size());
      std::vector<Held>& held = groups[static_cast<size_t>(e.group)];
      held.push_back({e.block_index, std::move(meta), std::move(payload)});
      const int32_t bs = block_size_;
      const int32_t end_first = std::max(0, (e.block_index + 1) * bs - window + 1) / bs - 2;
      auto p = prompt_len_.find(e.seq_id);
      const int32_t prompt_hit = p == prompt_len_.end() ? -1 : (p->second - 1) / bs * bs;
      const int32_t prompt_first = prompt_hit < 0 ? -1 : std::max(0, prompt_hit - window + 1) / bs;
      std::erase_if(held, [&](const Held& h) {
        const bool in_prompt_window = prompt_hit >= 0 && h.block_index >= prompt_first && h.block_index * bs < prompt_hit;
        return h.block_index < end_first && !in_prompt_window;
      });
    }
  }
}

void EngineDiskTier::write_held(int64_t seq_id) {
  auto it = held_.find(seq_id);
  if (it != held_.end()) {
    for (std::vector<Held>& group : it->second) {
      for (Held& h : group) tier_->submit_write(std::move(h.meta), std::move(h.payload));
    }
    held_.erase(it);
  }
  prompt_len_.erase(seq_id);
}

void EngineDiskTier::end_sequences(std::span<const int64_t> seq_ids) {
  for (int64_t id : seq_ids) write_held(id);
}

void EngineDiskTier::end_all() {
  while (!held_.empty()) write_held(held_.begin()->first);
  prompt_len_.clear();
}

std::vector<KvCacheEvent> EngineDiskTier::drain_events() {
  std::vector<KvCacheEvent> out;
  for (kv_disk::DiskEvent& e : tier_->drain_events()) {
    KvCacheEvent ev;
    ev.kind = e.stored ? KvCacheEvent::Kind::kBlockStored : KvCacheEvent::Kind::kBlockRemoved;
    ev.medium = KvCacheEvent::Medium::kDisk;
    ev.block_hash = e.pool_hash;
    ev.parent_block_hash = e.parent_pool_hash;
    ev.token_ids = std::move(e.tokens);
    out.push_back(std::move(ev));
  }
  return out;
}

void EngineDiskTier::fill_metrics(MetricsSnapshot& m) const {
  const kv_disk::DiskTierStats s = tier_->stats();
  m.disk_tier_enabled = s.enabled;
  m.disk_lookups = lookups_.load();
  m.disk_hit_blocks = hit_blocks_.load();
  m.disk_hit_tokens = hit_tokens_.load();
  m.disk_writes = s.writes;
  m.disk_write_drops = s.write_drops;
  m.disk_write_errors = s.write_errors;
  m.disk_evictions = s.evictions;
  m.disk_corrupt_blocks = s.corrupt_blocks;
  m.disk_bytes_written = s.bytes_written;
  m.disk_bytes_read = s.bytes_read;
  m.disk_bytes = s.bytes_on_disk;
  m.disk_files = s.num_files;
  std::lock_guard<std::mutex> lock(latency_mutex_);
  const kv_disk::DiskLatencies lat = tier_->drain_latencies();
  for (double x : lat.read_seconds) read_seconds_.observe(x);
  for (double x : lat.write_seconds) write_seconds_.observe(x);
  m.disk_read_seconds = read_seconds_;
  m.disk_write_seconds = write_seconds_;
}

}  // namespace tessera
