// RequestStreamImpl: a request's output channel. The engine thread pushes events, one client
// thread pops them. Pushing never blocks (an unbounded queue: a slow client costs memory, never
// stalls the engine; the server aborts a client that has gone away).
#pragma once
#include <condition_variable>
#include <deque>
#include <mutex>

#include "tessera/engine.h"

namespace tessera {

class RequestStreamImpl final : public RequestStream {
 public:
  RequestStreamImpl(int64_t request_id, int32_t num_samples)
      : request_id_(request_id), num_samples_(num_samples) {}

  int64_t request_id() const override { return request_id_; }

  std::optional<RequestOutput> next(std::optional<std::chrono::milliseconds> timeout) override {
    std::unique_lock<std::mutex> lock(mutex_);
    auto ready = [&] { return !events_.empty() || num_finished_ >= num_samples_; };
    if (timeout) {
      if (!cv_.wait_for(lock, *timeout, ready)) return std::nullopt;
    } else {
      cv_.wait(lock, ready);
    }
    if (events_.empty()) return std::nullopt;
    RequestOutput out = std::move(events_.front());
    events_.pop_front();
    if (out.finish_reason != FinishReason::kNone) ++num_delivered_finals_;
    return out;
  }

  bool finished() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_.empty() && num_delivered_finals_ >= num_samples_;
  }

  // Engine thread.
  void push(RequestOutput out) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (out.finish_reason != FinishReason::kNone) ++num_finished_;
      events_.push_back(std::move(out));
    }
    cv_.notify_all();
  }

 private:
  const int64_t request_id_;
  const int32_t num_samples_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<RequestOutput> events_;
  int32_t num_finished_ = 0;          // final events pushed
  int32_t num_delivered_finals_ = 0;  // final events popped
};

}  // namespace tessera
