// A persistent compute pool: num_threads - 1 workers plus the calling thread. Workers spin briefly
// and then sleep on an atomic between jobs, so a step of a small model pays no thread start-up and
// little wake-up latency (the futex wake is skipped when no worker sleeps). One job runs at a time;
// run(), parallel_for() and for_chunks() are called from one thread (the engine's).
//
// for_chunks() never waits for a worker that has not started: chunks are handed out from an atomic
// counter, the caller takes them too, and a worker that wakes after the caller closed the job skips
// it. On a loaded machine (more runnable threads than cores) a descheduled worker then costs
// nothing instead of a scheduler time slice per job. Callers whose results do not depend on which
// thread computes a chunk (every kernel here) use it.
#pragma once
#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
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

  // Calls fn(begin, end) for the chunks [k * chunk, min(n, (k + 1) * chunk)) of [0, n), each once,
  // on the caller and whichever workers join in time; returns when all are done (a pool of one
  // thread, or a single chunk, gets one call for all of [0, n)). Which thread runs a chunk depends
  // on timing: fn must give the same result wherever it runs. No allocation.
  template <typename Fn>
  void for_chunks(int64_t n, int64_t chunk, Fn&& fn) {
    if (ran_on_caller(n, chunk, fn)) return;
    run_job(n, chunk, fn, /*ranges=*/false);
  }

  // Splits [0, n) into num_threads contiguous ranges (multiples of `grain`, except the last) and
  // calls fn(begin, end) on pieces of them, each item once: every thread takes pieces from the
  // front of its own range (a quarter of what is left, at least `grain` items) and, once that is
  // empty, steals `grain` items at a time from the back of the others'. So each thread streams
  // one contiguous run, as with one chunk per thread, but a thread that finishes first (the
  // other was slowed by its neighbours, or started late) takes over the tail of the other's run
  // instead of waiting for it. Piece boundaries are multiples of `grain` (or n). Like
  // for_chunks, it never waits for a worker that has not started, and which thread runs a piece
  // depends on timing: fn must give the same result wherever it runs. No allocation.
  template <typename Fn>
  void for_ranges(int64_t n, int64_t grain, Fn&& fn) {
    if (ran_on_caller(n, grain, fn)) return;
    if (n > int64_t{0xffffffff}) return for_chunks(n, (n + num_threads_ - 1) / num_threads_, fn);  // 32-bit bounds
    run_job(n, grain, fn, /*ranges=*/true);
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
  using ChunkFn = void (*)(void*, int64_t, int64_t);
  struct ChunkJob {
    int64_t n;            // items
    int64_t chunk;        // items per chunk (for_ranges: the grain)
    void* ctx;            // the caller's callable
    ChunkFn fn;           // calls it on [begin, end)
    bool ranges = false;  // for_ranges: per-thread ranges with stealing, not a chunk counter
  };
  // One thread's range of a for_ranges job: front in the low 32 bits, back (exclusive) in the
  // high 32, so that the owner (front) and thieves (back) claim pieces with one CAS each.
  struct alignas(64) RangeSlot {
    std::atomic<uint64_t> bounds{0};
  };
  // What for_chunks and for_ranges do without the workers: nothing for n <= 0, one call for all
  // of [0, n) on one thread or when one piece covers it. Clamps piece to at least 1 otherwise.
  template <typename Fn>
  bool ran_on_caller(int64_t n, int64_t& piece, Fn& fn) {
    if (n <= 0) return true;
    if (piece < 1) piece = 1;
    if (num_threads_ == 1 || piece >= n) {
      fn(int64_t{0}, n);
      return true;
    }
    return false;
  }
  // for_chunks and for_ranges past their inline cases: fn behind a trampoline, then run_chunks.
  template <typename Fn>
  void run_job(int64_t n, int64_t chunk, Fn& fn, bool ranges) {
    using F = std::remove_reference_t<Fn>;
    ChunkJob job{n, chunk, const_cast<void*>(static_cast<const void*>(&fn)),
                 [](void* ctx, int64_t b, int64_t e) { (*static_cast<F*>(ctx))(b, e); }, ranges};
    run_chunks(job);
  }
  void run_erased(void* ctx, Trampoline fn);
  void run_chunks(ChunkJob& job);
  void take_chunks(ChunkJob& job, int self);
  bool take_front(ChunkJob& job, int range);
  bool take_back(ChunkJob& job, int range);
  // Publishes the job that job_fn_/job_ctx_ (or chunk_job_) describe and wakes sleeping workers.
  void publish();
  void worker_loop(int index);

  int num_threads_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};   // bumped to publish a job
  std::atomic<int> pending_{0};           // workers still running the current job
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};          // workers blocked in generation_.wait
  void* job_ctx_ = nullptr;
  Trampoline job_fn_ = nullptr;
  // for_chunks jobs: the open generation (0 when closed), the next chunk, workers inside the job.
  std::atomic<uint64_t> run_generation_{0};  // generation of the latest run() job
  ChunkJob* chunk_job_ = nullptr;
  std::atomic<uint64_t> open_generation_{0};
  std::atomic<int64_t> next_chunk_{0};
  std::atomic<int> active_{0};
  std::vector<RangeSlot> ranges_;  // for_ranges jobs: one per thread
};

// Threads to use by default: the number of cores the process may run on.
int default_num_threads();

}  // namespace tessera
