// DiskTier: the disk tier's one interface. It owns the block store (disk_store.h) and one I/O
// thread; the engine thread only enqueues and polls, so no engine step ever waits on the disk.
//
//   engine thread                          I/O thread
//   contains(key)   index / stat            -
//   submit_write    -> write queue (bounded in bytes; full = the block is dropped and counted)
//   submit_read     -> read queue (never dropped: a waiting request needs every answer)
//                                            reads first, then writes: encode, temp + rename, evict
//   take_reads()    <- verified payloads, or missing / corrupt (a corrupt file is deleted)
//   recycle()       -> payload buffers back (a read goes straight into one: no allocation, no copy)
//   drain_events()  <- DISK BlockStored (written) / BlockRemoved (evicted), when recording
//
// A write or open error that no later write can avoid (unwritable or full directory) prints one
// warning and turns the tier off: later writes are dropped, reads answer "missing".
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kv_disk/block_file.h"
#include "kv_disk/disk_store.h"

namespace tessera::kv_disk {

struct DiskTierConfig {
  DiskStoreConfig store;
  size_t payload_bytes = 0;                          // K/V bytes of one block
  int64_t max_queued_write_bytes = int64_t{256} << 20;  // write queue bound (payloads)
  bool record_events = false;                        // keep DISK stored/removed events
};

enum class ReadStatus { kOk, kMissing, kCorrupt };

struct ReadRequest {
  int64_t ticket = 0;       // caller's id of the batch (a waiting request)
  int32_t index = 0;        // caller's index within the batch
  BlockMeta expected;       // what the file must be (key, parent, tokens, group, namespace)
};

struct ReadResult {
  int64_t ticket = 0;
  int32_t index = 0;
  ReadStatus status = ReadStatus::kMissing;
  std::vector<uint8_t> payload;  // [payload_bytes] when kOk; hand it back with recycle()
};

struct DiskEvent {
  bool stored = true;                    // BlockStored (written) or BlockRemoved (evicted)
  uint64_t pool_hash = 0;
  std::optional<uint64_t> parent_pool_hash;
  std::vector<int32_t> tokens;           // stored only
};

struct DiskTierStats {
  bool enabled = false;
  int64_t writes = 0;            // blocks written
  int64_t write_drops = 0;       // dropped: queue full, tier off, or larger than the budget
  int64_t write_errors = 0;      // failed writes (I/O errors)
  int64_t evictions = 0;         // files deleted for the budget
  int64_t reads = 0;             // blocks read and verified
  int64_t read_misses = 0;       // looked-up files gone by the time they were read
  int64_t corrupt_blocks = 0;    // files that failed verification (deleted)
  int64_t bytes_written = 0;
  int64_t bytes_read = 0;
  int64_t bytes_on_disk = 0;     // the store's estimate (gauge)
  int64_t num_files = 0;         // gauge
};

// Per-block latencies since the last drain (seconds), for the engine's histograms.
struct DiskLatencies {
  std::vector<double> read_seconds;   // open, read, verify
  std::vector<double> write_seconds;  // encode, write, rename (and any eviction)
};

class DiskTier {
 public:
  // Opens the store and starts the I/O thread; an error (unusable directory) names the path.
  static Result<std::unique_ptr<DiskTier>> open(const DiskTierConfig& config);
  // Writes what is queued (so a restart finds it), then stops the thread.
  ~DiskTier();

  bool enabled() const { return enabled_.load(); }
  const DiskStore& store() const { return *store_; }
  size_t payload_bytes() const { return config_.payload_bytes; }
  const DiskKey& ns() const { return config_.store.ns; }

  bool contains(const DiskKey& key);
  // False (counted as a drop) when the queue is full or the tier is off; never blocks on I/O.
  bool submit_write(BlockMeta meta, std::vector<uint8_t> payload);
  void submit_reads(std::vector<ReadRequest> reads);
  std::vector<ReadResult> take_reads();
  // The reads of `ticket` not started yet are dropped, and its results not yet taken are discarded
  // (their buffers kept for later reads); a read already running finishes and is discarded by the
  // caller. Returns the number of reads that will not run.
  int64_t cancel_reads(int64_t ticket);
  // A payload buffer the caller is done with: the I/O thread reads the next blocks into it (a fresh
  // 192 KiB buffer costs page faults and zeroing, more than the read itself).
  void recycle(std::vector<uint8_t> buffer);
  std::vector<DiskEvent> drain_events();
  // Writes queued or running, or events not yet drained: DISK events are still to come out.
  bool events_pending() const;
  DiskTierStats stats() const;
  DiskLatencies drain_latencies();
  // Blocks until both queues are empty (tests, shutdown).
  void flush();

 private:
  struct WriteJob {
    BlockMeta meta;
    std::vector<uint8_t> payload;
  };
  DiskTier() = default;
  void run();
  void do_read(ReadRequest req);
  void do_write(WriteJob job);
  void turn_off(const std::string& why);

  DiskTierConfig config_;
  std::unique_ptr<DiskStore> store_;
  std::atomic<bool> enabled_{true};
  std::vector<uint8_t> head_;  // the I/O thread's header + token ids buffer
  mutable std::mutex mutex_;  // the queues, results, events and stats below
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<ReadRequest> reads_;
  std::deque<WriteJob> writes_;
  int64_t queued_write_bytes_ = 0;
  bool busy_ = false;
  bool stop_ = false;
  std::vector<ReadResult> done_;
  std::vector<std::vector<uint8_t>> spare_;  // recycled payload buffers (at most kMaxSpare)
  std::vector<DiskEvent> events_;
  DiskTierStats stats_;
  DiskLatencies latencies_;
  std::thread thread_;
};

}  // namespace tessera::kv_disk
