#include "kv/block_hash.h"

#define XXH_STATIC_LINKING_ONLY  // exposes XXH3_state_t so the state can live on the stack
#include <xxhash.h>

#include "util/check.h"

namespace tessera::kv {

BlockHash hash_block_tokens(BlockHash parent_hash, std::span<const int32_t> tokens,
                            uint64_t extra_key) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, &parent_hash, sizeof(parent_hash));
  XXH3_64bits_update(&state, tokens.data(), tokens.size_bytes());
  XXH3_64bits_update(&state, &extra_key, sizeof(extra_key));
  return XXH3_64bits_digest(&state);
}

uint64_t group_key(uint64_t key, int32_t group) {
  if (group == 0) return key;
  constexpr uint64_t kGroupSalt = 0x9a0c5e1f3b7d2468ULL;
  return hash_block_tokens(key ^ kGroupSalt, {}, static_cast<uint64_t>(group)) | 1;  // never 0
}

uint64_t block_extra_key(uint64_t salt_key, size_t index, int32_t group) {
  return group_key(index == 0 ? salt_key : 0, group);
}

uint64_t hash_cache_salt(std::string_view salt) {
  if (salt.empty()) return 0;
  return XXH3_64bits(salt.data(), salt.size()) | 1;  // never 0, which means "no salt"
}

std::span<const int32_t> TokenRun::range(size_t begin, size_t n, std::vector<int32_t>& scratch) const {
  TESSERA_CHECK(begin + n <= size(), "range [{}, {}) of {} tokens", begin, begin + n, size());
  if (begin + n <= head.size()) return head.subspan(begin, n);
  if (begin >= head.size()) return tail.subspan(begin - head.size(), n);
  scratch.assign(head.begin() + static_cast<std::ptrdiff_t>(begin), head.end());
  scratch.insert(scratch.end(), tail.begin(), tail.begin() + static_cast<std::ptrdiff_t>(begin + n - head.size()));
  return scratch;
}

void extend_block_hashes(std::vector<BlockHash>& hashes, TokenRun token_ids, int32_t block_size,
                         uint64_t extra_key) {
  TESSERA_CHECK(block_size > 0, "block_size {}", block_size);
  const size_t num_full = token_ids.size() / static_cast<size_t>(block_size);
  std::vector<int32_t> scratch;  // only for the block where prompt and output meet
  while (hashes.size() < num_full) {
    const size_t index = hashes.size();
    const BlockHash parent = index == 0 ? kRootBlockHash : hashes[index - 1];
    hashes.push_back(hash_block_tokens(parent, token_ids.range(index * block_size, block_size, scratch),
                                       index == 0 ? extra_key : 0));
  }
}

}  // namespace tessera::kv
