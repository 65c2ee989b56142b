// KV-cache events on the wire: event_encoder's msgpack pinned byte for byte (the bytes Python's
// msgpack.packb gives for the same structure), decoded back with msgpack-c, and the publisher's
// [topic, 8-byte big-endian seq, payload] messages received by a SUB socket without gaps.
#include <gtest/gtest.h>
#include <msgpack.h>
#include <unistd.h>
#include <zmq.h>

#include <chrono>
#include <string>
#include <thread>
#include <utility>

#include "kv_events/event_encoder.h"
#include "kv_events/kv_event_publisher.h"

namespace tessera::kv_events {
namespace {

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

KvEventBatch sample_batch() {
  KvEventBatch b;
  b.ts = 1.5;
  b.block_size = 2;
  b.events.push_back({KvCacheEvent::Kind::kBlockStored, 0xFFFFFFFFFFFFFFFFull, std::nullopt, {1, 2}});
  b.events.push_back({KvCacheEvent::Kind::kBlockStored, 5, 0xFFFFFFFFFFFFFFFFull, {300, -1}});
  b.events.push_back({KvCacheEvent::Kind::kBlockRemoved, 7, std::nullopt, {}});
  b.events.push_back({KvCacheEvent::Kind::kAllBlocksCleared, 0, std::nullopt, {}});
  return b;
}

// python3 -c "import msgpack; print(msgpack.packb([1.5, [['BlockStored', [2**64-1], None, [1, 2], 2,
//   None, 'CPU', None], ['BlockStored', [5], 2**64-1, [300, -1], 2, None, 'CPU', None],
//   ['BlockRemoved', [7], 'CPU'], ['AllBlocksCleared']], 0]).hex())"
TEST(KvEventEncoder, BytesMatchVllmArrayLayout) {
  EXPECT_EQ(hex(encode_event_batch(sample_batch())),
            "93cb3ff80000000000009498ab426c6f636b53746f72656491cfffffffffffffffffc092010202c0a3435055c098ab"
            "426c6f636b53746f7265649105cfffffffffffffffff92cd012cff02c0a3435055c093ac426c6f636b52656d6f76"
            "65649107a343505591b0416c6c426c6f636b73436c656172656400");
}

// The disk tier's events (serve --kv-cache-dir) carry medium "DISK":
// python3 -c "import msgpack; print(msgpack.packb([1.5, [['BlockStored', [9], None, [1, 2], 2, None,
//   'DISK', None], ['BlockRemoved', [9], 'DISK']], 0]).hex())"
TEST(KvEventEncoder, DiskTierEventsCarryMediumDisk) {
  KvEventBatch b;
  b.ts = 1.5;
  b.block_size = 2;
  b.events.push_back({KvCacheEvent::Kind::kBlockStored, 9, std::nullopt, {1, 2}, KvCacheEvent::Medium::kDisk});
  b.events.push_back({KvCacheEvent::Kind::kBlockRemoved, 9, std::nullopt, {}, KvCacheEvent::Medium::kDisk});
  EXPECT_EQ(hex(encode_event_batch(b)),
            "93cb3ff80000000000009298ab426c6f636b53746f7265649109c092010202c0a44449534bc093ac426c6f636b52656d"
            "6f7665649109a44449534b00");
}

// One encoded batch unpacked (freed with it; its strings point into `bytes`, kept here): ok when
// it decoded, whole when it used every byte.
struct Decoded {
  const std::string bytes;
  msgpack_unpacked msg;
  bool ok = false, whole = false;
  explicit Decoded(std::string encoded) : bytes(std::move(encoded)) {
    msgpack_unpacked_init(&msg);
    size_t off = 0;
    ok = msgpack_unpack_next(&msg, bytes.data(), bytes.size(), &off) == MSGPACK_UNPACK_SUCCESS;
    whole = off == bytes.size();
  }
  ~Decoded() { msgpack_unpacked_destroy(&msg); }
  Decoded(const Decoded&) = delete;
  Decoded& operator=(const Decoded&) = delete;
};

std::string str_of(const msgpack_object& o) {
  EXPECT_EQ(o.type, MSGPACK_OBJECT_STR);
  return std::string(o.via.str.ptr, o.via.str.size);
}

TEST(KvEventEncoder, DecodesBack) {
  KvEventBatch b;
  b.ts = 1767225600.25;
  b.block_size = 16;
  KvCacheEvent stored{KvCacheEvent::Kind::kBlockStored, 0x8000000000000001ull, 42, {}};
  for (int32_t i = 0; i < 16; ++i) stored.token_ids.push_back(1000 + i);
  b.events.push_back(stored);
  const Decoded d(encode_event_batch(b));
  ASSERT_TRUE(d.ok);
  EXPECT_TRUE(d.whole);
  const msgpack_object& root = d.msg.data;
  ASSERT_EQ(root.type, MSGPACK_OBJECT_ARRAY);
  ASSERT_EQ(root.via.array.size, 3u);
  EXPECT_EQ(root.via.array.ptr[0].type, MSGPACK_OBJECT_FLOAT64);
  EXPECT_EQ(root.via.array.ptr[0].via.f64, 1767225600.25);
  EXPECT_EQ(root.via.array.ptr[2].via.u64, 0u);  // data_parallel_rank
  const msgpack_object& events = root.via.array.ptr[1];
  ASSERT_EQ(events.via.array.size, 1u);
  const msgpack_object& e = events.via.array.ptr[0];
  ASSERT_EQ(e.via.array.size, 8u);
  EXPECT_EQ(str_of(e.via.array.ptr[0]), "BlockStored");
  ASSERT_EQ(e.via.array.ptr[1].via.array.size, 1u);
  EXPECT_EQ(e.via.array.ptr[1].via.array.ptr[0].via.u64, 0x8000000000000001ull);
  EXPECT_EQ(e.via.array.ptr[2].via.u64, 42u);
  ASSERT_EQ(e.via.array.ptr[3].via.array.size, 16u);
  for (uint32_t i = 0; i < 16; ++i) EXPECT_EQ(e.via.array.ptr[3].via.array.ptr[i].via.u64, 1000u + i);
  EXPECT_EQ(e.via.array.ptr[4].via.u64, 16u);
  EXPECT_EQ(e.via.array.ptr[5].type, MSGPACK_OBJECT_NIL);
  EXPECT_EQ(str_of(e.via.array.ptr[6]), "CPU");
  EXPECT_EQ(e.via.array.ptr[7].type, MSGPACK_OBJECT_NIL);
}

TEST(KvEventEncoder, LoraBlockCarriesItsAdapter) {
  KvEventBatch b;
  b.block_size = 16;
  KvCacheEvent stored{KvCacheEvent::Kind::kBlockStored, 9, std::nullopt, std::vector<int32_t>(16, 3)};
  stored.lora_name = "sql";
  stored.lora_id = 7;
  b.events.push_back(stored);
  const Decoded d(encode_event_batch(b));
  ASSERT_TRUE(d.ok);
  const msgpack_object& e = d.msg.data.via.array.ptr[1].via.array.ptr[0];
  ASSERT_EQ(e.via.array.size, 8u);
  EXPECT_EQ(e.via.array.ptr[5].via.u64, 7u);            // lora_id
  EXPECT_EQ(str_of(e.via.array.ptr[7]), "sql");         // lora_name
}

TEST(KvEventEncoder, SequenceNumberAndTopic) {
  const auto s = encode_sequence_number(0x0102030405060708ull);
  EXPECT_EQ((std::array<uint8_t, 8>{1, 2, 3, 4, 5, 6, 7, 8}), s);
  EXPECT_EQ(encode_sequence_number(1), (std::array<uint8_t, 8>{0, 0, 0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(event_topic("10.0.0.7:8000", "smol"), "kv@10.0.0.7:8000@smol");
}

TEST(KvEventPublisher, RejectsBadEndpoint) {
  EXPECT_FALSE(KvEventPublisher::create("127.0.0.1:5557").ok());
}

std::string recv_frame(void* sock, bool* more) {
  zmq_msg_t m;
  zmq_msg_init(&m);
  EXPECT_GE(zmq_msg_recv(&m, sock, 0), 0);
  std::string s(static_cast<const char*>(zmq_msg_data(&m)), zmq_msg_size(&m));
  *more = zmq_msg_more(&m) != 0;
  zmq_msg_close(&m);
  return s;
}

uint64_t seq_of(const std::string& frame) {
  EXPECT_EQ(frame.size(), 8u);
  uint64_t v = 0;
  for (unsigned char c : frame) v = (v << 8) | c;
  return v;
}

TEST(KvEventPublisher, SubscriberSeesEveryBatchInOrder) {
  const std::string endpoint = "ipc:///tmp/tessera_test_kv_events_" + std::to_string(getpid());
  auto pub = KvEventPublisher::create(endpoint);
  ASSERT_TRUE(pub.ok()) << pub.error().message;
  pub.value()->set_topic(event_topic("test", "m"));
  void* ctx = zmq_ctx_new();
  void* sub = zmq_socket(ctx, ZMQ_SUB);
  ASSERT_EQ(zmq_connect(sub, endpoint.c_str()), 0);
  ASSERT_EQ(zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "kv@", 3), 0);
  const int timeout_ms = 200;
  zmq_setsockopt(sub, ZMQ_RCVTIMEO, &timeout_ms, sizeof(timeout_ms));

  // PUB drops messages until the subscription has arrived (ZeroMQ's slow joiner): publish probes
  // until one is received, then every later batch must arrive, in order, with the next numbers.
  uint64_t first = 0;
  uint64_t num_probes = 0;  // sequence numbers 0 .. num_probes - 1
  bool joined = false;
  for (int i = 0; i < 100 && !joined; ++i) {
    pub.value()->publish(sample_batch());
    ++num_probes;
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, sub, 0) >= 0) {
      zmq_msg_close(&m);
      bool more = true;
      first = seq_of(recv_frame(sub, &more));
      recv_frame(sub, &more);
      joined = true;
    } else {
      zmq_msg_close(&m);
    }
  }
  ASSERT_TRUE(joined);
  // Probes published after the first received one arrive too; read them.
  uint64_t last = first;
  const int long_ms = 10000;  // generous: a loaded 2-core CI host (ASan, ctest -j2) can stall delivery for seconds
  zmq_setsockopt(sub, ZMQ_RCVTIMEO, &long_ms, sizeof(long_ms));
  while (last + 1 < num_probes) {
    bool more = false;
    recv_frame(sub, &more);
    last = seq_of(recv_frame(sub, &more));
    recv_frame(sub, &more);
  }
  for (int i = 0; i < 5; ++i) pub.value()->publish(sample_batch());
  for (int i = 0; i < 5; ++i) {
    bool more = false;
    EXPECT_EQ(recv_frame(sub, &more), "kv@test@m");
    ASSERT_TRUE(more);
    EXPECT_EQ(seq_of(recv_frame(sub, &more)), last + 1 + static_cast<uint64_t>(i));
    ASSERT_TRUE(more);
    EXPECT_EQ(recv_frame(sub, &more), encode_event_batch(sample_batch()));
    EXPECT_FALSE(more);
  }
  pub.value()->shutdown();
  EXPECT_EQ(pub.value()->counters().num_batches_dropped, 0u);
  zmq_close(sub);
  zmq_ctx_term(ctx);
}

}  // namespace
}  // namespace tessera::kv_events
