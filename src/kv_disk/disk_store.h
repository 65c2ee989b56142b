// DiskStore: the block files of one namespace in one directory, DIR/<namespace hex>/<key hex>.kvb,
// under a byte budget. Synchronous file operations: the I/O thread (disk_tier.h) calls write, read
// and remove; any thread may call contains (the engine thread's admission lookups).
//
// Writes are atomic: the bytes go to a temp file (<key>.tmp.<pid>.<n>) renamed over the final
// name, so a reader (this or another process) sees a whole old file, a whole new one, or none;
// two writers of one key both rename a whole file. Nothing is locked across processes.
//
// Budget (LRU by last use): a file's mtime is its last use (set on write, touched on read). Before
// a write that would pass the budget the store evicts the least recently used files. Its byte count
// is an in-process index; another process sharing the directory (a second replica) adds and
// deletes files it does not see, so before each write the store compares the directory's mtime
// with the one after its own last change and rescans (names, sizes, mtimes) when another process
// moved it: the directory stays within the budget plus one block per concurrent writer.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv_disk/disk_key.h"
#include "util/status.h"

namespace tessera::kv_disk {

struct DiskStoreConfig {
  std::string dir;          // the tier's root (--kv-cache-dir); created if missing
  DiskKey ns;               // namespace: the subdirectory
  int64_t max_bytes = 0;    // budget of this namespace's files
};

enum class WriteStatus {
  kWritten,
  kTooLarge,   // one file larger than the whole budget: not written
  kFailed,     // an I/O error that may pass (counted)
  kFatal,      // the directory cannot take files (unwritable, full, read-only): turn the tier off
};

struct WriteResult {
  WriteStatus status = WriteStatus::kWritten;
  std::string error;                    // kFailed / kFatal: what failed
  std::vector<uint64_t> evicted_hashes;  // pool hashes of the files evicted to make room
  int64_t num_evicted = 0;               // files evicted (hashes of unreadable ones are missing)
};

class DiskStore {
 public:
  // Creates DIR/<ns>/ (and DIR) and indexes the files already there. An error names the path.
  static Result<std::unique_ptr<DiskStore>> open(const DiskStoreConfig& config);

  const std::string& path() const { return path_; }  // DIR/<ns hex>
  std::string file_of(const DiskKey& key) const;
  int64_t max_bytes() const { return max_bytes_; }

  // Whether a file for key exists: the index, else a stat (a file another process wrote).
  bool contains(const DiskKey& key);
  WriteResult write(const DiskKey& key, std::span<const uint8_t> bytes);
  // The file's bytes (and its mtime touched: last use), or nullopt when it is missing/unreadable.
  std::optional<std::vector<uint8_t>> read(const DiskKey& key);
  // The file read in two parts straight into the caller's buffers (no copy of its own): `head`
  // then `payload`, each filled only if the file has exactly head + payload bytes. The file's size
  // (another size = a damaged file: nothing read), or nullopt when it is missing. Touches its mtime.
  std::optional<int64_t> read_into(const DiskKey& key, std::span<uint8_t> head, std::span<uint8_t> payload);
  // Deletes a damaged file.
  void remove(const DiskKey& key);
  // Re-reads the directory's names, sizes and mtimes (the other writers' files).
  void rescan();

  int64_t bytes() const;       // the estimate of this namespace's bytes on disk
  int64_t num_files() const;
  // Files in LRU order, oldest first (tests).
  std::vector<DiskKey> lru_order() const;

 private:
  struct Entry {
    int64_t bytes = 0;
    int64_t last_use_ns = 0;   // wall clock (the files' mtimes), comparable across processes
  };
  DiskStore() = default;
  void insert_locked(const DiskKey& key, int64_t bytes, int64_t last_use_ns);
  void erase_locked(const DiskKey& key);
  void rescan_locked();
  // Opens key's file for reading (-1: missing, and dropped from the index).
  int open_for_read(const DiskKey& key);
  // Touches the file's mtime (last use, for every process's LRU), closes it, and re-indexes it.
  void close_after_read(const DiskKey& key, int fd, int64_t size);
  int64_t dir_mtime_ns() const;
  // Evicts oldest-first until bytes_ + incoming <= max_bytes_ (false if it cannot).
  void evict_locked(int64_t incoming, WriteResult& result);

  std::string path_;
  int64_t max_bytes_ = 0;
  mutable std::mutex mutex_;
  std::unordered_map<DiskKey, Entry, DiskKeyHash> index_;
  std::multimap<int64_t, DiskKey> lru_;  // last use -> key
  int64_t bytes_ = 0;
  int64_t dir_mtime_ns_ = 0;             // the directory's mtime after our last change or rescan
  uint64_t temp_counter_ = 0;
};

}  // namespace tessera::kv_disk
