#include "kv/free_block_queue.h"

#include "util/check.h"

namespace tessera::kv {

FreeBlockQueue::FreeBlockQueue(int32_t num_blocks)
    : prev_(static_cast<size_t>(num_blocks) + 2, kNoLink),
      next_(static_cast<size_t>(num_blocks) + 2, kNoLink) {
  TESSERA_CHECK(num_blocks >= 0, "num_blocks {}", num_blocks);
  next_[head()] = tail();
  prev_[tail()] = head();
}

int32_t FreeBlockQueue::front() const {
  TESSERA_CHECK(size_ > 0, "front() of an empty free queue");
  return next_[head()];
}

int32_t FreeBlockQueue::pop_front() {
  const int32_t id = front();
  remove(id);
  return id;
}

void FreeBlockQueue::push_back(int32_t block_id) {
  TESSERA_CHECK(block_id >= 0 && block_id < head(), "block id {} out of range", block_id);
  TESSERA_CHECK(!contains(block_id), "block {} is already in the free queue", block_id);
  const int32_t last = prev_[tail()];
  next_[last] = block_id;
  prev_[block_id] = last;
  next_[block_id] = tail();
  prev_[tail()] = block_id;
  ++size_;
}

void FreeBlockQueue::remove(int32_t block_id) {
  TESSERA_CHECK(block_id >= 0 && block_id < head(), "block id {} out of range", block_id);
  TESSERA_CHECK(contains(block_id), "block {} is not in the free queue", block_id);
  const int32_t before = prev_[block_id];
  const int32_t after = next_[block_id];
  next_[before] = after;
  prev_[after] = before;
  prev_[block_id] = kNoLink;
  next_[block_id] = kNoLink;
  --size_;
}

std::vector<int32_t> FreeBlockQueue::to_vector() const {
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(size_));
  for (int32_t id = next_[head()]; id != tail(); id = next_[id]) {
    TESSERA_CHECK(id >= 0 && static_cast<int32_t>(out.size()) < size_, "free queue is corrupt");
    out.push_back(id);
  }
  TESSERA_CHECK(static_cast<int32_t>(out.size()) == size_, "free queue size {} but {} linked",
                size_, out.size());
  return out;
}

}  // namespace tessera::kv
