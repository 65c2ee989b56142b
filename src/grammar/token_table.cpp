#include "grammar/token_table.h"

#include <algorithm>

namespace tessera::grammar {

TokenTable::TokenTable(TokenVocabulary vocab) : vocab_(std::move(vocab)) {
  const int32_t n = vocab_size();
  is_stop_.assign(static_cast<size_t>(n), 0);
  for (int32_t id : vocab_.stop_ids) {
    if (id >= 0 && id < n) is_stop_[id] = 1;
  }
  normal_mask_.assign(mask_words(n), 0);
  for (int32_t id = 0; id < n; ++id) {
    if (!vocab_.bytes[id].empty() && !is_stop_[id]) {
      sorted_.push_back(id);
      mask_set(normal_mask_, id);
    }
  }
  std::sort(sorted_.begin(), sorted_.end(), [&](int32_t a, int32_t b) {
    return vocab_.bytes[a] != vocab_.bytes[b] ? vocab_.bytes[a] < vocab_.bytes[b] : a < b;
  });
  lcp_prev_.assign(sorted_.size(), 0);
  for (size_t r = 1; r < sorted_.size(); ++r) {
    const std::string& a = vocab_.bytes[sorted_[r - 1]];
    const std::string& b = vocab_.bytes[sorted_[r]];
    size_t k = 0;
    while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
    lcp_prev_[r] = static_cast<int32_t>(k);
  }
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint8_t b) { h = (h ^ b) * 1099511628211ull; };
  for (const auto& s : vocab_.bytes) {
    for (char c : s) mix(static_cast<uint8_t>(c));
    mix(0xFF), mix(0x00);
  }
  for (int32_t id : vocab_.stop_ids) mix(static_cast<uint8_t>(id)), mix(static_cast<uint8_t>(id >> 8));
  fingerprint_ = h;
}

bool TokenTable::is_stop(int32_t id) const {
  return id >= 0 && id < vocab_size() && is_stop_[id];
}

int32_t TokenTable::subtree_end(int32_t rank, int32_t depth) const {
  // Ranks after `rank` share the prefix while lcp_prev stays >= depth; binary search over the
  // sorted strings for the first one past the prefix.
  const std::string_view prefix = std::string_view(vocab_.bytes[sorted_[rank]]).substr(0, depth);
  auto it = std::upper_bound(sorted_.begin() + rank, sorted_.end(), prefix,
                             [&](std::string_view p, int32_t id) {
                               return p < std::string_view(vocab_.bytes[id]).substr(0, p.size());
                             });
  return static_cast<int32_t>(it - sorted_.begin());
}

}  // namespace tessera::grammar
