// Internal to the attention kernels: the per-ISA tile kernels the flash driver (attention.cpp)
// calls through one table. Each ISA file implements the same three steps of the online softmax
// for one K/V tile; the driver owns tiling, scheduling and the fold across partitions.
//
// Invariant (batch invariance): every function below computes each row independently with an
// operation order fixed by (head_dim, n) alone, so grouping rows differently never changes bits.
#pragma once
#include <cstdint>

#include "kernels/attention.h"

namespace tessera::kernels::attn_detail {

// Per-row state layout, shared by every ISA: [acc(head_dim), m, l] with acc unnormalized,
// m the running max of the scaled scores (-inf before any key) and l = sum exp(s - m).
inline int32_t state_stride(int32_t head_dim) { return head_dim + 2; }

struct TileKernels {
  // Gathers keys [key_begin, key_begin + n) of kv_head from the paged cache (blocks: the
  // sequence's block ids): kt[d * kTileKeys + j] = K[key_begin + j][d] as f32 for j < n and 0 for
  // n <= j < kTileKeys; v_rows[j] = that key's V row as f32 (into the cache for f32 KV, into
  // vt [kTileKeys][head_dim] for f16 KV). 1 <= n <= kTileKeys.
  void (*load_tile)(const KvLayer& kv, const int32_t* blocks, int32_t kv_head, int32_t key_begin,
                    int32_t n, float* kt, float* vt, const float** v_rows);
  // s[r * kTileKeys + j] = scale * (sum over d ascending of q_rows[r][d] * kt[d][j]) for all
  // kTileKeys columns of num_rows rows.
  void (*scores)(const float* const* q_rows, int32_t num_rows, const float* kt, int32_t head_dim,
                 float scale, float* s);
  // Online-softmax update of one row's state with the first n keys of the tile (s: that row's
  // scores, n >= 1): m' = max(m, max s), acc = acc * e^(m - m') + sum_j e^(s_j - m') v_j, likewise l.
  void (*update)(const float* s, int32_t n, const float* const* v_rows, int32_t head_dim,
                 float* state);
};

const TileKernels& tile_kernels_ref();
// nullptr when the build has no such file (TESSERA_FORCE_SCALAR) or head_dim is unsupported.
const TileKernels* tile_kernels_avx2(int32_t head_dim);
const TileKernels* tile_kernels_avx512(int32_t head_dim);

}  // namespace tessera::kernels::attn_detail
