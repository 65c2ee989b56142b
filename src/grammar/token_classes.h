// Token classes: which tokens of the vocabulary a frame accepts, rejects, or leaves to the
// stack below it (the XGrammar split), and the adaptive sets that store them.
//
// A frame is a stack node {position, known parents} of a StackAutomaton; `frame_is_end` says
// the known parents reach the true bottom (the root, entered only at the start), so leaving
// them means the output is over. A token, walked byte by byte from the frame, is
//   accepted  : some path consumes all of its bytes (leaving the frame only at the very end)
//   uncertain : no such path, but some path leaves the frame with bytes still to match
//               (never when frame_is_end: nothing can follow the end)
//   rejected  : every path dies inside the frame
// Tokens are walked in trie order (TokenTable): a prefix that dies decides its whole subtree.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "grammar/stack_automaton.h"
#include "grammar/token_table.h"

namespace tessera::grammar {

struct TokenSplit {
  std::vector<int32_t> accepted;   // ranks in TokenTable::sorted(), ascending
  std::vector<int32_t> uncertain;  // ranks, ascending
};

// Walks every token (candidates == nullptr) or only the ranks set in *candidates, a bitset
// over ranks ([mask_words(num_sorted)] words): a dead prefix skips its subtree in O(words).
TokenSplit classify_tokens(StackAutomaton& automaton, const TokenTable& tokens, int32_t frame,
                           bool frame_is_end, const std::vector<uint64_t>* candidates);
// The same over a short list of candidate ranks (ascending): O(list), not O(vocabulary / 64).
TokenSplit classify_tokens(StackAutomaton& automaton, const TokenTable& tokens, int32_t frame,
                           bool frame_is_end, std::span<const int32_t> candidates);

// The accepted ranks from each of several frames at once, all with frame_is_end (so nothing is
// uncertain), over the ranks set in `candidates`: one walk in which each token's bytes and trie
// links are read once for every frame (the links of an x{m,n} chain), and a prefix's subtree is
// skipped once the prefix died in every frame. [frames.size()] ascending rank lists, each equal
// to classify_tokens(frame, true, &candidates).accepted.
std::vector<std::vector<int32_t>> accepted_from_frames(StackAutomaton& automaton,
                                                      const TokenTable& tokens,
                                                      std::span<const int32_t> frames,
                                                      const std::vector<uint64_t>& candidates);

// Rank bitsets: all ranks, ranks of a list.
std::vector<uint64_t> all_ranks(const TokenTable& tokens);
std::vector<uint64_t> rank_bits(const TokenTable& tokens, const std::vector<int32_t>& ranks);
// Bits set (SWAR: the build targets x86-64 without popcnt, where std::popcount is a call).
size_t count_bits(std::span<const uint64_t> bits);

// A set of token ids stored in whichever form is smallest (XGrammar's adaptive mask cache):
// the ids, the normal ids not in it (TokenTable::normal_mask()), or a bitset.
class TokenSet {
 public:
  enum class Form : uint8_t { kIds, kComplement, kBits };
  // From a bitset over ids ([mask_words] words, only normal tokens set) with `count` bits set
  // (known to the caller: the build has no popcnt instruction to count them cheaply).
  TokenSet(std::span<const uint64_t> bits, size_t count, const TokenTable& tokens);

  // This set plus `more`: ascending ids, none of them in the set. O(size of the stored list)
  // for the list forms, not O(vocabulary).
  TokenSet plus(const std::vector<int32_t>& more, const TokenTable& tokens) const;

  Form form() const { return form_; }
  size_t size() const { return size_; }
  // mask |= this set. `scratch` is [mask words] (used by kComplement).
  void add_to(std::span<uint64_t> mask, std::span<const uint64_t> normal,
              std::vector<uint64_t>& scratch) const;
  void to_bits(std::span<uint64_t> bits, std::span<const uint64_t> normal) const;

 private:
  TokenSet() = default;
  Form form_ = Form::kIds;
  size_t size_ = 0;
  std::vector<int32_t> ids_;    // kIds: members; kComplement: normal ids that are not members
  std::vector<uint64_t> bits_;  // kBits
};

}  // namespace tessera::grammar
