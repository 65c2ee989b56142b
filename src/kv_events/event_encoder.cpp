#include "kv_events/event_encoder.h"

#include <msgpack.h>

#include <string_view>

namespace tessera::kv_events {
namespace {

// See event_encoder.h: "CPU" is the in-memory KV pool's medium, "DISK" the disk tier's.
std::string_view medium_of(const KvCacheEvent& e) { return e.medium == KvCacheEvent::Medium::kDisk ? "DISK" : "CPU"; }

void pack_str(msgpack_packer& pk, std::string_view s) {
  msgpack_pack_str(&pk, s.size());
  msgpack_pack_str_body(&pk, s.data(), s.size());
}

void pack_event(msgpack_packer& pk, const KvCacheEvent& e, int32_t block_size) {
  switch (e.kind) {
    case KvCacheEvent::Kind::kBlockStored:
      msgpack_pack_array(&pk, 8);
      pack_str(pk, "BlockStored");
      msgpack_pack_array(&pk, 1);
      msgpack_pack_uint64(&pk, e.block_hash);
      if (e.parent_block_hash) {
        msgpack_pack_uint64(&pk, *e.parent_block_hash);
      } else {
        msgpack_pack_nil(&pk);
      }
      msgpack_pack_array(&pk, e.token_ids.size());
      for (int32_t t : e.token_ids) msgpack_pack_int32(&pk, t);
      msgpack_pack_int32(&pk, block_size);
      if (e.lora_id != 0) {
        msgpack_pack_uint64(&pk, e.lora_id);
      } else {
        msgpack_pack_nil(&pk);  // lora_id: the base model
      }
      pack_str(pk, medium_of(e));
      if (!e.lora_name.empty()) {
        pack_str(pk, e.lora_name);
      } else {
        msgpack_pack_nil(&pk);  // lora_name: the base model
      }
      break;
    case KvCacheEvent::Kind::kBlockRemoved:
      msgpack_pack_array(&pk, 3);
      pack_str(pk, "BlockRemoved");
      msgpack_pack_array(&pk, 1);
      msgpack_pack_uint64(&pk, e.block_hash);
      pack_str(pk, medium_of(e));
      break;
    case KvCacheEvent::Kind::kAllBlocksCleared:
      msgpack_pack_array(&pk, 1);
      pack_str(pk, "AllBlocksCleared");
      break;
  }
}

}  // namespace

std::string encode_event_batch(const KvEventBatch& batch) {
  msgpack_sbuffer buf;
  msgpack_sbuffer_init(&buf);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
  msgpack_pack_array(&pk, 3);
  msgpack_pack_double(&pk, batch.ts);
  msgpack_pack_array(&pk, batch.events.size());
  for (const KvCacheEvent& e : batch.events) pack_event(pk, e, batch.block_size);
  msgpack_pack_int32(&pk, 0);  // data_parallel_rank
  std::string out(buf.data, buf.size);
  msgpack_sbuffer_destroy(&buf);
  return out;
}

std::array<uint8_t, 8> encode_sequence_number(uint64_t seq) {
  std::array<uint8_t, 8> out{};
  for (int i = 7; i >= 0; --i) {
    out[static_cast<size_t>(i)] = static_cast<uint8_t>(seq & 0xff);
    seq >>= 8;
  }
  return out;
}

std::string event_topic(std::string_view instance, std::string_view model) {
  std::string topic = "kv@";
  topic += instance;
  topic += '@';
  topic += model;
  return topic;
}

}  // namespace tessera::kv_events
