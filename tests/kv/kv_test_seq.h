// Helpers of the kv/ tests: a hand-built sequence with its block hashes, and token ranges.
#pragma once
#include <numeric>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace tessera::kv::kvtest {

using V = std::vector<int32_t>;

// A hand-built sequence: its tokens and incrementally computed block hashes.
struct TestSeq {
  int64_t id;
  V tokens;
  std::vector<BlockHash> hashes;
  uint64_t extra_key = 0;
  TestSeq(int64_t seq_id, V token_ids, int32_t block_size, uint64_t key = 0)
      : id(seq_id), tokens(std::move(token_ids)), extra_key(key) {
    extend_block_hashes(hashes, tokens, block_size, extra_key);
  }
  SeqTokens view() const { return {id, tokens, hashes, extra_key}; }
};

// [start, start + n) as token ids.
inline V iota(int32_t n, int32_t start) {
  V v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

}  // namespace tessera::kv::kvtest
