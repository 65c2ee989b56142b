// AVX2 fused attention tile (TileKernels::tile): the scores and the online-softmax update of one
// K/V tile computed straight from the paged cache (f32, f16 or q8), for block sizes that are a
// multiple of 16. The AVX2 twin of attention_direct_avx512.cpp, for CPUs without AVX-512.
//
// Why: the three-step kernels (attention_avx2.cpp) first copy the tile to f32 (K transposed into
// kt, V into vt: 32 KiB of stores and as many reloads per 64 keys at head_dim 64). Here each 8-key
// chunk of K is one contiguous run of one block (K is [head_dim][block_size] per block and head),
// converted in registers as the score FMAs need it, and each V row is converted once for all the
// rows of a GQA group that share a position.
//
// Bits: every K and V value is converted exactly as load_tile_avx2 converts it (f16 -> f32 is
// exact; q8 is float(q) * d, one rounding) and every row runs the operations of scores_avx2 +
// update_avx2 in the same order (one FMA chain per row and 8 keys over d ascending, then * scale;
// per 8 dimensions even keys into one chain and odd keys into another, then their sum), so a row
// gets the same bits on either path (the invariance test compares them). Lanes of a chunk past the
// tile's n keys read whatever those slots of the block hold; softmax_weights masks them out of the
// max, the weights and the sum, as it masks the zeros the three-step path puts there.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <utility>

#include "kernels/attention_internal.h"
#include "kernels/x86/attention_direct_driver.h"
#include "kernels/x86/attention_avx2_math.h"

namespace tessera::kernels::attn_detail {
namespace {

constexpr int kChunks = kTileKeys / 8;  // 8-key column chunks of a tile

// Where one tile's keys live. Chunk c holds keys key_begin + 8c ... (one run of one block): K
// element offset of its dimension 0 (dimension d at + d * block_size) and, for q8, its 8 row
// scales (0 past n); V rows per key.
struct TileSource {
  static constexpr int32_t kUpdateDims = 8;  // update_direct's d0 step
  int32_t n = 0;
  int64_t k_off[kChunks] = {};
  __m256 k_scale[kChunks];     // kQ8
  const void* v_row[kTileKeys];
  float v_scale[kTileKeys];    // kQ8
};

template <KvDType DT>
void locate(const KvLayer& kv, const int32_t* blocks, int32_t kv_head, int32_t key_begin, int32_t n,
            TileSource& ts) {
  ts.n = n;
  for (int c = 0; c < kChunks && 8 * c < n; ++c) {
    const int32_t key = key_begin + 8 * c;
    const int32_t block = blocks[key / kv.block_size], in_block = key % kv.block_size;
    ts.k_off[c] = k_offset(kv, block, in_block, kv_head);
    if constexpr (DT == KvDType::kQ8) {
      const __m256i mask = _mm256_castps_si256(avx2::lanes_below(n - 8 * c));
      ts.k_scale[c] = _mm256_maskload_ps(kv.k_scale + scale_offset(kv, block, in_block, kv_head), mask);
    }
  }
  locate_v_rows<DT>(kv, blocks, kv_head, key_begin, n, ts.v_row, ts.v_scale);
}

// Dimension d of the 8 keys of chunk c, as load_tile_avx2 writes them into kt (for keys < n).
template <KvDType DT>
inline __m256 load_k(const KvLayer& kv, const TileSource& ts, int c, int64_t d) {
  const int64_t at = ts.k_off[c] + d * kv.block_size;
  if constexpr (DT == KvDType::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(kv.k) + at);
  } else if constexpr (DT == KvDType::kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(kv.k) + at)));
  } else {
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const int8_t*>(kv.k) + at));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), ts.k_scale[c]);
  }
}

// Elements e .. e+7 of key j's V row, as load_tile_avx2 writes them into vt.
template <KvDType DT>
inline __m256 load_v(const TileSource& ts, int32_t j, int32_t e) {
  if constexpr (DT == KvDType::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(ts.v_row[j]) + e);
  } else if constexpr (DT == KvDType::kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(ts.v_row[j]) + e)));
  } else {
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const int8_t*>(ts.v_row[j]) + e));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), _mm256_set1_ps(ts.v_scale[j]));
  }
}

// Scores of R rows x chunks [c0, c0 + C): one FMA chain per (row, chunk) over d ascending, then
// * scale. Streams `pf` in over the d loop, 4 lines every `every` dimensions. Every accumulator
// access has a constant index (the pack expansion over I = C * row + chunk), so GCC keeps the
// C * R accumulators in registers.
template <KvDType DT, int R, int C, size_t... I>
[[gnu::always_inline]] inline void scores_pass(const KvLayer& kv, const TileSource& ts, int c0,
                                               const float* const* q_rows, __m256 vscale, float* s,
                                               PrefetchStream& pf, int32_t every, std::index_sequence<I...>) {
  static_assert(sizeof...(I) == R * C);
  const float* q[R];
  for (int i = 0; i < R; ++i) q[i] = q_rows[i];
  __m256 acc[R * C];
  ((acc[I] = _mm256_setzero_ps()), ...);
  int32_t countdown = every;
  for (int32_t d = 0; d < kv.head_dim; ++d) {
    if (--countdown == 0) pf.issue4(), countdown = every;
    __m256 k[C];
    for (int c = 0; c < C; ++c) k[c] = load_k<DT>(kv, ts, c0 + c, d);
    ((acc[I] = _mm256_fmadd_ps(_mm256_set1_ps(q[I / C][d]), k[I % C], acc[I])), ...);
  }
  ((_mm256_storeu_ps(s + int64_t{I / C} * kTileKeys + 8 * (c0 + I % C), _mm256_mul_ps(acc[I], vscale))), ...);
}

