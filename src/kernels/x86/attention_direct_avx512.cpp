// AVX-512 fused attention tile (TileKernels::tile): the scores and the online-softmax update of one
// K/V tile computed straight from the paged cache (f32, f16 or q8), for block sizes that are a
// multiple of 16.
//
// Why: the three-step kernels (attention_avx512.cpp) first copy the tile to f32 (K transposed into
// kt, V into vt: 32 KiB of stores and as many reloads per 64 keys at head_dim 64), and that copy,
// not the arithmetic, was most of the attention time of a batched decode step. Here each 16-key
// chunk of K is one contiguous run of one block (K is [head_dim][block_size] per block and head),
// converted in registers as the score FMAs need it, and each V row is converted once for all the
// rows of a GQA group that share a position.
//
// Bits: every K and V value is converted exactly as load_tile converts it (f16 -> f32 is exact; q8
// is float(q) * d, one rounding) and every row runs the operations of scores + update in the same
// order, so a row gets the same bits on either path (the invariance test compares them).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <utility>

#include "kernels/attention_internal.h"
#include "kernels/x86/attention_direct_driver.h"
#include "kernels/x86/attention_avx512_math.h"

namespace tessera::kernels::attn_detail {
namespace {

using avx512::lanes_below;
constexpr int kChunks = kTileKeys / 16;  // 16-key column chunks of a tile

// Where one tile's keys live. Chunk c holds keys key_begin + 16c ... (one run of one block): K
// element offset of its dimension 0 (dimension d at + d * block_size) and, for q8, its 16 row
// scales; V rows per key.
struct TileSource {
  static constexpr int32_t kUpdateDims = 32;  // update_direct's d0 step
  int32_t n = 0;
  int64_t k_off[kChunks] = {};
  __mmask16 mask[kChunks] = {};
  __m512 k_scale[kChunks];     // kQ8
  const void* v_row[kTileKeys];
  float v_scale[kTileKeys];    // kQ8
};

template <KvDType DT>
void locate(const KvLayer& kv, const int32_t* blocks, int32_t kv_head, int32_t key_begin, int32_t n,
            TileSource& ts) {
  ts.n = n;
  for (int c = 0; c < kChunks; ++c) {
    ts.mask[c] = lanes_below(n - 16 * c);  // 0 for a chunk past n: its loads read nothing
    if (16 * c >= n) {
      ts.k_off[c] = 0;
      if constexpr (DT == KvDType::kQ8) ts.k_scale[c] = _mm512_setzero_ps();
      continue;
    }
    const int32_t key = key_begin + 16 * c;
    const int32_t block = blocks[key / kv.block_size], in_block = key % kv.block_size;
    ts.k_off[c] = k_offset(kv, block, in_block, kv_head);
    if constexpr (DT == KvDType::kQ8) {
      ts.k_scale[c] = _mm512_maskz_loadu_ps(ts.mask[c], kv.k_scale + scale_offset(kv, block, in_block, kv_head));
    }
  }
  locate_v_rows<DT>(kv, blocks, kv_head, key_begin, n, ts.v_row, ts.v_scale);
}

// Dimension d of the 16 keys of chunk c, as load_tile writes them into kt (0 past n).
template <KvDType DT>
inline __m512 load_k(const KvLayer& kv, const TileSource& ts, int c, int64_t d) {
  const int64_t at = ts.k_off[c] + d * kv.block_size;
  if constexpr (DT == KvDType::kF32) {
    return _mm512_maskz_loadu_ps(ts.mask[c], static_cast<const float*>(kv.k) + at);
  } else if constexpr (DT == KvDType::kF16) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(ts.mask[c], static_cast<const uint16_t*>(kv.k) + at));
  } else {
    const __m128i q = _mm_maskz_loadu_epi8(ts.mask[c], static_cast<const int8_t*>(kv.k) + at);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), ts.k_scale[c]);
  }
}

// Elements e .. e+15 (mask m) of key j's V row, as load_tile writes them into vt.
template <KvDType DT>
inline __m512 load_v(const TileSource& ts, int32_t j, int32_t e, __mmask16 m) {
  if constexpr (DT == KvDType::kF32) {
    return _mm512_maskz_loadu_ps(m, static_cast<const float*>(ts.v_row[j]) + e);
  } else if constexpr (DT == KvDType::kF16) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(ts.v_row[j]) + e));
  } else {
    const __m128i q = _mm_maskz_loadu_epi8(m, static_cast<const int8_t*>(ts.v_row[j]) + e);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), _mm512_set1_ps(ts.v_scale[j]));
  }
}

