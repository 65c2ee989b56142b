// KV-cache events: what the prefix cache gained and lost, for a router that places requests where
// their prefix is cached (llm-d's precise prefix routing, Dynamo's KV router). The engine hands one
// KvEventBatch per step that changed the cache to EngineConfig::on_kv_events, on the engine thread;
// kv_events/ publishes them in vLLM's ZMQ + msgpack wire format.
//
// Only full blocks appear. A block's hash is the engine's chained prefix-cache hash (kv/block_hash.h:
// it names the block's whole prefix and cache salt); parent_block_hash chains a BlockStored block to
// the block before it (absent for a chain's first block). Each cached copy of a block is its own
// event: two copies of one hash give two BlockStored, and each copy's eviction its own BlockRemoved.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

struct KvCacheEvent {
  enum class Kind : uint8_t { kBlockStored, kBlockRemoved, kAllBlocksCleared };
  // Where the block is: the in-memory pool requests attend from (wire medium "CPU", see
  // kv_events/event_encoder.h), or the disk tier under it (serve --kv-cache-dir, wire "DISK").
  enum class Medium : uint8_t { kPool, kDisk };
  Kind kind = Kind::kBlockStored;
  uint64_t block_hash = 0;                     // kBlockStored / kBlockRemoved
  std::optional<uint64_t> parent_block_hash;   // kBlockStored: the previous block of the chain
  std::vector<int32_t> token_ids;              // kBlockStored: the block's [block_size] tokens
  Medium medium = Medium::kPool;               // kBlockStored / kBlockRemoved
  // kBlockStored: the LoRA adapter whose forward wrote the block ("" and 0 = the base model); the
  // id is the adapter's load generation (a name loaded again gets a new one).
  std::string lora_name = {};
  uint64_t lora_id = {};
};

struct KvEventBatch {
  double ts = 0.0;                     // seconds since the Unix epoch, when the step ended
  int32_t block_size = 0;              // tokens per block
  std::vector<KvCacheEvent> events;    // in the order the cache changed
};

}  // namespace tessera
