#include "kv_disk/disk_tier.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace tessera::kv_disk {

namespace {
// Recycled payload buffers kept (64 x 192 KiB for Qwen2.5-0.5B: 12 MiB): more than the blocks the
// engine imports per step, so a long load reuses the same few.
constexpr size_t kMaxSpare = 64;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

Result<std::unique_ptr<DiskTier>> DiskTier::open(const DiskTierConfig& config) {
  auto store = DiskStore::open(config.store);
  if (!store) return store.error();
  std::unique_ptr<DiskTier> tier(new DiskTier());
  tier->config_ = config;
  tier->store_ = std::move(*store);
  tier->thread_ = std::thread([raw = tier.get()] { raw->run(); });
  return tier;
}

DiskTier::~DiskTier() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool DiskTier::contains(const DiskKey& key) { return enabled() && store_->contains(key); }

bool DiskTier::submit_write(BlockMeta meta, std::vector<uint8_t> payload) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto bytes = static_cast<int64_t>(payload.size());
    if (!enabled() || stop_ || queued_write_bytes_ + bytes > config_.max_queued_write_bytes) {
      ++stats_.write_drops;
      return false;
    }
    queued_write_bytes_ += bytes;
    writes_.push_back({std::move(meta), std::move(payload)});
  }
  cv_.notify_one();
  return true;
}

void DiskTier::submit_reads(std::vector<ReadRequest> reads) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (ReadRequest& r : reads) reads_.push_back(std::move(r));
  }
  cv_.notify_one();
}

std::vector<ReadResult> DiskTier::take_reads() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<ReadResult> out;
  out.swap(done_);
  return out;
}

void DiskTier::recycle(std::vector<uint8_t> buffer) {
  if (buffer.size() != config_.payload_bytes) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (spare_.size() < kMaxSpare) spare_.push_back(std::move(buffer));
}

std::vector<DiskEvent> DiskTier::drain_events() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<DiskEvent> out;
  out.swap(events_);
  return out;
}

int64_t DiskTier::cancel_reads(int64_t ticket) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t dropped = static_cast<int64_t>(std::erase_if(reads_, [&](const ReadRequest& r) { return r.ticket == ticket; }));
  std::erase_if(done_, [&](ReadResult& r) {
    if (r.ticket != ticket) return false;
    if (!r.payload.empty() && spare_.size() < kMaxSpare) spare_.push_back(std::move(r.payload));
    return true;
  });
  return dropped;
}

bool DiskTier::events_pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !writes_.empty() || busy_ || !events_.empty();
}

DiskTierStats DiskTier::stats() const {
  DiskTierStats s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s = stats_;
  }
  s.enabled = enabled();
  s.bytes_on_disk = store_->bytes();
  s.num_files = store_->num_files();
  return s;
}

DiskLatencies DiskTier::drain_latencies() {
  std::lock_guard<std::mutex> lock(mutex_);
  DiskLatencies out;
  std::swap(out, latencies_);
  return out;
}

void DiskTier::flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_cv_.wait(lock, [&] { return reads_.empty() && writes_.empty() && !busy_; });
}

void DiskTier::turn_off(const std::string& why) {
  if (!enabled_.exchange(false)) return;
  std::fprintf(stderr, "tessera: warning: the KV disk tier at %s is off: %s\n", store_->path().c_str(), why.c_str());
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.write_drops += static_cast<int64_t>(writes_.size());
  writes_.clear();
  queued_write_bytes_ = 0;
}

