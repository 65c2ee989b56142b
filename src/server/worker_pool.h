// WorkerPool: the threads that run handlers which may block (on the engine, on a slow reader),
// so that the I/O threads never wait on either. Threads start on demand, up to max_threads;
// past that, tasks wait in FIFO order. Internal to src/server.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera::server {

class WorkerPool {
 public:
  explicit WorkerPool(size_t max_threads);
  ~WorkerPool();  // stop()
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `task`; false (the task is dropped) once stop() has begun.
  bool post(std::function<void()> task);
  // Refuses new tasks, lets the queued and running ones finish, joins every thread.
  void stop();
  // Tasks queued or running.
  size_t num_pending() const;

 private:
  void run();

  const size_t max_threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  size_t num_idle_ = 0;
  size_t num_running_ = 0;
  bool stopping_ = false;
};

}  // namespace tessera::server
