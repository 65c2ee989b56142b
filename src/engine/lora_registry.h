// LoraRegistry: the LoRA adapters an engine serves, by name; any thread. A load reads and checks the
// file on the caller's thread (model/lora_adapter.h) and then publishes it under the lock, so a
// failed load changes nothing and a slow one blocks no request. A request takes a shared_ptr to
// the entry at submit (ActiveRequest::lora) and keeps it to its end: unload only removes the name,
// the weights go when the last request holding them ends (the refcount).
// A block's prefix-cache key names the adapter by its file's content (lora_cache_salt), not by its
// name or load order: a name loaded again from another file, a restarted server or another replica
// sharing the KV disk tier never finds another file's blocks, and the same file always finds its own.
// Each load also gets a generation (the KV events' lora_id).
#pragma once
#include <cstdint>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/block_events.h"

#include "model/lora_adapter.h"
#include "tessera/engine.h"

namespace tessera {

struct LoadedLora {
  std::shared_ptr<const LoraAdapter> adapter;
  uint64_t generation = 0;   // unique among this engine's loads
  std::string content_hash;  // XXH3-128 of the adapter file's bytes, hex
  LoraAdapterInfo info;
};

class LoraRegistry {
 public:
  LoraRegistry(const ModelConfig& base, const LoraLoadOptions& options) : base_(base), options_(options) {}

  Status load(const std::string& name, const std::string& path);
  Status unload(const std::string& name);
  // The entry of a loaded name, or null.
  std::shared_ptr<const LoadedLora> find(const std::string& name) const;
  std::vector<LoraAdapterInfo> list() const;  // by name
  // True when no adapter was ever loaded (a cheap per-step test).
  bool empty() const { return !ever_loaded_.load(std::memory_order_relaxed); }

 private:
  const ModelConfig& base_;
  LoraLoadOptions options_;  // rank cap and storage (EngineConfig::max_lora_rank, lora_dtype)
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const LoadedLora>> loaded_;
  uint64_t next_generation_ = 1;
  std::atomic<bool> ever_loaded_{false};
};

// Which adapter wrote each prefix-cache block, for the KV events' lora_name (vLLM's BlockStored field).
// A chain's first block carries the request's extra key (its salt with the adapter in it), so
//   note(extra keys of an adapted request, per KV-cache group, adapter)   at admission;
//   name(events) on each step's drained records: a kStored block whose extra key is noted, or whose
//   parent block was named, gets the adapter's name and generation; kRemoved forgets a copy.
//   The disk tier's events (after the records, medium kDisk) are named by the pool's name of the
//   same hash or by their parent's disk name; a disk kRemoved forgets it. Blocks written by an
//   earlier process or another replica stay unnamed (the files do not record the adapter).
// Engine thread only; kept only while KV events are on.
class LoraBlockNames {
 public:
  void note(uint64_t extra_key, const LoadedLora& lora) { by_key_[extra_key] = {lora.info.name, lora.generation, 0}; }
  // records[i] is events[i]'s record (kv_event_batch keeps the order); events past the records are
  // the disk tier's.
  void name(const std::vector<kv::BlockEvent>& records, std::vector<KvCacheEvent>& events);

 private:
  struct Name {
    std::string name;
    uint64_t id = 0;
    int32_t copies = 0;  // cached blocks with this hash (by_hash_ only)
  };
  std::unordered_map<uint64_t, Name> by_key_;   // extra key -> adapter
  std::unordered_map<uint64_t, Name> by_hash_;  // cached block hash -> adapter
  std::unordered_map<uint64_t, Name> on_disk_;  // disk-tier block (its pool hash) -> adapter
};

// The cache salt of a request's blocks: its tenant salt, and the adapter's name and generation
// when it runs one ("" stays "" for the base model: no isolation beyond the tenant's).
std::string lora_cache_salt(const std::string& cache_salt, const LoadedLora* lora);

}  // namespace tessera