// scores_avx512's R-row pass with K read from the cache: one FMA chain per (row, 16 keys) over d
// ascending, then * scale, for the first C chunks (the ones holding keys); the chunks past them
// hold zeros, as in kt. Streams `pf` in over the d loop, 4 lines every `every` dimensions. Every
// accumulator access has a constant index (the pack expansion over I = C * row + chunk) and the
// body is inlined, so GCC keeps the C * R accumulators in registers: with loops over rows and
// chunks it kept the array on the stack and stored all of it on every d.
template <KvDType DT, int R, int C, size_t... I>
[[gnu::always_inline]] inline void scores_pass(const KvLayer& kv, const TileSource& ts, const float* const* q_rows,
                                               __m512 vscale, float* s, PrefetchStream& pf, int32_t every,
                                               std::index_sequence<I...>) {
  static_assert(sizeof...(I) == R * C && C <= kChunks);
  const float* q[R];
  for (int i = 0; i < R; ++i) q[i] = q_rows[i];
  __m512 acc[R * C];
  ((acc[I] = _mm512_setzero_ps()), ...);
  int32_t countdown = every;
  for (int32_t d = 0; d < kv.head_dim; ++d) {
    if (--countdown == 0) pf.issue4(), countdown = every;
    __m512 k[C];
    for (int c = 0; c < C; ++c) k[c] = load_k<DT>(kv, ts, c, d);
    ((acc[I] = _mm512_fmadd_ps(_mm512_set1_ps(q[I / C][d]), k[I % C], acc[I])), ...);
  }
  ((_mm512_storeu_ps(s + int64_t{I / C} * kTileKeys + 16 * (I % C), _mm512_mul_ps(acc[I], vscale))), ...);
  for (int i = 0; i < R; ++i) {
    for (int c = C; c < kChunks; ++c) _mm512_storeu_ps(s + int64_t{i} * kTileKeys + 16 * c, _mm512_setzero_ps());
  }
}

template <KvDType DT, int R>
void scores_direct(const KvLayer& kv, const TileSource& ts, const float* const* q_rows, float scale,
                   float* s, PrefetchStream& pf, int32_t every) {
  static_assert(kChunks == 4, "scores_direct dispatches on 1 to 4 chunks");
  const __m512 vscale = _mm512_set1_ps(scale);
  switch ((ts.n + 15) / 16) {
    case 1: return scores_pass<DT, R, 1>(kv, ts, q_rows, vscale, s, pf, every, std::make_index_sequence<R>{});
    case 2: return scores_pass<DT, R, 2>(kv, ts, q_rows, vscale, s, pf, every, std::make_index_sequence<R * 2>{});
    case 3: return scores_pass<DT, R, 3>(kv, ts, q_rows, vscale, s, pf, every, std::make_index_sequence<R * 3>{});
    default: return scores_pass<DT, R, 4>(kv, ts, q_rows, vscale, s, pf, every, std::make_index_sequence<R * 4>{});
  }
}

// update_avx512 for R rows that take the same n keys, with each V row converted once for all R:
// per row acc = acc * alpha, even keys into chain a and odd keys into chain b, then a + b.
template <KvDType DT, int R>
void update_direct(const TileSource& ts, int32_t n, const float* s, int32_t head_dim, float* states,
                   int32_t stride, PrefetchStream& pf, int32_t every) {
  int32_t countdown = every;
  alignas(64) float p[R][kTileKeys];
  __m512 alpha[R];
  for (int r = 0; r < R; ++r) {
    alpha[r] = _mm512_set1_ps(avx512::softmax_weights(s + int64_t{r} * kTileKeys, n, head_dim,
                                                      states + int64_t{r} * stride, p[r]));
  }
  for (int32_t d0 = 0; d0 < head_dim; d0 += 32) {
    const __mmask16 mk[2] = {lanes_below(head_dim - d0), lanes_below(head_dim - d0 - 16)};
    __m512 a[R][2], b[R][2];
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < 2; ++c) {
        a[r][c] = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk[c], states + int64_t{r} * stride + d0 + 16 * c), alpha[r]);
        b[r][c] = _mm512_setzero_ps();
      }
    }
    int32_t j = 0;
    for (; j + 2 <= n; j += 2) {
      if (--countdown == 0) pf.issue4(), countdown = every;
      const __m512 va[2] = {load_v<DT>(ts, j, d0, mk[0]), load_v<DT>(ts, j, d0 + 16, mk[1])};
      const __m512 vb[2] = {load_v<DT>(ts, j + 1, d0, mk[0]), load_v<DT>(ts, j + 1, d0 + 16, mk[1])};
      for (int r = 0; r < R; ++r) {
        const __m512 pa = _mm512_set1_ps(p[r][j]), pb = _mm512_set1_ps(p[r][j + 1]);
        for (int c = 0; c < 2; ++c) {
          a[r][c] = _mm512_fmadd_ps(pa, va[c], a[r][c]);
          b[r][c] = _mm512_fmadd_ps(pb, vb[c], b[r][c]);
        }
      }
    }
    if (j < n) {
      const __m512 va[2] = {load_v<DT>(ts, j, d0, mk[0]), load_v<DT>(ts, j, d0 + 16, mk[1])};
      for (int r = 0; r < R; ++r) {
        const __m512 pa = _mm512_set1_ps(p[r][j]);
        for (int c = 0; c < 2; ++c) a[r][c] = _mm512_fmadd_ps(pa, va[c], a[r][c]);
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < 2; ++c) {
        _mm512_mask_storeu_ps(states + int64_t{r} * stride + d0 + 16 * c, mk[c], _mm512_add_ps(a[r][c], b[r][c]));
      }
    }
  }
}

}  // namespace

void tile_direct_avx512(const KvLayer& kv, const int32_t* blocks, int32_t kv_head, int32_t key_begin, int32_t n,
                        PrefetchStream* next, const float* const* q_rows, int32_t num_rows, int32_t pos0,
                        int32_t group, float scale, float* s, float* states, int32_t stride) {
  run_direct_tile_any_dtype<TileSource>(kv, blocks, kv_head, key_begin, n, next, q_rows, num_rows, pos0, group,
                                        scale, s, states, stride);
}

}  // namespace tessera::kernels::attn_detail