void DiskTier::run() {
  // Far below the compute threads (Linux: a thread's own nice value). On a host whose cores the
  // forward fills, the disk's CPU (a 4k-token prefix of Qwen2.5-0.5B: ~19 ms to read and verify
  // 50 MB, plus ~8 ms of copies into the pool on the engine thread) comes out of the decoding
  // requests; at nice 15 (CFS weight 36 against 1024) the reads take ~3% of a busy core and
  // stretch over ~0.8 s instead of ~0.3 s at nice 10, where the others lost ~12% while a load
  // ran (bench/README.md, B-disk). An idle core still runs them at full speed.
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 15);
  while (true) {
    std::optional<ReadRequest> read;
    std::optional<WriteJob> write;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      busy_ = false;
      idle_cv_.notify_all();
      cv_.wait(lock, [&] { return stop_ || !reads_.empty() || !writes_.empty(); });
      if (!reads_.empty()) {  // a waiting request needs these: they go first
        read = std::move(reads_.front());
        reads_.pop_front();
      } else if (!writes_.empty()) {
        write = std::move(writes_.front());
        writes_.pop_front();
        queued_write_bytes_ -= static_cast<int64_t>(write->payload.size());
      } else {
        return;  // stop_, and everything queued is written
      }
      busy_ = true;
    }
    if (read) do_read(std::move(*read));
    if (write) do_write(std::move(*write));
  }
}

void DiskTier::do_read(ReadRequest req) {
  const auto start = std::chrono::steady_clock::now();
  ReadResult result;
  result.ticket = req.ticket;
  result.index = req.index;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!spare_.empty()) {
      result.payload = std::move(spare_.back());
      spare_.pop_back();
    }
  }
  result.payload.resize(config_.payload_bytes);
  // The header and token ids into a small buffer, the K/V straight into the payload buffer.
  head_.resize(block_file_head_bytes(req.expected.tokens.size()));
  std::optional<int64_t> size;
  if (enabled()) size = store_->read_into(req.expected.key, head_, result.payload);
  if (size) {
    const bool whole = *size == static_cast<int64_t>(head_.size() + result.payload.size());
    if (whole && verify_block_parts(head_, result.payload, req.expected, config_.payload_bytes).empty()) {
      result.status = ReadStatus::kOk;
    } else {
      result.status = ReadStatus::kCorrupt;
      store_->remove(req.expected.key);  // recomputed, and written again whole
    }
  }
  const double seconds = seconds_since(start);
  std::lock_guard<std::mutex> lock(mutex_);
  if (result.status == ReadStatus::kOk) {
    ++stats_.reads;
    stats_.bytes_read += *size;
    latencies_.read_seconds.push_back(seconds);
  } else {
    if (result.status == ReadStatus::kCorrupt) {
      ++stats_.corrupt_blocks;
    } else {
      ++stats_.read_misses;
    }
    if (spare_.size() < kMaxSpare) spare_.push_back(std::move(result.payload));
    result.payload = {};
  }
  done_.push_back(std::move(result));
}

void DiskTier::do_write(WriteJob job) {
  if (!enabled()) return;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<uint8_t> bytes = encode_block_file(job.meta, job.payload);
  WriteResult r = store_->write(job.meta.key, bytes);
  const double seconds = seconds_since(start);
  if (r.status == WriteStatus::kFatal) turn_off(r.error);
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.evictions += r.num_evicted;
  if (config_.record_events) {
    for (uint64_t h : r.evicted_hashes) events_.push_back({.stored = false, .pool_hash = h, .parent_pool_hash = {}, .tokens = {}});
  }
  switch (r.status) {
    case WriteStatus::kWritten:
      ++stats_.writes;
      stats_.bytes_written += static_cast<int64_t>(bytes.size());
      latencies_.write_seconds.push_back(seconds);
      if (config_.record_events) {
        events_.push_back({.stored = true,
                           .pool_hash = job.meta.pool_hash,
                           .parent_pool_hash = job.meta.has_pool_parent ? std::optional<uint64_t>(job.meta.pool_parent_hash)
                                                                        : std::nullopt,
                           .tokens = std::move(job.meta.tokens)});
      }
      break;
    case WriteStatus::kTooLarge:
      ++stats_.write_drops;
      break;
    case WriteStatus::kFailed:
    case WriteStatus::kFatal:
      ++stats_.write_errors;
      break;
  }
}

}  // namespace tessera::kv_disk
