#include "grammar/token_classes.h"

#include <algorithm>
#include <bit>
#include <iterator>

namespace tessera::grammar {

namespace {

// The first rank >= from set in `bits` (`end` when none below it).
int32_t next_rank(const std::vector<uint64_t>& bits, int32_t from, int32_t end) {
  if (from >= end) return end;
  size_t w = static_cast<size_t>(from) >> 6;
  uint64_t word = bits[w] & (~uint64_t{0} << (from & 63));
  while (word == 0) {
    if (++w >= bits.size()) return end;
    word = bits[w];
  }
  return std::min(end, static_cast<int32_t>(w * 64 + static_cast<size_t>(std::countr_zero(word))));
}

}  // namespace

namespace {

// The walk, over the ranks next(0), next(r + 1), ... (`next(from)`: the first candidate >= from,
// or num_sorted; `from` never decreases). `every` says next is the identity. kTrackExit: whether
// to note where the frame could be left (not when frame_is_end: nothing is uncertain there, and
// the walk then skips one dependent load per byte).
template <bool kTrackExit, class Next>
TokenSplit classify(StackAutomaton& automaton, const TokenTable& tokens, int32_t frame,
                    bool every, Next next) {
  const auto lcp_prev = tokens.lcp_prev();
  const int32_t num = tokens.num_sorted();
  std::vector<int32_t> states{automaton.node_state(frame)};
  std::vector<uint8_t> exited{0};  // exited[d]: the frame could be left before byte d
  TokenSplit out;
  std::string_view prev;
  int32_t valid = 0;  // states[0..valid] hold the previous token's path
  // The rank right after the previous token, or the end of its dead subtree: the common prefix
  // with the previous token is then lcp_prev[rank] (capped by valid), with no byte compared.
  int32_t adjacent = 0;
  for (int32_t rank = next(0); rank < num;) {
    const std::string_view bytes = tokens.sorted_bytes(rank);
    const auto len = static_cast<int32_t>(bytes.size());
    if (static_cast<int32_t>(states.size()) <= len) {
      states.resize(len + 1);
      if (kTrackExit) exited.resize(len + 1);
    }
    int32_t d = 0;
    if (every || rank == adjacent) {
      d = std::min(rank == 0 ? 0 : lcp_prev[rank], valid);
    } else {
      while (d < valid && d < len && prev[d] == bytes[d]) ++d;
    }
    while (d < len && !automaton.is_dead(states[d])) {
      if (kTrackExit) exited[d + 1] = exited[d] || automaton.can_end(states[d]);
      states[d + 1] = automaton.step(states[d], static_cast<uint8_t>(bytes[d]));
      ++d;
    }
    valid = d;
    prev = bytes;
    if (d == len && !automaton.is_dead(states[d])) {
      out.accepted.push_back(rank);
      adjacent = rank + 1;
      rank = next(rank + 1);
      continue;
    }
    // The prefix bytes[0, d) died: every token under it shares the verdict. The token after
    // the subtree shares fewer than d bytes with this one: lcp_prev there is the common prefix.
    const int32_t end = tokens.subtree_end(rank, d);
    if (kTrackExit && exited[d]) {
      for (; rank < end; rank = next(rank + 1)) out.uncertain.push_back(rank);
    }
    adjacent = end;
    rank = next(end);
  }
  return out;
}

template <class Next>
TokenSplit classify(StackAutomaton& automaton, const TokenTable& tokens, int32_t frame,
                    bool frame_is_end, bool every, Next next) {
  return frame_is_end ? classify<false>(automaton, tokens, frame, every, next)
                      : classify<true>(automaton, tokens, frame, every, next);
}

}  // namespace

TokenSplit classify_tokens(StackAutomaton& automaton, const TokenTable& tokens, int32_t frame,
                           bool frame_is_end, const std::vector<uint64_t>* candidates) {
  const int32_t num = tokens.num_sorted();
  if (!candidates) {
    return classify(automaton, tokens, frame, frame_is_end, true, [](int32_t from) { return from; });
  }
  return classify(automaton, tokens, frame, frame_is_end, false,
                  [&](int32_t from) { return next_rank(*candidates, from, num); });
}

TokenSplit classify_tokens(StackAutomaton& automaton, const TokenTable& tokens, int32_t frame,
                           bool frame_is_end, std::span<const int32_t> candidates) {
  const int32_t num = tokens.num_sorted();
  size_t i = 0;
  return classify(automaton, tokens, frame, frame_is_end, false, [&](int32_t from) {
    while (i < candidates.size() && candidates[i] < from) ++i;
    return i < candidates.size() ? candidates[i] : num;
  });
}

std::vector<std::vector<int32_t>> accepted_from_frames(StackAutomaton& automaton,
                                                      const TokenTable& tokens,
                                                      std::span<const int32_t> frames,
                                                      const std::vector<uint64_t>& candidates) {
  const auto lcp_prev = tokens.lcp_prev();
  const int32_t num = tokens.num_sorted();
  const size_t k = frames.size();
  // states[d * k + f]: frame f's state after the first d bytes of the current token, for f >=
  // first[d], the first frame whose state there is not dead (k: dead in all; a dead state stays
  // dead, so the frames before first[d] are dead at every depth past d too).
  std::vector<int32_t> states(k);
  std::vector<uint32_t> first{static_cast<uint32_t>(k)};
  for (size_t f = k; f-- > 0;) {
    states[f] = automaton.node_state(frames[f]);
    if (!automaton.is_dead(states[f])) first[0] = static_cast<uint32_t>(f);
  }
  std::vector<std::vector<int32_t>> out(k);
  std::string_view prev;
  int32_t valid = 0, adjacent = 0;  // as in classify()
  for (int32_t rank = next_rank(candidates, 0, num); rank < num;) {
    const std::string_view bytes = tokens.sorted_bytes(rank);
    const auto len = static_cast<int32_t>(bytes.size());
    if (first.size() <= static_cast<size_t>(len)) {
      first.resize(len + 1);
      states.resize((len + 1) * k);
    }
    int32_t d = 0;
    if (rank == adjacent) {
      d = std::min(rank == 0 ? 0 : lcp_prev[rank], valid);
    } else {
      while (d < valid && d < len && prev[d] == bytes[d]) ++d;
    }
    while (d < len && first[d] < k) {
      const int32_t* from = &states[d * k];
      int32_t* to = &states[(d + 1) * k];
      uint32_t next_first = static_cast<uint32_t>(k);
      for (size_t f = k; f-- > first[d];) {
        to[f] = automaton.is_dead(from[f]) ? StackAutomaton::kDeadState
                                           : automaton.step(from[f], static_cast<uint8_t>(bytes[d]));
        if (!automaton.is_dead(to[f])) next_first = static_cast<uint32_t>(f);
      }
      first[++d] = next_first;
    }
    valid = d;
    prev = bytes;
    if (d == len && first[d] < k) {
      for (size_t f = first[d]; f < k; ++f) {
        if (!automaton.is_dead(states[d * k + f])) out[f].push_back(rank);
      }
      adjacent = rank + 1;
      rank = next_rank(candidates, rank + 1, num);
      continue;
    }
    adjacent = tokens.subtree_end(rank, d);  // dead in every frame: the whole subtree
    rank = next_rank(candidates, adjacent, num);
  }
  return out;
}

std::vector<uint64_t> all_ranks(const TokenTable& tokens) {
  const int32_t num = tokens.num_sorted();
  std::vector<uint64_t> bits(mask_words(num), ~uint64_t{0});
  if (num % 64) bits.back() = (uint64_t{1} << (num % 64)) - 1;
  return bits;
}

std::vector<uint64_t> rank_bits(const TokenTable& tokens, const std::vector<int32_t>& ranks) {
  std::vector<uint64_t> bits(mask_words(tokens.num_sorted()), 0);
  for (int32_t r : ranks) mask_set(bits, r);
  return bits;
}

size_t count_bits(std::span<const uint64_t> bits) {
  size_t n = 0;
  for (uint64_t x : bits) {
    x -= (x >> 1) & 0x5555555555555555ull;
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
    n += static_cast<size_t>((x * 0x0101010101010101ull) >> 56);
  }
  return n;
}

TokenSet::TokenSet(std::span<const uint64_t> bits, size_t count, const TokenTable& tokens) {
  const auto normal = tokens.normal_mask();
  const auto num_normal = static_cast<size_t>(tokens.num_sorted());
  size_ = count;
  // A list of k ids costs 4k bytes, the bitset 8 per word.
  const size_t list_limit = 2 * bits.size();
  auto collect = [&](auto word_of) {
    for (size_t w = 0; w < bits.size(); ++w) {
      for (uint64_t x = word_of(w); x; x &= x - 1) {
        ids_.push_back(static_cast<int32_t>(w * 64 + static_cast<size_t>(std::countr_zero(x))));
      }
    }
  };
  if (count <= list_limit) {
    form_ = Form::kIds;
    collect([&](size_t w) { return bits[w]; });
  } else if (num_normal - count <= list_limit) {
    form_ = Form::kComplement;
    collect([&](size_t w) { return normal[w] & ~bits[w]; });
  } else {
    form_ = Form::kBits;
    bits_.assign(bits.begin(), bits.end());
  }
}

TokenSet TokenSet::plus(const std::vector<int32_t>& more, const TokenTable& tokens) const {
  const size_t list_limit = 2 * mask_words(tokens.vocab_size());
  const auto num_normal = static_cast<size_t>(tokens.num_sorted());
  const size_t size = size_ + more.size();
  if (form_ == Form::kComplement || (form_ == Form::kIds && size <= list_limit)) {
    TokenSet out;
    out.form_ = form_;
    out.size_ = size;
    if (form_ == Form::kIds) {
      std::merge(ids_.begin(), ids_.end(), more.begin(), more.end(), std::back_inserter(out.ids_));
    } else {
      std::set_difference(ids_.begin(), ids_.end(), more.begin(), more.end(),
                          std::back_inserter(out.ids_));
    }
    if (out.form_ == Form::kIds || num_normal - size <= list_limit || out.ids_.size() <= list_limit) {
      return out;
    }
  }
  if (form_ == Form::kBits && num_normal - size > list_limit) {  // stays a bitset: one copy
    TokenSet out;
    out.form_ = Form::kBits;
    out.size_ = size;
    out.bits_ = bits_;
    for (int32_t id : more) mask_set(out.bits_, id);
    return out;
  }
  std::vector<uint64_t> bits(mask_words(tokens.vocab_size()));
  to_bits(bits, tokens.normal_mask());
  for (int32_t id : more) mask_set(bits, id);
  return TokenSet(bits, size, tokens);
}

void TokenSet::add_to(std::span<uint64_t> mask, std::span<const uint64_t> normal,
                      std::vector<uint64_t>& scratch) const {
  switch (form_) {
    case Form::kIds:
      for (int32_t id : ids_) mask_set(mask, id);
      break;
    case Form::kBits:
      for (size_t w = 0; w < mask.size(); ++w) mask[w] |= bits_[w];
      break;
    case Form::kComplement:
      scratch.assign(normal.begin(), normal.end());
      for (int32_t id : ids_) mask_clear(scratch, id);
      for (size_t w = 0; w < mask.size(); ++w) mask[w] |= scratch[w];
      break;
  }
}

void TokenSet::to_bits(std::span<uint64_t> bits, std::span<const uint64_t> normal) const {
  std::fill(bits.begin(), bits.end(), 0);
  std::vector<uint64_t> scratch;
  add_to(bits, normal, scratch);
}

}  // namespace tessera::grammar
