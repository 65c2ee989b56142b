// HugeBuffer: a zero-filled, 64-byte-aligned block of anonymous memory that asks the kernel for
// 2 MiB pages (madvise MADV_HUGEPAGE; Linux's default THP mode "madvise" honours it).
//
// Why: the paged KV cache is read in 2 KiB pieces scattered over hundreds of MiB (every block of
// every layer of every running sequence, each step), and the packed weights are streamed each step.
// With 4 KiB pages a batch-16 decode step touches ~12k distinct pages of KV, far past the
// second-level TLB (2k entries), so page walks stall the attention's loads; 2 MiB pages cover the
// same bytes with a few hundred entries. Where huge pages are unavailable this is plain memory;
// TESSERA_NO_HUGE_PAGES=1 in the environment skips the advice (before/after comparisons).
#pragma once
#include <cstddef>
#include <cstdint>

namespace tessera {

class HugeBuffer {
 public:
  HugeBuffer() = default;
  // Throws std::bad_alloc when the memory cannot be mapped.
  explicit HugeBuffer(size_t bytes);
  ~HugeBuffer();
  HugeBuffer(HugeBuffer&& other) noexcept;
  HugeBuffer& operator=(HugeBuffer&& other) noexcept;
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;     // bytes asked for
  size_t mapped_ = 0;   // bytes mapped (size_ rounded up to whole 2 MiB pages)
};

}  // namespace tessera
