#include "kv_disk/disk_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <algorithm>
#include <cstring>

#include "kv_disk/block_file.h"

namespace tessera::kv_disk {

namespace {

constexpr const char* kSuffix = ".kvb";
constexpr int64_t kStaleTempNs = int64_t{60} * 1000 * 1000 * 1000;  // a crashed writer's leftovers

int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}
int64_t mtime_ns(const struct stat& st) { return int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec; }

Status make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return ok_status();
    return make_error(ErrorCode::kInvalidArgument, "{} is not a directory", path);
  }
  return make_error(ErrorCode::kInvalidArgument, "cannot create {}: {}", path, std::strerror(errno));
}

// Errors after which no later write can succeed: the tier turns itself off.
bool is_fatal(int err) {
  return err == EACCES || err == EPERM || err == EROFS || err == ENOSPC || err == EDQUOT || err == EFBIG ||
         err == ENOTDIR || err == ENOENT;
}

}  // namespace

Result<std::unique_ptr<DiskStore>> DiskStore::open(const DiskStoreConfig& config) {
  if (config.dir.empty()) return make_error(ErrorCode::kInvalidArgument, "no directory");
  if (config.max_bytes <= 0) return make_error(ErrorCode::kInvalidArgument, "budget {} bytes", config.max_bytes);
  TESSERA_TRY(make_dir(config.dir));
  std::unique_ptr<DiskStore> store(new DiskStore());
  store->path_ = config.dir + "/" + to_hex(config.ns);
  TESSERA_TRY(make_dir(store->path_));
  // Writable? A probe file, so an unwritable directory turns the tier off at start-up.
  const std::string probe = store->path_ + "/.probe." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return make_error(ErrorCode::kInvalidArgument, "cannot write in {}: {}", store->path_, std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  store->max_bytes_ = config.max_bytes;
  std::lock_guard<std::mutex> lock(store->mutex_);
  store->rescan_locked();
  return store;
}

std::string DiskStore::file_of(const DiskKey& key) const { return path_ + "/" + to_hex(key) + kSuffix; }

void DiskStore::insert_locked(const DiskKey& key, int64_t bytes, int64_t last_use_ns) {
  erase_locked(key);
  index_[key] = {bytes, last_use_ns};
  lru_.emplace(last_use_ns, key);
  bytes_ += bytes;
}

void DiskStore::erase_locked(const DiskKey& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return;
  auto [lo, hi] = lru_.equal_range(it->second.last_use_ns);
  for (auto l = lo; l != hi; ++l) {
    if (l->second == key) {
      lru_.erase(l);
      break;
    }
  }
  bytes_ -= it->second.bytes;
  index_.erase(it);
}

int64_t DiskStore::dir_mtime_ns() const {
  struct stat st {};
  return ::stat(path_.c_str(), &st) == 0 ? mtime_ns(st) : 0;
}

void DiskStore::rescan_locked() {
  dir_mtime_ns_ = dir_mtime_ns();
  // File times are coarse (a kernel tick): a file this process used keeps its finer last use.
  std::unordered_map<DiskKey, Entry, DiskKeyHash> known;
  known.swap(index_);
  lru_.clear();
  bytes_ = 0;
  DIR* dir = ::opendir(path_.c_str());
  if (dir == nullptr) return;
  const int dfd = ::dirfd(dir);
  const int64_t now = wall_ns();
  while (const dirent* e = ::readdir(dir)) {
    const std::string_view name(e->d_name);
    struct stat st {};
    if (name.size() == 32 + std::strlen(kSuffix) && name.ends_with(kSuffix)) {
      DiskKey key;
      if (!parse_disk_key(name.substr(0, 32), &key)) continue;
      if (::fstatat(dfd, e->d_name, &st, 0) != 0 || !S_ISREG(st.st_mode)) continue;
      auto k = known.find(key);
      insert_locked(key, st.st_size, std::max(mtime_ns(st), k == known.end() ? 0 : k->second.last_use_ns));
    } else if (name.find(".tmp.") != std::string_view::npos) {
      // Another writer's file in flight counts against the budget; a crashed writer's is removed.
      if (::fstatat(dfd, e->d_name, &st, 0) != 0) continue;
      if (now - mtime_ns(st) > kStaleTempNs) {
        ::unlinkat(dfd, e->d_name, 0);
      } else {
        bytes_ += st.st_size;
      }
    }
  }
  ::closedir(dir);
}

void DiskStore::rescan() {
  std::lock_guard<std::mutex> lock(mutex_);
  rescan_locked();
}

bool DiskStore::contains(const DiskKey& key) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (index_.count(key) != 0) return true;
  }
  struct stat st {};
  if (::stat(file_of(key).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  insert_locked(key, st.st_size, mtime_ns(st));
  return true;
}

void DiskStore::evict_locked(int64_t incoming, WriteResult& result) {
  while (bytes_ + incoming > max_bytes_ && !lru_.empty()) {
    const DiskKey victim = lru_.begin()->second;
    const std::string path = file_of(victim);
    // The pool hash for the DISK BlockRemoved event: the header's first bytes.
    uint8_t header[kBlockFileHeaderBytes];
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      uint64_t hash = 0;
      if (::read(fd, header, sizeof(header)) == static_cast<ssize_t>(sizeof(header)) &&
          read_pool_hash({header, sizeof(header)}, &hash)) {
        result.evicted_hashes.push_back(hash);
      }
      ::close(fd);
    }
    if (::unlink(path.c_str()) == 0) ++result.num_evicted;  // gone already: another process evicted it
    erase_locked(victim);
  }
}