// Chunks per pass: R x C accumulators, a K chunk and R q broadcasts fit the 16 ymm registers up to
// 3 x 4 (against 3 x 2 for the GQA group of 3: probe_batched_attention --same 2.87 -> 2.73 ms).
template <int R>
constexpr int kMaxChunksPerPass = R <= 3 ? 4 : 2;

template <KvDType DT, int R>
void scores_direct(const KvLayer& kv, const TileSource& ts, const float* const* q_rows, float scale, float* s,
                   PrefetchStream& pf, int32_t every) {
  constexpr int kMax = kMaxChunksPerPass<R>;
  static_assert(kMax == 2 || kMax == 4);
  const __m256 vscale = _mm256_set1_ps(scale);
  const int num_chunks = (ts.n + 7) / 8;
  for (int c0 = 0; c0 < num_chunks; c0 += kMax) {
    switch (std::min(kMax, num_chunks - c0)) {
      case 1: scores_pass<DT, R, 1>(kv, ts, c0, q_rows, vscale, s, pf, every, std::make_index_sequence<R>{}); break;
      case 2: scores_pass<DT, R, 2>(kv, ts, c0, q_rows, vscale, s, pf, every, std::make_index_sequence<R * 2>{}); break;
      case 3:
        if constexpr (kMax >= 3) scores_pass<DT, R, 3>(kv, ts, c0, q_rows, vscale, s, pf, every, std::make_index_sequence<R * 3>{});
        break;
      default:
        if constexpr (kMax >= 4) scores_pass<DT, R, 4>(kv, ts, c0, q_rows, vscale, s, pf, every, std::make_index_sequence<R * 4>{});
        break;
    }
  }
}

// update_avx2 for R rows that take the same n keys, with each V row converted once for all R:
// per row and 8 dimensions acc = acc * alpha, even keys into chain a and odd keys into chain b,
// then a + b.
template <KvDType DT, int R>
void update_direct(const TileSource& ts, int32_t n, const float* s, int32_t head_dim, float* states,
                   int32_t stride, PrefetchStream& pf, int32_t every) {
  int32_t countdown = every;
  alignas(32) float p[R][kTileKeys];
  float alpha[R];
  for (int r = 0; r < R; ++r) {
    alpha[r] = avx2::softmax_weights(s + int64_t{r} * kTileKeys, n, head_dim, states + int64_t{r} * stride, p[r]);
  }
  for (int32_t d0 = 0; d0 < head_dim; d0 += 8) {
    __m256 a[R], b[R];
    for (int r = 0; r < R; ++r) {
      a[r] = _mm256_mul_ps(_mm256_loadu_ps(states + int64_t{r} * stride + d0), _mm256_set1_ps(alpha[r]));
      b[r] = _mm256_setzero_ps();
    }
    int32_t j = 0;
    for (; j + 2 <= n; j += 2) {
      if (--countdown == 0) pf.issue4(), countdown = every;
      const __m256 va = load_v<DT>(ts, j, d0), vb = load_v<DT>(ts, j + 1, d0);
      for (int r = 0; r < R; ++r) {
        a[r] = _mm256_fmadd_ps(_mm256_set1_ps(p[r][j]), va, a[r]);
        b[r] = _mm256_fmadd_ps(_mm256_set1_ps(p[r][j + 1]), vb, b[r]);
      }
    }
    if (j < n) {
      const __m256 va = load_v<DT>(ts, j, d0);
      for (int r = 0; r < R; ++r) a[r] = _mm256_fmadd_ps(_mm256_set1_ps(p[r][j]), va, a[r]);
    }
    for (int r = 0; r < R; ++r) _mm256_storeu_ps(states + int64_t{r} * stride + d0, _mm256_add_ps(a[r], b[r]));
  }
}

}  // namespace

void tile_direct_avx2(const KvLayer& kv, const int32_t* blocks, int32_t kv_head, int32_t key_begin, int32_t n,
                      PrefetchStream* next, const float* const* q_rows, int32_t num_rows, int32_t pos0,
                      int32_t group, float scale, float* s, float* states, int32_t stride) {
  run_direct_tile_any_dtype<TileSource>(kv, blocks, kv_head, key_begin, n, next, q_rows, num_rows, pos0, group,
                                        scale, s, states, stride);
}

}  // namespace tessera::kernels::attn_detail
