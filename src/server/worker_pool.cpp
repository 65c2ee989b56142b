#include "server/worker_pool.h"

#include <algorithm>

namespace tessera::server {

WorkerPool::WorkerPool(size_t max_threads) : max_threads_(std::max<size_t>(1, max_threads)) {}

WorkerPool::~WorkerPool() { stop(); }

bool WorkerPool::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    tasks_.push_back(std::move(task));
    // A thread for every task that no idle thread will take, up to the cap.
    if (num_idle_ < tasks_.size() && threads_.size() < max_threads_) {
      threads_.emplace_back([this] { run(); });
    }
  }
  cv_.notify_one();
  return true;
}

void WorkerPool::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ++num_idle_;
    cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
    --num_idle_;
    if (tasks_.empty()) return;  // stopping, and nothing left to run
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    ++num_running_;
    lock.unlock();
    task();
    task = nullptr;  // what the task holds (a connection) goes before the count drops
    lock.lock();
    --num_running_;
  }
}

void WorkerPool::stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (std::thread& t : threads) t.join();
}

size_t WorkerPool::num_pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_.size() + num_running_;
}

}  // namespace tessera::server
