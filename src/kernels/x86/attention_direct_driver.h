// Internal: the ISA-independent part of the fused attention tile (TileKernels::tile), shared by
// x86/attention_direct_avx2.cpp and x86/attention_direct_avx512.cpp. The tile's keys are located
// once; the scores of its rows run in passes of 4 rows, then one pass of the 1-3 left (the GQA
// group of 3 of SmolLM2 decodes as one 3-row pass); then the online-softmax updates run in runs of
// up to 4 adjacent rows that take the same number of keys.
//
// Each ISA file defines, in its own anonymous namespace (found through the TileSource argument),
// with the bits described in that file:
//   struct TileSource; locate<DT>(kv, blocks, kv_head, key_begin, n, ts);
//   scores_direct<DT, R>(kv, ts, q_rows, scale, s, pf, every): R rows' scores of the tile into s,
//     issuing 4 lines of pf every `every` dimensions;
//   update_direct<DT, R>(ts, keys, s, head_dim, states, stride, pf, every): R rows that take the
//     first `keys`, issuing 4 lines of pf every `every` key pairs;
//   TileSource::kUpdateDims: the dimensions one key-pair loop of update_direct covers.
// Included only by ISA files; it holds no intrinsics itself.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/attention_internal.h"

namespace tessera::kernels::attn_detail {

// The V rows of keys [key_begin, key_begin + n) of kv_head, in key order: v_row[j] points at key j's
// row and, for kQ8, v_scale[j] is its scale (a V row's scale index is its element offset /
// head_dim: scale_offset and v_offset share the [block][kv_head][slot] order).
template <KvDType DT>
void locate_v_rows(const KvLayer& kv, const int32_t* blocks, int32_t kv_head, int32_t key_begin, int32_t n,
                   const void** v_row, float* v_scale) {
  const int64_t elem = kv_element_bytes(kv.dtype);
  KeyCursor cur(kv, blocks, kv_head, key_begin);
  for (int32_t j = 0; j < n; ++j) {
    if (j > 0) cur.next();
    v_row[j] = static_cast<const char*>(kv.v) + cur.offset() * elem;
    if constexpr (DT == KvDType::kQ8) v_scale[j] = kv.v_scale[cur.offset() / kv.head_dim];
  }
}

template <typename TileSource, KvDType DT>
void run_direct_tile(const KvLayer& kv, const int32_t* blocks, int32_t kv_head, int32_t key_begin, int32_t n,
                     PrefetchStream* next, const float* const* q_rows, int32_t num_rows, int32_t pos0,
                     int32_t group, float scale, float* s, float* states, int32_t stride) {
  TileSource ts;
  locate<DT>(kv, blocks, kv_head, key_begin, n, ts);
  PrefetchStream none;
  PrefetchStream& pf = next != nullptr ? *next : none;
  // The next tile's lines go out 4 at a time, spread evenly over the whole tile: the score passes'
  // dimensions and the update runs' key pairs. (All of them during the first score pass left the
  // rest of the tile with nothing in flight: probe_batched_attention --stream-mb 16 at the
  // Qwen2.5-0.5B shape, 3.79 ms; spread, 3.3 ms; 2.15 with the K/V in cache.)
  auto keys_of = [&](int32_t row) { return std::min(n, pos0 + row / group + 1 - key_begin); };
  // The update runs: up to 4 adjacent rows from `row` on that take the same number of keys.
  auto run_length = [&](int32_t row) {
    int32_t len = 1;
    while (len < 4 && row + len < num_rows && keys_of(row + len) == keys_of(row)) ++len;
    return len;
  };
  int64_t iterations = int64_t{(num_rows + 3) / 4} * kv.head_dim;
  for (int32_t r = 0; r < num_rows; r += run_length(r)) {
    iterations += int64_t{(kv.head_dim + TileSource::kUpdateDims - 1) / TileSource::kUpdateDims} * ((keys_of(r) + 1) / 2);
  }
  const auto every = static_cast<int32_t>(std::max<int64_t>(1, iterations / std::max(1, (pf.total_lines() + 3) / 4)));
  int32_t r = 0;
  for (; r + 4 <= num_rows; r += 4) {
    scores_direct<DT, 4>(kv, ts, q_rows + r, scale, s + int64_t{r} * kTileKeys, pf, every);
  }
  float* tail = s + int64_t{r} * kTileKeys;
  switch (num_rows - r) {
    case 3: scores_direct<DT, 3>(kv, ts, q_rows + r, scale, tail, pf, every); break;
    case 2: scores_direct<DT, 2>(kv, ts, q_rows + r, scale, tail, pf, every); break;
    case 1: scores_direct<DT, 1>(kv, ts, q_rows + r, scale, tail, pf, every); break;
    default: break;
  }
  for (r = 0; r < num_rows;) {
    const int32_t keys = keys_of(r);
    const int32_t len = run_length(r);
    const float* sr = s + int64_t{r} * kTileKeys;
    float* st = states + int64_t{r} * stride;
    switch (len) {
      case 4: update_direct<DT, 4>(ts, keys, sr, kv.head_dim, st, stride, pf, every); break;
      case 3: update_direct<DT, 3>(ts, keys, sr, kv.head_dim, st, stride, pf, every); break;
      case 2: update_direct<DT, 2>(ts, keys, sr, kv.head_dim, st, stride, pf, every); break;
      default: update_direct<DT, 1>(ts, keys, sr, kv.head_dim, st, stride, pf, every); break;
    }
    r += len;
  }
  pf.issue_rest();  // what the loops left (rounding, or more lines than iterations)
}

// run_direct_tile for the cache's KV dtype.
template <typename TileSource>
void run_direct_tile_any_dtype(const KvLayer& kv, const int32_t* blocks, int32_t kv_head, int32_t key_begin,
                               int32_t n, PrefetchStream* next, const float* const* q_rows, int32_t num_rows,
                               int32_t pos0, int32_t group, float scale, float* s, float* states, int32_t stride) {
  switch (kv.dtype) {
    case KvDType::kF32:
      return run_direct_tile<TileSource, KvDType::kF32>(kv, blocks, kv_head, key_begin, n, next, q_rows, num_rows, pos0,
                                                        group, scale, s, states, stride);
    case KvDType::kF16:
      return run_direct_tile<TileSource, KvDType::kF16>(kv, blocks, kv_head, key_begin, n, next, q_rows, num_rows, pos0,
                                                        group, scale, s, states, stride);
    case KvDType::kQ8:
      return run_direct_tile<TileSource, KvDType::kQ8>(kv, blocks, kv_head, key_begin, n, next, q_rows, num_rows, pos0,
                                                       group, scale, s, states, stride);
  }
}

}  // namespace tessera::kernels::attn_detail
