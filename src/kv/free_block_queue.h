// FreeBlockQueue: the blocks with ref_cnt == 0, as a doubly linked list threaded through block
// indices (no nodes, no allocation after construction). Order is eviction order: the front is
// popped first (least recently freed), freed blocks are appended at the back, and a cached block hit
// by a new request is unlinked from the middle in O(1).
// Invariants: a block is in the queue at most once; links of blocks not in the queue are kNoLink;
// the two sentinels (indices num_blocks and num_blocks + 1) are never handed out.
#pragma once
#include <cstdint>
#include <vector>

namespace tessera::kv {

class FreeBlockQueue {
 public:
  static constexpr int32_t kNoLink = -1;

  explicit FreeBlockQueue(int32_t num_blocks);

  int32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  bool contains(int32_t block_id) const { return prev_[block_id] != kNoLink; }
  int32_t front() const;                  // first block id; queue must not be empty

  int32_t pop_front();                    // removes and returns the front block
  void push_back(int32_t block_id);       // block must not be in the queue
  void remove(int32_t block_id);          // O(1) unlink from anywhere; block must be in the queue

  std::vector<int32_t> to_vector() const;  // front to back, for tests and integrity checks

 private:
  int32_t head() const { return static_cast<int32_t>(prev_.size()) - 2; }
  int32_t tail() const { return static_cast<int32_t>(prev_.size()) - 1; }

  std::vector<int32_t> prev_;  // [num_blocks + 2] previous index, kNoLink when not queued
  std::vector<int32_t> next_;  // [num_blocks + 2] next index, kNoLink when not queued
  int32_t size_ = 0;           // number of queued blocks
};

}  // namespace tessera::kv
