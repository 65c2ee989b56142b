#include "util/huge_buffer.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>
#include <utility>

namespace tessera {
namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

HugeBuffer::HugeBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  mapped_ = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  // Map one huge page more than needed and trim, so the buffer starts on a 2 MiB boundary (the
  // kernel backs only aligned 2 MiB ranges with huge pages).
  void* raw = mmap(nullptr, mapped_ + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  auto* start = static_cast<uint8_t*>(raw);
  const size_t lead = (kHugePage - reinterpret_cast<uintptr_t>(start) % kHugePage) % kHugePage;
  if (lead > 0) munmap(start, lead);
  if (kHugePage - lead > 0) munmap(start + lead + mapped_, kHugePage - lead);
  data_ = start + lead;
#if defined(MADV_HUGEPAGE)
  if (std::getenv("TESSERA_NO_HUGE_PAGES") == nullptr) {
    madvise(data_, mapped_, MADV_HUGEPAGE);  // advice only: no huge pages is not an error
  }
#endif
  // Fault every page in now (the kernel zero-fills it), so the first request to write a page does
  // not pay for clearing 2 MiB inside a step.
  for (size_t at = 0; at < mapped_; at += 4096) data_[at] = 0;
}

HugeBuffer::~HugeBuffer() {
  if (data_ != nullptr) munmap(data_, mapped_);
}

HugeBuffer::HugeBuffer(HugeBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

HugeBuffer& HugeBuffer::operator=(HugeBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, mapped_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

}  // namespace tessera
