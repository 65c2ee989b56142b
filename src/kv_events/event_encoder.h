// The wire format of KV-cache events, vLLM's (vllm/distributed/kv_events.py, the array layout that
// llm-d's kv-cache manager and Dynamo's KV router decode). One ZeroMQ multipart message per batch:
//
//   frame 0  topic             "kv@<instance>@<model>" (UTF-8)
//   frame 1  sequence number   8 bytes, big-endian unsigned, 0, 1, 2, ... per publisher
//   frame 2  payload           msgpack: [ts, [event, ...], data_parallel_rank]
//
// with each event a tagged array (tag first, then the fields in vLLM's declaration order):
//
//   ["BlockStored", [hash], parent_hash | nil, [token ids], block_size, lora_id = nil,
//    medium = "CPU", lora_name = nil]
//   ["BlockRemoved", [hash], medium = "CPU"]
//   ["AllBlocksCleared"]
//
// Hashes are unsigned 64-bit integers (vLLM's integer block hashes). One block per event: a router
// reads a multi-block BlockStored the same way as its blocks one by one. medium names where the block
// lives (vLLM's field: "GPU" for device memory, "CPU" for host memory, "DISK" for a disk tier):
// tessera's pool is host memory, so its blocks carry "CPU", and the blocks of the disk tier
// (serve --kv-cache-dir) "DISK" (KvCacheEvent::medium). ts is a
// float64 of seconds since the Unix epoch; data_parallel_rank is 0 (one engine per process).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/kv_events.h"

namespace tessera::kv_events {

// The msgpack payload of one batch (frame 2).
std::string encode_event_batch(const KvEventBatch& batch);

// Frame 1: the sequence number, 8 bytes big-endian.
std::array<uint8_t, 8> encode_sequence_number(uint64_t seq);

// Frame 0: "kv@<instance>@<model>".
std::string event_topic(std::string_view instance, std::string_view model);

}  // namespace tessera::kv_events
