// Internal to the attention kernels: the per-ISA tile kernels the flash driver (attention.cpp)
// calls through one table. Each ISA file implements the same three steps of the online softmax
// for one K/V tile; the driver owns tiling, scheduling and the fold across partitions.
//
// Invariant (batch invariance): every function below computes each row independently with an
// operation order fixed by (head_dim, n) alone, so grouping rows differently never changes bits.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/attention.h"

namespace tessera::kernels::attn_detail {

// Per-row state layout, shared by every ISA: [acc(head_dim), m, l] with acc unnormalized,
// m the running max of the scaled scores (-inf before any key) and l = sum exp(s - m).
inline int32_t state_stride(int32_t head_dim) { return head_dim + 2; }

class PrefetchStream;

struct TileKernels {
  // Gathers keys [key_begin, key_begin + n) of kv_head from the paged cache (blocks: the
  // sequence's block ids): kt[d * kTileKeys + j] = K[key_begin + j][d] as f32 for j < n and 0 for
  // n <= j < kTileKeys; v_rows[j] = that key's V row as f32 (into the cache for f32 KV, into
  // vt [kTileKeys][head_dim] for f16 KV). 1 <= n <= kTileKeys.
  // It may also issue the lines of `next` (the keys the caller reads after this tile; null: none)
  // between its own loads; prefetching changes no result.
  void (*load_tile)(const KvLayer& kv, const int32_t* blocks, int32_t kv_head, int32_t key_begin,
                    int32_t n, PrefetchStream* next, float* kt, float* vt, const float** v_rows);
  // s[r * kTileKeys + j] = scale * (sum over d ascending of q_rows[r][d] * kt[d][j]) for all
  // kTileKeys columns of num_rows rows.
  void (*scores)(const float* const* q_rows, int32_t num_rows, const float* kt, int32_t head_dim,
                 float scale, float* s);
  // Online-softmax update of one row's state with the first n keys of the tile (s: that row's
  // scores, n >= 1): m' = max(m, max s), acc = acc * e^(m - m') + sum_j e^(s_j - m') v_j, likewise l.
  void (*update)(const float* s, int32_t n, const float* const* v_rows, int32_t head_dim,
                 float* state);
  // Optional (null: use the three steps above): all three for one tile in one pass that reads K
  // and V straight from the cache, without the f32 tile copies, for block sizes that are a
  // multiple of 16. Rows are token-major, `group` per token: row r < num_rows sits at position
  // pos0 + r / group (>= key_begin) and takes the first min(n, pos0 + r / group + 1 - key_begin) keys.
  // Each row gets exactly the bits that load_tile + scores + update give it.
  // s: scratch of [num_rows][kTileKeys] floats; row r's state is at states + r * stride.
  void (*tile)(const KvLayer& kv, const int32_t* blocks, int32_t kv_head, int32_t key_begin, int32_t n,
               PrefetchStream* next, const float* const* q_rows, int32_t num_rows, int32_t pos0,
               int32_t group, float scale, float* s, float* states, int32_t stride) = nullptr;
};

// Calls f(block, in_block, j, run) for each run of consecutive keys of [key_begin, key_begin + n)
// that share a block: tile keys j .. j + run - 1 sit in slots in_block .. in_block + run - 1 of
// `block` (so K dimension d of the run is contiguous, see k_offset).
template <typename F>
inline void for_key_runs(const KvLayer& kv, const int32_t* blocks, int32_t key_begin, int32_t n, F&& f) {
  for (int32_t j = 0; j < n;) {
    const int32_t pos = key_begin + j;
    const int32_t in_block = pos % kv.block_size;
    const int32_t run = std::min(kv.block_size - in_block, n - j);
    f(blocks[pos / kv.block_size], in_block, j, run);
    j += run;
  }
}

// Walks the V element offsets of consecutive keys of one KV head through the block table: one
// division per tile instead of one per key. next() reads the block table only when it crosses
// into the next block, so a walk never reads past the block holding its last key.
class KeyCursor {
 public:
  KeyCursor(const KvLayer& kv, const int32_t* blocks, int32_t kv_head, int32_t pos)
      : kv_(kv), blocks_(blocks + pos / kv.block_size), in_block_(pos % kv.block_size), kv_head_(kv_head) {
    offset_ = v_offset(kv_, *blocks_, in_block_, kv_head_);
  }
  // Element offset of the current key's value row of kv_head in V.
  int64_t offset() const { return offset_; }
  void next() {
    if (++in_block_ == kv_.block_size) {
      in_block_ = 0;
      ++blocks_;
      offset_ = v_offset(kv_, *blocks_, 0, kv_head_);
    } else {
      offset_ += kv_.head_dim;  // rows of one head are adjacent within a block
    }
  }

 private:
  const KvLayer& kv_;
  const int32_t* blocks_;
  int32_t in_block_, kv_head_;
  int64_t offset_;
};

// Prefetches (for reading, into L2) the K and V of kv_head for the keys
// [pos, pos + count) of the sequence whose block table is `blocks`: the head's whole K and V
// regions ([head_dim][block_size] and [block_size][head_dim]) of each block touched.
inline void prefetch_line(const void* p) {
#if defined(__x86_64__)
  // GCC treats __builtin_prefetch as free of effects and deletes a loop that does nothing else
  // (every prefetch of this file was gone from the binary); a volatile asm is never deleted.
  asm volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 0, 3);
#endif
}

