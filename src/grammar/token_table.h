// TokenTable: the vocabulary as the grammar engine sees it: each token's bytes, sorted so that
// tokens sharing a prefix are neighbours (a trie laid out flat), and the stop tokens.
//
// A trie node is (rank, depth): the first `depth` bytes of the token at `rank`; its subtree is
// the rank range [rank', subtree_end(rank, depth)) of tokens with that prefix. Walking tokens
// in sorted order with one automaton state per prefix depth visits each trie node once (the
// state of the common prefix with the previous token is reused, lcp_prev), and a prefix that
// dies skips its whole subtree with one table read.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::grammar {

struct TokenVocabulary {
  std::vector<std::string> bytes;  // [vocab_size] a token's bytes; "" for control/special tokens
  std::vector<int32_t> stop_ids;   // tokens that end a generation (EOS, EOT, ...)
};

// Bitset over the vocabulary: [ceil(vocab / 64)] words, bit i = token i allowed.
inline size_t mask_words(int32_t vocab_size) { return (static_cast<size_t>(vocab_size) + 63) / 64; }
inline bool mask_test(std::span<const uint64_t> mask, int32_t id) {
  return (mask[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
}
inline void mask_set(std::span<uint64_t> mask, int32_t id) {
  mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
}
inline void mask_clear(std::span<uint64_t> mask, int32_t id) {
  mask[static_cast<size_t>(id) >> 6] &= ~(uint64_t{1} << (id & 63));
}

class TokenTable {
 public:
  explicit TokenTable(TokenVocabulary vocab);

  int32_t vocab_size() const { return static_cast<int32_t>(vocab_.bytes.size()); }
  std::string_view bytes(int32_t id) const { return vocab_.bytes[id]; }
  std::span<const int32_t> stop_ids() const { return vocab_.stop_ids; }
  bool is_stop(int32_t id) const;

  // Tokens with bytes, sorted by bytes: sorted()[rank] = id.
  std::span<const int32_t> sorted() const { return sorted_; }
  int32_t num_sorted() const { return static_cast<int32_t>(sorted_.size()); }
  // The bytes of the token at `rank` (contiguous in rank order: walks stay in cache).
  std::string_view sorted_bytes(int32_t rank) const {
    return std::string_view(arena_).substr(offset_[rank], offset_[rank + 1] - offset_[rank]);
  }
  // lcp_prev()[rank]: common prefix length with the token at rank - 1 (0 at rank 0).
  std::span<const int32_t> lcp_prev() const { return lcp_prev_; }
  // First rank after `rank` whose token does not start with the first `depth` bytes of the
  // token at `rank` (the end of that trie subtree); 1 <= depth <= its length, or 0 (the end).
  int32_t subtree_end(int32_t rank, int32_t depth) const {
    return depth == 0 ? num_sorted() : subtree_end_[offset_[rank] + depth - 1];
  }
  // The ranks of tokens longer than `bytes` bytes, longest first (a prefix of one array sorted
  // by length: compiling a repetition chain walks only the tokens that can outrun a link).
  std::span<const int32_t> ranks_longer_than(int32_t bytes) const;
  // The ids with bytes (every id that is neither empty nor a stop token), as a mask.
  std::span<const uint64_t> normal_mask() const { return normal_mask_; }
  // A stable fingerprint of the bytes and stop ids (FNV-1a; the grammar cache's key part and
  // the XGrammar goldens' check that both sides read the same vocabulary).
  uint64_t fingerprint() const { return fingerprint_; }

 private:
  TokenVocabulary vocab_;
  std::vector<int32_t> sorted_, lcp_prev_;
  std::string arena_;                  // sorted tokens' bytes, concatenated
  std::vector<uint32_t> offset_;       // [num_sorted + 1] into arena_
  std::vector<int32_t> subtree_end_;   // [arena bytes]: subtree_end(rank, d) at offset_[rank] + d - 1
  std::vector<int32_t> by_length_;     // [num_sorted] ranks, byte length descending
  std::vector<uint64_t> normal_mask_;
  std::vector<uint8_t> is_stop_;
  uint64_t fingerprint_ = 0;
};

}  // namespace tessera::grammar
