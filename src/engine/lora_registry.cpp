#include "engine/lora_registry.h"

#include <chrono>

#include "kv_disk/disk_key.h"
#include "util/mmap_file.h"
#include "util/status.h"

namespace tessera {

Status LoraRegistry::load(const std::string& name, const std::string& path) {
  if (name.empty() || name.size() > 256) {
    return make_error(ErrorCode::kInvalidArgument, "LoRA adapter name '{}' must be 1 to 256 characters", name);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (loaded_.count(name)) {
      return make_error(ErrorCode::kInvalidArgument, "a LoRA adapter named '{}' is already loaded", name);
    }
  }
  const auto start = std::chrono::steady_clock::now();
  auto adapter = LoraAdapter::load(path, base_, options_);
  if (!adapter) return adapter.error();
  // The file's bytes name its blocks in the prefix cache and the disk tier (see lora_cache_salt).
  auto file = MappedFile::open(path);
  if (!file) return file.error();
  auto entry = std::make_shared<LoadedLora>();
  entry->adapter = std::move(*adapter);
  entry->content_hash = kv_disk::to_hex(kv_disk::hash_bytes(file->bytes()));
  const LoraAdapter& a = *entry->adapter;
  entry->info = {name, path, a.max_rank(), a.alpha(), a.num_targets(), a.bytes(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                 std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch()).count()};
  std::lock_guard<std::mutex> lock(mutex_);
  if (loaded_.count(name)) {  // a concurrent load of the same name won
    return make_error(ErrorCode::kInvalidArgument, "a LoRA adapter named '{}' is already loaded", name);
  }
  entry->generation = next_generation_++;
  loaded_.emplace(name, std::move(entry));
  ever_loaded_.store(true, std::memory_order_relaxed);
  return ok_status();
}

Status LoraRegistry::unload(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (loaded_.erase(name) == 0) return make_error(ErrorCode::kNotFound, "no LoRA adapter named '{}' is loaded", name);
  return ok_status();
}

std::shared_ptr<const LoadedLora> LoraRegistry::find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = loaded_.find(name);
  return it == loaded_.end() ? nullptr : it->second;
}

std::vector<LoraAdapterInfo> LoraRegistry::list() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<LoraAdapterInfo> out;
  for (const auto& [name, entry] : loaded_) out.push_back(entry->info);
  return out;
}

void LoraBlockNames::name(const std::vector<kv::BlockEvent>& records, std::vector<KvCacheEvent>& events) {
  for (size_t i = 0; i < records.size() && i < events.size(); ++i) {
    const kv::BlockEvent& r = records[i];
    switch (r.kind) {
      case kv::BlockEventKind::kStored: {
        const Name* from = nullptr;
        if (auto k = by_key_.find(r.extra_key); k != by_key_.end()) from = &k->second;
        if (from == nullptr && r.has_parent) {
          if (auto p = by_hash_.find(r.parent_hash); p != by_hash_.end()) from = &p->second;
        }
        if (from == nullptr) break;
        events[i].lora_name = from->name;
        events[i].lora_id = from->id;
        Name& n = by_hash_[r.hash];
        if (n.copies == 0) n = {from->name, from->id, 0};
        n.copies += 1;
        break;
      }
      case kv::BlockEventKind::kRemoved:
        if (auto h = by_hash_.find(r.hash); h != by_hash_.end() && --h->second.copies <= 0) by_hash_.erase(h);
        break;
      case kv::BlockEventKind::kAllCleared: by_hash_.clear(); break;
    }
  }
  // The disk tier's events follow the pool's. A block reaches disk under its pool hash, from a pool
  // block that may be evicted by the time the write is reported: named by the pool's record of
  // that hash, else by its parent on disk (a chain never changes adapter).
  for (size_t i = records.size(); i < events.size(); ++i) {
    KvCacheEvent& e = events[i];
    if (e.medium != KvCacheEvent::Medium::kDisk) continue;
    if (e.kind == KvCacheEvent::Kind::kBlockRemoved) {
      on_disk_.erase(e.block_hash);
      continue;
    }
    if (e.kind != KvCacheEvent::Kind::kBlockStored) continue;
    const Name* from = nullptr;
    if (auto h = by_hash_.find(e.block_hash); h != by_hash_.end()) from = &h->second;
    if (from == nullptr && e.parent_block_hash) {
      if (auto p = on_disk_.find(*e.parent_block_hash); p != on_disk_.end()) from = &p->second;
    }
    if (from == nullptr) continue;
    e.lora_name = from->name;
    e.lora_id = from->id;
    on_disk_[e.block_hash] = {from->name, from->id, 1};
  }
}

std::string lora_cache_salt(const std::string& cache_salt, const LoadedLora* lora) {
  if (lora == nullptr) return cache_salt;
  // A separator no tenant salt of the API can hold (the server takes JSON strings; \x1f is a
  // control character a salt has no reason to carry), then the adapter's identity.
  return cache_salt + "\x1flora:" + lora->content_hash;
}

}  // namespace tessera