inline void prefetch_keys(const KvLayer& kv, const int32_t* blocks, int32_t kv_head, int32_t pos,
                          int32_t count) {
  if (count <= 0) return;
  const int64_t elem = kv_element_bytes(kv.dtype);
  const int64_t row_bytes = elem * kv.head_dim;
  const char* k = static_cast<const char*>(kv.k);
  const char* v = static_cast<const char*>(kv.v);
  const int64_t region = row_bytes * kv.block_size;
  for_key_runs(kv, blocks, pos, count, [&](int32_t block, int32_t, int32_t, int32_t) {
    const char* k_region = k + k_offset(kv, block, 0, kv_head) * elem;
    const char* v_region = v + v_offset(kv, block, 0, kv_head) * elem;
    for (int64_t b = 0; b < region; b += 64) {
      prefetch_line(k_region + b);
      prefetch_line(v_region + b);
    }
    if (kv.dtype == KvDType::kQ8) {  // the block's K and V row scales of this head
      prefetch_line(kv.k_scale + scale_offset(kv, block, 0, kv_head));
      prefetch_line(kv.v_scale + scale_offset(kv, block, 0, kv_head));
    }
  });
}

// The cache lines of keys [pos, pos + count) of kv_head (the whole K and V regions of each block
// they touch), handed out a few at a time: a tile kernel issues them between its own loads, so
// the next tile streams in while this one is converted. (Hundreds of prefetches in one burst
// overflow the fill buffers, and most of them are dropped.) kQ8 scale lines are issued at once.
class PrefetchStream {
 public:
  PrefetchStream() = default;  // empty
  PrefetchStream(const KvLayer& kv, const int32_t* blocks, int32_t kv_head, int32_t pos, int32_t count) {
    if (count <= 0) return;
    const int64_t elem = kv_element_bytes(kv.dtype);
    lines_per_region_ = static_cast<int32_t>((elem * kv.head_dim * kv.block_size + 63) / 64);
    const char* k = static_cast<const char*>(kv.k);
    const char* v = static_cast<const char*>(kv.v);
    for_key_runs(kv, blocks, pos, count, [&](int32_t block, int32_t, int32_t, int32_t) {
      if (num_regions_ + 2 > kMaxRegions) return;
      regions_[num_regions_++] = k + k_offset(kv, block, 0, kv_head) * elem;
      regions_[num_regions_++] = v + v_offset(kv, block, 0, kv_head) * elem;
      if (kv.dtype == KvDType::kQ8) {
        prefetch_line(kv.k_scale + scale_offset(kv, block, 0, kv_head));
        prefetch_line(kv.v_scale + scale_offset(kv, block, 0, kv_head));
      }
    });
  }
  int32_t total_lines() const { return num_regions_ * lines_per_region_; }
  // Lines to issue per key of a tile of n keys so that all are out by its end.
  int32_t lines_per_key(int32_t n) const { return (total_lines() + n - 1) / n; }
  // Issues the next n lines (fewer at the end). The cursor lives in locals while the loop runs:
  // the prefetch reads memory through a char pointer, which may alias the members, so updating
  // the members themselves would store them before every prefetch (a store-to-load chain).
  void issue(int32_t n) {
    int32_t region = region_, line = line_;
    for (; n > 0 && region < num_regions_; --n) {
      prefetch_line(regions_[region] + int64_t{line} * 64);
      if (++line == lines_per_region_) line = 0, ++region;
    }
    region_ = region, line_ = line;
  }
  // Issues the next 4 lines (fewer at the end of the stream), with constant offsets when they lie
  // in one region. The fused tile calls it once per dimension: issue(n) spends ~7 integer ops per
  // line on its cursor, which took the ports from the tile's arithmetic (probe_batched_attention
  // --threads 1 --same: 3.92 ms with issue(4), 3.39 with issue4(), 3.22 with no prefetch). Batches
  // of 8 lines every other dimension, or a whole region (32 lines) every 8, read slower from DRAM
  // in the engine.
  void issue4() {
    if (region_ >= num_regions_) return;
    if (line_ + 4 > lines_per_region_) return issue(4);
    const char* p = regions_[region_] + int64_t{line_} * 64;
    prefetch_line(p), prefetch_line(p + 64), prefetch_line(p + 128), prefetch_line(p + 192);
    if ((line_ += 4) == lines_per_region_) line_ = 0, ++region_;
  }
  void issue_rest() {
    while (region_ < num_regions_) issue4();
  }

 private:
  static constexpr int32_t kMaxRegions = 16;  // 8 blocks: a whole tile at block size >= 8
  const char* regions_[kMaxRegions] = {};
  int32_t num_regions_ = 0, lines_per_region_ = 0, region_ = 0, line_ = 0;
};

const TileKernels& tile_kernels_ref();
// nullptr when the build has no such file (TESSERA_FORCE_SCALAR) or head_dim is unsupported.
const TileKernels* tile_kernels_avx2(int32_t head_dim);
const TileKernels* tile_kernels_avx512(int32_t head_dim);
// The AVX2 TileKernels::tile (x86/attention_direct_avx2.cpp).
void tile_direct_avx2(const KvLayer& kv, const int32_t* blocks, int32_t kv_head, int32_t key_begin, int32_t n,
                      PrefetchStream* next, const float* const* q_rows, int32_t num_rows, int32_t pos0,
                      int32_t group, float scale, float* s, float* states, int32_t stride);
// The AVX-512 TileKernels::tile (x86/attention_direct_avx512.cpp).
void tile_direct_avx512(const KvLayer& kv, const int32_t* blocks, int32_t kv_head, int32_t key_begin, int32_t n,
                        PrefetchStream* next, const float* const* q_rows, int32_t num_rows, int32_t pos0,
                        int32_t group, float scale, float* s, float* states, int32_t stride);

}  // namespace tessera::kernels::attn_detail
