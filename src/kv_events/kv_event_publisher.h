// KvEventPublisher: the ZeroMQ PUB socket that carries KV-cache events (event_encoder.h's format)
// and the thread that encodes and sends them, so the engine thread never waits on the network.
//
//   engine thread:   publish(batch)  -> seq = next++, queued          (never blocks)
//   sender thread:   pop -> encode -> [topic, seq (8 bytes BE), msgpack payload]  -> PUB
//
// The endpoint follows vLLM's rule: a wildcard address ("tcp://*:5557"), an IPv6 "::" address,
// ipc:// or inproc:// is bound; any other address is connected to (the subscriber has bound it,
// as llm-d's kv-cache manager does). Sequence numbers are dealt at publish(), so a batch that is
// ever dropped (the queue holds max_queued batches, a full one drops the newest) leaves a gap the
// subscriber can see. PUB itself never blocks: past its high-water mark ZeroMQ drops too.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "tessera/kv_events.h"
#include "util/status.h"

namespace tessera::kv_events {

struct PublisherCounters {
  uint64_t num_batches_sent = 0;     // messages handed to the socket
  uint64_t num_batches_dropped = 0;  // refused by a full queue (their sequence numbers are gaps)
};

class KvEventPublisher {
 public:
  // kInvalidArgument for a malformed endpoint, kIo when it cannot be bound.
  static Result<std::unique_ptr<KvEventPublisher>> create(const std::string& endpoint,
                                                          size_t max_queued = 10000);
  ~KvEventPublisher();
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // Frame 0 of every later message (event_topic(): "kv@<instance>@<model>").
  void set_topic(std::string topic);
  // Enqueues one batch; any thread, never blocks.
  void publish(KvEventBatch&& batch);
  // Sends what is queued (the socket lingers up to `linger` for slow subscribers), stops the thread.
  void shutdown(std::chrono::milliseconds linger = std::chrono::milliseconds(1000));
  PublisherCounters counters() const;

 private:
  KvEventPublisher() = default;
  void run();

  void* context_ = nullptr;  // zmq context
  void* socket_ = nullptr;   // ZMQ_PUB; used by the sender thread only once it runs
  size_t max_queued_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::pair<uint64_t, KvEventBatch>> queue_;  // (sequence number, batch)
  std::string topic_;
  uint64_t next_seq_ = 0;
  bool stopping_ = false;
  PublisherCounters counters_;
  std::thread thread_;
};

}  // namespace tessera::kv_events
