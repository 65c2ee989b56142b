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
  const auto num = static_cast<int32_t>(sorted_.size());
  offset_.assign(static_cast<size_t>(num) + 1, 0);
  for (int32_t r = 0; r < num; ++r) {
    arena_ += vocab_.bytes[sorted_[r]];
    offset_[r + 1] = static_cast<uint32_t>(arena_.size());
  }
  lcp_prev_.assign(sorted_.size(), 0);
  for (int32_t r = 1; r < num; ++r) {
    const std::string_view a = sorted_bytes(r - 1), b = sorted_bytes(r);
    size_t k = 0;
    while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
    lcp_prev_[r] = static_cast<int32_t>(k);
  }
  // Right to left: the subtree of (r, d) ends where r + 1's does when r + 1 shares d bytes.
  subtree_end_.assign(arena_.size(), num);
  for (int32_t r = num - 1; r >= 0; --r) {
    const int32_t len = static_cast<int32_t>(offset_[r + 1] - offset_[r]);
    for (int32_t d = 1; d <= len; ++d) {
      subtree_end_[offset_[r] + d - 1] =
          r + 1 < num && lcp_prev_[r + 1] >= d ? subtree_end_[offset_[r + 1] + d - 1] : r + 1;
    }
  }
  by_length_.resize(sorted_.size());
  for (int32_t r = 0; r < num; ++r) by_length_[r] = r;
  std::stable_sort(by_length_.begin(), by_length_.end(), [&](int32_t a, int32_t b) {
    return offset_[a + 1] - offset_[a] > offset_[b + 1] - offset_[b];
  });
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint8_t b) { h = (h ^ b) * 1099511628211ull; };
  for (const auto& s : vocab_.bytes) {
    for (char c : s) mix(static_cast<uint8_t>(c));
    mix(0xFF), mix(0x00);
  }
  for (int32_t id : vocab_.stop_ids) mix(static_cast<uint8_t>(id)), mix(static_cast<uint8_t>(id >> 8));
  fingerprint_ = h;
}

std::span<const int32_t> TokenTable::ranks_longer_than(int32_t bytes) const {
  const auto end = std::partition_point(by_length_.begin(), by_length_.end(), [&](int32_t r) {
    return static_cast<int64_t>(offset_[r + 1] - offset_[r]) > bytes;
  });
  return {by_length_.data(), static_cast<size_t>(end - by_length_.begin())};
}

bool TokenTable::is_stop(int32_t id) const {
  return id >= 0 && id < vocab_size() && is_stop_[id];
}

}  // namespace tessera::grammar
