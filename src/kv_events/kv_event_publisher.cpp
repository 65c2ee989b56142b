#include "kv_events/kv_event_publisher.h"

#include <zmq.h>

#include <cerrno>

#include "kv_events/event_encoder.h"

namespace tessera::kv_events {
namespace {

// vLLM's rule (kv_event_publisher.h): wildcards, IPv6 "::", ipc:// and inproc:// are bound.
bool binds(const std::string& endpoint) {
  return endpoint.find('*') != std::string::npos || endpoint.find("::") != std::string::npos ||
         endpoint.starts_with("ipc://") || endpoint.starts_with("inproc://");
}

}  // namespace

Result<std::unique_ptr<KvEventPublisher>> KvEventPublisher::create(const std::string& endpoint,
                                                                   size_t max_queued) {
  if (endpoint.find("://") == std::string::npos) {
    return make_error(ErrorCode::kInvalidArgument,
                      "KV-event endpoint '{}' is not a ZeroMQ address (tcp://host:port, tcp://*:port, ipc://path)",
                      endpoint);
  }
  std::unique_ptr<KvEventPublisher> p(new KvEventPublisher());
  p->max_queued_ = max_queued;
  p->context_ = zmq_ctx_new();
  p->socket_ = zmq_socket(p->context_, ZMQ_PUB);
  const int hwm = 100000;  // messages buffered per subscriber before ZeroMQ drops (vLLM's default)
  zmq_setsockopt(p->socket_, ZMQ_SNDHWM, &hwm, sizeof(hwm));
  const bool bind = binds(endpoint);
  const int rc = bind ? zmq_bind(p->socket_, endpoint.c_str()) : zmq_connect(p->socket_, endpoint.c_str());
  if (rc != 0) {
    const int err = zmq_errno();
    zmq_close(p->socket_);
    zmq_ctx_term(p->context_);
    p->socket_ = p->context_ = nullptr;
    return make_error(err == EINVAL || err == EPROTONOSUPPORT ? ErrorCode::kInvalidArgument : ErrorCode::kIo,
                      "cannot {} the KV-event socket to '{}': {}", bind ? "bind" : "connect", endpoint,
                      zmq_strerror(err));
  }
  p->thread_ = std::thread([raw = p.get()] { raw->run(); });
  return p;
}

KvEventPublisher::~KvEventPublisher() { shutdown(); }

void KvEventPublisher::set_topic(std::string topic) {
  std::lock_guard lock(mutex_);
  topic_ = std::move(topic);
}

void KvEventPublisher::publish(KvEventBatch&& batch) {
  {
    std::lock_guard lock(mutex_);
    const uint64_t seq = next_seq_++;
    if (stopping_ || queue_.size() >= max_queued_) {
      ++counters_.num_batches_dropped;
      return;
    }
    queue_.emplace_back(seq, std::move(batch));
  }
  cv_.notify_one();
}

PublisherCounters KvEventPublisher::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

void KvEventPublisher::run() {
  for (;;) {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything queued was sent
    auto [seq, batch] = std::move(queue_.front());
    queue_.pop_front();
    const std::string topic = topic_;
    lock.unlock();

    const std::string payload = encode_event_batch(batch);
    const std::array<uint8_t, 8> seq_bytes = encode_sequence_number(seq);
    // PUB never blocks: with no subscriber, or past the high-water mark, ZeroMQ drops the message.
    zmq_send(socket_, topic.data(), topic.size(), ZMQ_SNDMORE);
    zmq_send(socket_, seq_bytes.data(), seq_bytes.size(), ZMQ_SNDMORE);
    zmq_send(socket_, payload.data(), payload.size(), 0);

    lock.lock();
    ++counters_.num_batches_sent;
  }
}

void KvEventPublisher::shutdown(std::chrono::milliseconds linger) {
  {
    std::lock_guard lock(mutex_);
    if (socket_ == nullptr) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  const int linger_ms = static_cast<int>(linger.count());
  zmq_setsockopt(socket_, ZMQ_LINGER, &linger_ms, sizeof(linger_ms));
  zmq_close(socket_);
  zmq_ctx_term(context_);  // returns once queued messages went out or the linger ran out
  socket_ = context_ = nullptr;
}

}  // namespace tessera::kv_events
