// A persistent compute pool: num_threads - 1 workers plus the calling thread. Workers spin briefly
// and then sleep on an atomic between jobs, so a step of a small model pays no thread start-up and
// little wake-up latency. One job runs at a time; run() is called from one thread (the engine's).
#pragma once
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace tessera {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(thread_index, num_threads) once on each thread, the caller being index 0, and
  // returns when every call has returned. No allocation.
  template <typename Fn>
  void run(Fn&& fn) {
    run_erased(&fn, [](void* ctx, int index, int count) { (*static_cast<Fn*>(ctx))(index, count); });
  }

  // Splits [0, n) into num_threads contiguous ranges (each a multiple of `grain`, except the last)
  // and calls fn(begin, end) for each non-empty one. The split depends only on n, grain and the
  // thread count, never on timing.
  template <typename Fn>
  void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    const int64_t chunks = (n + grain - 1) / grain;
    if (num_threads_ == 1 || chunks == 1) {
      fn(int64_t{0}, n);
      return;
    }
    run([&](int index, int count) {
      const int64_t per = (chunks + count - 1) / count;
      const int64_t begin = std::min<int64_t>(n, index * per * grain);
      const int64_t end = std::min<int64_t>(n, (index + 1) * per * grain);
      if (begin < end) fn(begin, end);
    });
  }

 private:
  using Trampoline = void (*)(void*, int, int);
  void run_erased(void* ctx, Trampoline fn);
  void worker_loop(int index);

  int num_threads_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};   // bumped to publish a job
  std::atomic<int> pending_{0};           // workers still running the current job
  std::atomic<bool> stop_{false};
  void* job_ctx_ = nullptr;
  Trampoline job_fn_ = nullptr;
};

// Threads to use by default: the number of cores the process may run on.
int default_num_threads();

}  // namespace tessera
