#include "util/thread_pool.h"

#include <sched.h>

#include <algorithm>

#include "util/check.h"

namespace tessera {
namespace {

// Iterations a worker spins before sleeping: long enough to bridge the gap between two kernels of
// one forward pass (microseconds), short enough not to burn a core between steps.
constexpr int kSpinIterations = 1 << 14;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

int default_num_threads() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(std::max(1, num_threads)), ranges_(static_cast<size_t>(num_threads_)) {
  workers_.reserve(num_threads_ - 1);
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::publish() {
  // seq_cst bump, then the sleeper count: a worker that registers as a sleeper after this load
  // re-reads generation_ before it blocks and sees the bump (Dekker order), so it cannot miss it.
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();
}

void ThreadPool::run_erased(void* ctx, Trampoline fn) {
  if (num_threads_ == 1) {
    fn(ctx, 0, 1);
    return;
  }
  job_ctx_ = ctx;
  job_fn_ = fn;
  pending_.store(num_threads_ - 1, std::memory_order_relaxed);
  run_generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  publish();
  fn(ctx, 0, num_threads_);
  // Spin, then yield: with more threads than cores a descheduled worker needs the core back.
  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kSpinIterations) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

namespace {
inline uint64_t pack_bounds(int64_t front, int64_t back) {
  return static_cast<uint64_t>(front) | (static_cast<uint64_t>(back) << 32);
}
inline int64_t bounds_front(uint64_t b) { return static_cast<int64_t>(b & 0xffffffffu); }
inline int64_t bounds_back(uint64_t b) { return static_cast<int64_t>(b >> 32); }
}  // namespace

// Claims a piece of a range with one CAS: split(front, back) gives the piece [begin, end) and the
// range's new bounds. False (nothing claimed) once the range is empty.
template <typename Split>
bool claim_piece(std::atomic<uint64_t>& slot, Split split, int64_t& begin, int64_t& end) {
  uint64_t b = slot.load(std::memory_order_acquire);
  for (;;) {
    const int64_t front = bounds_front(b), back = bounds_back(b);
    if (front >= back) return false;
    int64_t new_front = front, new_back = back;
    split(front, back, begin, end, new_front, new_back);
    if (slot.compare_exchange_weak(b, pack_bounds(new_front, new_back), std::memory_order_acq_rel)) return true;
  }
}

bool ThreadPool::take_front(ChunkJob& job, int range) {
  int64_t begin = 0, end = 0;
  const bool claimed = claim_piece(
      ranges_[static_cast<size_t>(range)].bounds,
      [&](int64_t front, int64_t back, int64_t& b, int64_t& e, int64_t& new_front, int64_t&) {
        // A quarter of what is left, rounded up to the grain: big pieces while the range is long
        // (few claims), small ones near its end (where a thief may be taking the back).
        const int64_t quarter = ((back - front) / 4 + job.chunk - 1) / job.chunk * job.chunk;
        b = front;
        e = new_front = std::min(back, front + std::max(job.chunk, quarter));
      },
      begin, end);
  if (claimed) job.fn(job.ctx, begin, end);
  return claimed;
}

bool ThreadPool::take_back(ChunkJob& job, int range) {
  int64_t begin = 0, end = 0;
  const bool claimed = claim_piece(
      ranges_[static_cast<size_t>(range)].bounds,
      [&](int64_t front, int64_t back, int64_t& b, int64_t& e, int64_t&, int64_t& new_back) {
        // The last grain-aligned piece: [floor((back - 1) / grain) * grain, back).
        b = new_back = std::max(front, (back - 1) / job.chunk * job.chunk);
        e = back;
      },
      begin, end);
  if (claimed) job.fn(job.ctx, begin, end);
  return claimed;
}

void ThreadPool::take_chunks(ChunkJob& job, int self) {
  if (job.ranges) {
    while (take_front(job, self)) {
    }
    for (int k = 1; k < num_threads_; ++k) {
      while (take_back(job, (self + k) % num_threads_)) {
      }
    }
    return;
  }
  const int64_t num_chunks = (job.n + job.chunk - 1) / job.chunk;
  for (int64_t k = next_chunk_.fetch_add(1, std::memory_order_relaxed); k < num_chunks;
       k = next_chunk_.fetch_add(1, std::memory_order_relaxed)) {
    job.fn(job.ctx, k * job.chunk, std::min(job.n, (k + 1) * job.chunk));
  }
}

void ThreadPool::run_chunks(ChunkJob& job) {
  chunk_job_ = &job;
  next_chunk_.store(0, std::memory_order_relaxed);
  if (job.ranges) {
    // Ranges of whole grains, as even as they can be; publish()'s seq_cst bump of generation_
    // (which a worker loads with acquire before it reads them) publishes them with the job.
    const int64_t grains = (job.n + job.chunk - 1) / job.chunk;
    const int64_t per = (grains + num_threads_ - 1) / num_threads_;
    for (int t = 0; t < num_threads_; ++t) {
      const int64_t front = std::min(job.n, t * per * job.chunk);
      const int64_t back = std::min(job.n, (t + 1) * per * job.chunk);
      ranges_[static_cast<size_t>(t)].bounds.store(pack_bounds(front, back), std::memory_order_relaxed);
    }
  }
  // The generation this job will carry once published; workers join only while it is open.
  open_generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  publish();
  take_chunks(job, 0);
  // Close the job, then wait only for workers that joined before the close (seq_cst pairs with the
  // worker's active_ increment and open_generation_ check).
  open_generation_.store(0, std::memory_order_seq_cst);
  for (int spin = 0; active_.load(std::memory_order_seq_cst) != 0; ++spin) {
    if (spin < kSpinIterations) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t current = generation_.load(std::memory_order_acquire);
    for (int spin = 0; current == seen && spin < kSpinIterations; ++spin) {
      cpu_relax();
      current = generation_.load(std::memory_order_acquire);
    }
    while (current == seen) {
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      if (generation_.load(std::memory_order_seq_cst) == seen) generation_.wait(seen, std::memory_order_seq_cst);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
      current = generation_.load(std::memory_order_acquire);
    }
    seen = current;
    if (stop_.load()) return;
    // A run() job waits for every worker, so its generation is still current here; a chunk job
    // may have been closed (and others published) while this worker slept.
    if (run_generation_.load(std::memory_order_acquire) == current) {
      job_fn_(job_ctx_, index, num_threads_);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
      continue;
    }
    // A chunk job: join only if it is still open (the caller may have finished without us).
    active_.fetch_add(1, std::memory_order_seq_cst);
    if (open_generation_.load(std::memory_order_seq_cst) == current) take_chunks(*chunk_job_, index);
    active_.fetch_sub(1, std::memory_order_seq_cst);
  }
}

}  // namespace tessera