WriteResult DiskStore::write(const DiskKey& key, std::span<const uint8_t> bytes) {
  WriteResult result;
  const auto size = static_cast<int64_t>(bytes.size());
  if (size > max_bytes_) {
    result.status = WriteStatus::kTooLarge;
    return result;
  }
  std::string temp;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Another process changed the directory since our last look (its mtime moved): rescan, so
    // the budget counts its files too.
    if (dir_mtime_ns() != dir_mtime_ns_) rescan_locked();
    erase_locked(key);  // a rewrite replaces the file: its old bytes leave the count
    evict_locked(size, result);
    dir_mtime_ns_ = dir_mtime_ns();
    temp = path_ + "/" + to_hex(key) + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(temp_counter_++);
  }
  auto fail = [&](int err, const char* what) {
    ::unlink(temp.c_str());
    result.status = is_fatal(err) ? WriteStatus::kFatal : WriteStatus::kFailed;
    result.error = std::string(what) + " " + temp + ": " + std::strerror(err);
    return result;
  };
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return fail(errno, "open");
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      ::close(fd);
      return fail(err, "write");
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return fail(errno, "close");
  if (::rename(temp.c_str(), file_of(key).c_str()) != 0) return fail(errno, "rename");
  std::lock_guard<std::mutex> lock(mutex_);
  insert_locked(key, size, wall_ns());
  dir_mtime_ns_ = dir_mtime_ns();  // our own rename
  return result;
}

int DiskStore::open_for_read(const DiskKey& key) {
  const int fd = ::open(file_of(key).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    erase_locked(key);
  }
  return fd;
}

void DiskStore::close_after_read(const DiskKey& key, int fd, int64_t size) {
  ::futimens(fd, nullptr);  // last use = now, for every process's LRU
  ::close(fd);
  std::lock_guard<std::mutex> lock(mutex_);
  insert_locked(key, size, wall_ns());
}

std::optional<std::vector<uint8_t>> DiskStore::read(const DiskKey& key) {
  const int fd = open_for_read(key);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::vector<uint8_t> out;
  if (::fstat(fd, &st) == 0 && st.st_size >= 0) {
    out.resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    out.resize(done);
  }
  close_after_read(key, fd, static_cast<int64_t>(st.st_size));
  return out;
}

std::optional<int64_t> DiskStore::read_into(const DiskKey& key, std::span<uint8_t> head, std::span<uint8_t> payload) {
  const int fd = open_for_read(key);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  int64_t size = ::fstat(fd, &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
  if (size == static_cast<int64_t>(head.size() + payload.size())) {
    // One preadv for both parts; a short read (the file shrank under us) reports the bytes read.
    size_t done = 0;
    const size_t total = head.size() + payload.size();
    while (done < total) {
      iovec iov[2];
      int n_iov = 0;
      if (done < head.size()) iov[n_iov++] = {head.data() + done, head.size() - done};
      const size_t pdone = done > head.size() ? done - head.size() : 0;
      iov[n_iov++] = {payload.data() + pdone, payload.size() - pdone};
      const ssize_t n = ::preadv(fd, iov, n_iov, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    if (done != total) size = static_cast<int64_t>(done);
  }
  close_after_read(key, fd, std::max<int64_t>(size, 0));
  return size;
}

void DiskStore::remove(const DiskKey& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  ::unlink(file_of(key).c_str());
  erase_locked(key);
  dir_mtime_ns_ = dir_mtime_ns();
}

int64_t DiskStore::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

int64_t DiskStore::num_files() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(index_.size());
}

std::vector<DiskKey> DiskStore::lru_order() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<DiskKey> out;
  for (const auto& [t, key] : lru_) out.push_back(key);
  return out;
}

}  // namespace tessera::kv_disk
