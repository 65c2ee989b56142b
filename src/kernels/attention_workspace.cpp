// AttnWorkspace: the preallocated scratch of the flash and naive attention kernels (sizing,
// growth, and the per-unit scratch slots).
#include <algorithm>

#include "kernels/attention.h"
#include "kernels/attention_internal.h"
#include "util/check.h"

namespace tessera::kernels {

using attn_detail::state_stride;

void AttnWorkspace::grow(AlignedVector<float>& buf, size_t floats) {
  if (buf.size() >= floats) return;
  buf.resize(floats);
  ++num_grows_;
}

void AttnWorkspace::ensure_threads(int num_threads, int32_t head_dim, int32_t rows) {
  if (threads.size() < static_cast<size_t>(num_threads)) {
    threads.resize(num_threads);
    slot_busy_ = std::make_unique<std::atomic<int32_t>[]>(threads.size());  // all 0: free
    ++num_grows_;
  }
  const int32_t stride = state_stride(head_dim);
  for (ThreadScratch& sc : threads) {
    grow(sc.kt, size_t(head_dim) * kTileKeys);
    grow(sc.vt, size_t(head_dim) * kTileKeys);
    grow(sc.scores, size_t(rows) * kTileKeys);
    grow(sc.part, size_t(rows) * stride);
    // Also the per-row fold buffer of the split schedule's second phase (one row at a time).
    grow(sc.total, size_t(std::max(rows, 1)) * stride);
    grow(sc.q_rope, size_t(rows) * head_dim);
    grow(sc.k_rope, size_t(head_dim));
    if (sc.v_rows.size() < size_t(kTileKeys)) sc.v_rows.resize(kTileKeys);
    if (sc.q_rows.size() < size_t(rows)) {
      sc.q_rows.resize(rows);
      ++num_grows_;
    }
  }
}

void AttnWorkspace::ensure_seqs(int32_t num_seqs, int32_t num_tokens) {
  if (unit_offset.size() < size_t(num_seqs) + 1) {
    unit_offset.resize(num_seqs + 1);
    partial_offset.resize(num_seqs + 1);
    ++num_grows_;
  }
  if (token_seq.size() < size_t(num_tokens)) {
    token_seq.resize(num_tokens);
    ++num_grows_;
  }
}

int AttnWorkspace::claim_slot() {
  for (;;) {  // at most threads.size() holders at once, so one pass finds a free slot
    for (size_t i = 0; i < threads.size(); ++i) {
      if (slot_busy_[i].load(std::memory_order_relaxed) == 0 &&
          slot_busy_[i].exchange(1, std::memory_order_acquire) == 0) {
        return static_cast<int>(i);
      }
    }
  }
}

float* AttnWorkspace::ensure_partials(size_t floats) {
  grow(partials, floats);
  return partials.data();
}

float* AttnWorkspace::ensure_naive(size_t floats) {
  grow(naive_scores, floats);
  return naive_scores.data();
}

void AttnWorkspace::reserve(const AttnLimits& lim) {
  TESSERA_CHECK(lim.num_kv_heads > 0 && lim.num_heads % lim.num_kv_heads == 0, "bad head counts");
  const int32_t group = lim.num_heads / lim.num_kv_heads;
  const int32_t tile_tokens = std::max<int32_t>(1, kRowsPerTile / group);
  ensure_threads(std::max(1, lim.num_threads), lim.head_dim, tile_tokens * group);
  ensure_seqs(lim.max_seqs, lim.max_tokens);
  // Split sequences (decode): one row per sequence, sum of contexts <= max_total_context.
  // Chunks of several rows (speculation) grow the buffer on first use.
  const int64_t total_context = lim.max_total_context > 0 ? lim.max_total_context : lim.max_context;
  const int64_t parts = total_context / kPartitionKeys + std::max(1, lim.max_seqs);
  ensure_partials(size_t(parts) * lim.num_heads * state_stride(lim.head_dim));
  if (lim.naive) ensure_naive(size_t(lim.max_tokens) * lim.max_context);
  num_grows_ = 0;
}

size_t AttnWorkspace::capacity_bytes() const {
  size_t bytes = sizeof(float) * (partials.capacity() + naive_scores.capacity()) +
                 sizeof(int64_t) * (unit_offset.capacity() + partial_offset.capacity()) +
                 sizeof(int32_t) * token_seq.capacity();
  for (const ThreadScratch& sc : threads) {
    bytes += sizeof(float) * (sc.kt.capacity() + sc.vt.capacity() + sc.scores.capacity() +
                              sc.part.capacity() + sc.total.capacity() + sc.q_rope.capacity() +
                              sc.k_rope.capacity()) +
             sizeof(float*) * (sc.v_rows.capacity() + sc.q_rows.capacity());
  }
  return bytes;
}

}  // namespace tessera::kernels
