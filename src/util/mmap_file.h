// A read-only memory-mapped file. Move-only; unmaps on destruction.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "util/status.h"

namespace tessera {

class MappedFile {
 public:
  static Result<MappedFile> open(const std::string& path);
  // Wraps bytes already in memory (tests, fuzzing); the caller keeps them alive.
  static MappedFile from_memory(const void* data, size_t size);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool owned_ = false;  // true when data_ came from mmap
  std::string path_;
};

}  // namespace tessera
