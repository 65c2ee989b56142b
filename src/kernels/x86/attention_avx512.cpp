// AVX-512 tile kernels of the flash attention (see attention_internal.h for the contract).
// K tiles are read as contiguous runs of the block-transposed K (KvLayer); scores are 4 rows x
// 64 keys of FMA chains over d ascending; exp is a degree-7 polynomial after range reduction (|rel err| < 2e-7).
// Any head_dim (tails use masks).
// NOTE(attn): GCC 12 reports the _mm512_undefined_* inside its own masked intrinsics as
// uninitialized (a known false positive); silence it for this file only.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/attention_internal.h"
#include "kernels/x86/attention_avx512_math.h"

namespace tessera::kernels::attn_detail {
namespace {

using avx512::exp512;
using avx512::lanes_below;

// kQ8 keys [key_begin, key_begin + n) run by run: every K and V element becomes float(q) * d of its
// row (the reference's one rounding), V rows into vt, K rows into the tile.
void load_tile_q8_avx512(const KvLayer& kv, const int32_t* blocks, int32_t kv_head, int32_t key_begin,
                         int32_t n, float* kt, float* vt, const float** v_rows, PrefetchStream& pf,
                         int32_t lines_per_key) {
  const int32_t hd = kv.head_dim, bs = kv.block_size;
  for_key_runs(kv, blocks, key_begin, n, [&](int32_t block, int32_t in_block, int32_t j, int32_t run) {
    const int64_t s = scale_offset(kv, block, in_block, kv_head);
    const int8_t* v = static_cast<const int8_t*>(kv.v) + v_offset(kv, block, in_block, kv_head);
    for (int32_t c = 0; c < run; ++c) {
      float* dst = vt + int64_t{j + c} * hd;
      const __m512 d = _mm512_set1_ps(kv.v_scale[s + c]);
      for (int32_t e = 0; e < hd; e += 16) {
        const __mmask16 m = lanes_below(hd - e);
        const __m512 x = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, v + int64_t{c} * hd + e)));
        _mm512_mask_storeu_ps(dst + e, m, _mm512_mul_ps(x, d));
      }
      v_rows[j + c] = dst;
      pf.issue(lines_per_key);
    }
    const int8_t* k = static_cast<const int8_t*>(kv.k) + k_offset(kv, block, in_block, kv_head);
    for (int32_t d = 0; d < hd; ++d) {
      float* dst = kt + int64_t{d} * kTileKeys + j;
      for (int32_t c = 0; c < run; c += 16) {
        const __mmask16 m = lanes_below(run - c);
        const __m512 scales = _mm512_maskz_loadu_ps(m, kv.k_scale + s + c);
        const __m512 x = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, k + int64_t{d} * bs + c)));
        _mm512_mask_storeu_ps(dst + c, m, _mm512_mul_ps(x, scales));
      }
    }
  });
}

// f32 and f16 keys [key_begin, key_begin + n): V rows converted into vt (f16) or pointed at (f32),
// K rows of each block's run into the tile.
void load_tile_dense_avx512(const KvLayer& kv, const int32_t* blocks, int32_t kv_head, int32_t key_begin,
                            int32_t n, float* kt, float* vt, const float** v_rows, PrefetchStream& pf,
                            int32_t lines_per_key) {
  const int32_t hd = kv.head_dim, bs = kv.block_size;
  const bool f16 = kv.dtype == KvDType::kF16;
  KeyCursor cur(kv, blocks, kv_head, key_begin);
  for (int32_t j = 0; j < n; ++j) {
    if (j > 0) cur.next();
    pf.issue(lines_per_key);
    const int64_t off = cur.offset();
    if (!f16) {
      v_rows[j] = static_cast<const float*>(kv.v) + off;
    } else {
      const uint16_t* v = static_cast<const uint16_t*>(kv.v) + off;
      float* dst = vt + int64_t{j} * hd;
      for (int32_t d = 0; d < hd; d += 16) {
        const __mmask16 m = lanes_below(hd - d);
        _mm512_mask_storeu_ps(dst + d, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, v + d)));
      }
      v_rows[j] = dst;
    }
  }
  // K is stored [head_dim][block_size] per block and head: row d of the tile is a contiguous run
  // of each block the tile touches (one per 16 keys at block size 16), converted in place.
  for_key_runs(kv, blocks, key_begin, n, [&](int32_t block, int32_t in_block, int32_t j, int32_t run) {
    const int64_t off = k_offset(kv, block, in_block, kv_head);
    for (int32_t d = 0; d < hd; ++d) {
      float* dst = kt + int64_t{d} * kTileKeys + j;
      const int64_t src = off + int64_t{d} * bs;
      for (int32_t c = 0; c < run; c += 16) {
        const __mmask16 m = lanes_below(run - c);
        const __m512 x = f16 ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(kv.k) + src + c))
                             : _mm512_maskz_loadu_ps(m, static_cast<const float*>(kv.k) + src + c);
        _mm512_mask_storeu_ps(dst + c, m, x);
      }
    }
  });
}

void load_tile_avx512(const KvLayer& kv, const int32_t* blocks, int32_t kv_head, int32_t key_begin,
                      int32_t n, PrefetchStream* next, float* kt, float* vt, const float** v_rows) {
  const int32_t hd = kv.head_dim;
  PrefetchStream none;
  PrefetchStream& pf = next != nullptr ? *next : none;
  const int32_t lines_per_key = pf.lines_per_key(n);
  if (kv.dtype == KvDType::kQ8) {
    load_tile_q8_avx512(kv, blocks, kv_head, key_begin, n, kt, vt, v_rows, pf, lines_per_key);
  } else {
    load_tile_dense_avx512(kv, blocks, kv_head, key_begin, n, kt, vt, v_rows, pf, lines_per_key);
  }
  for (int32_t j0 = n; j0 < kTileKeys; j0 += 16) {  // keys past n: zero columns
    const __mmask16 m = lanes_below(kTileKeys - j0);
    for (int32_t d = 0; d < hd; ++d) _mm512_mask_storeu_ps(kt + int64_t{d} * kTileKeys + j0, m, _mm512_setzero_ps());
  }
}

// R rows (R <= 4) x all 64 keys: one FMA chain per (row, 16 keys) over d ascending, then * scale.
// Every R gives each row the same bits, so how rows are grouped never matters.
template <int R>
inline void scores_rows(const float* const* q_rows, const float* kt, int32_t head_dim,
                        __m512 vscale, float* s) {
  __m512 acc[R][4];
  for (auto& row : acc)
    for (auto& a : row) a = _mm512_setzero_ps();
  for (int32_t d = 0; d < head_dim; ++d) {
    const float* k = kt + int64_t{d} * kTileKeys;
    const __m512 k0 = _mm512_loadu_ps(k), k1 = _mm512_loadu_ps(k + 16);
    const __m512 k2 = _mm512_loadu_ps(k + 32), k3 = _mm512_loadu_ps(k + 48);
    for (int i = 0; i < R; ++i) {
      const __m512 b = _mm512_set1_ps(q_rows[i][d]);
      acc[i][0] = _mm512_fmadd_ps(b, k0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(b, k1, acc[i][1]);
      acc[i][2] = _mm512_fmadd_ps(b, k2, acc[i][2]);
      acc[i][3] = _mm512_fmadd_ps(b, k3, acc[i][3]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int c = 0; c < 4; ++c)
      _mm512_storeu_ps(s + int64_t{i} * kTileKeys + 16 * c, _mm512_mul_ps(acc[i][c], vscale));
}

void scores_avx512(const float* const* q_rows, int32_t num_rows, const float* kt, int32_t head_dim,
                   float scale, float* s) {
  const __m512 vscale = _mm512_set1_ps(scale);
  int32_t r = 0;
  for (; r + 4 <= num_rows; r += 4) scores_rows<4>(q_rows + r, kt, head_dim, vscale, s + int64_t{r} * kTileKeys);
  float* tail = s + int64_t{r} * kTileKeys;
  switch (num_rows - r) {  // the GQA group of 3 (SmolLM2) decodes as one 3-row pass
    case 3: scores_rows<3>(q_rows + r, kt, head_dim, vscale, tail); break;
    case 2: scores_rows<2>(q_rows + r, kt, head_dim, vscale, tail); break;
    case 1: scores_rows<1>(q_rows + r, kt, head_dim, vscale, tail); break;
    default: break;
  }
}

void update_avx512(const float* s, int32_t n, const float* const* v_rows, int32_t head_dim,
                   float* state) {
  alignas(64) float p[kTileKeys];
  const float alpha = avx512::softmax_weights(s, n, head_dim, state, p);
  const __m512 valpha = _mm512_set1_ps(alpha);
  for (int32_t d0 = 0; d0 < head_dim; d0 += 64) {
    __mmask16 mk[4];
    __m512 a[4], b[4];
    for (int c = 0; c < 4; ++c) {
      mk[c] = lanes_below(head_dim - d0 - 16 * c);
      a[c] = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk[c], state + d0 + 16 * c), valpha);
      b[c] = _mm512_setzero_ps();
    }
    int32_t j = 0;
    for (; j + 2 <= n; j += 2) {  // two chains (even keys into a, odd into b), summed at the end
      const __m512 pa = _mm512_set1_ps(p[j]);
      const __m512 pb = _mm512_set1_ps(p[j + 1]);
      const float* va = v_rows[j] + d0;
      const float* vb = v_rows[j + 1] + d0;
      for (int c = 0; c < 4; ++c) {
        a[c] = _mm512_fmadd_ps(pa, _mm512_maskz_loadu_ps(mk[c], va + 16 * c), a[c]);
        b[c] = _mm512_fmadd_ps(pb, _mm512_maskz_loadu_ps(mk[c], vb + 16 * c), b[c]);
      }
    }
    if (j < n) {
      const __m512 pa = _mm512_set1_ps(p[j]);
      for (int c = 0; c < 4; ++c)
        a[c] = _mm512_fmadd_ps(pa, _mm512_maskz_loadu_ps(mk[c], v_rows[j] + d0 + 16 * c), a[c]);
    }
    for (int c = 0; c < 4; ++c) _mm512_mask_storeu_ps(state + d0 + 16 * c, mk[c], _mm512_add_ps(a[c], b[c]));
  }
}

const TileKernels kAvx512 = {load_tile_avx512, scores_avx512, update_avx512, tile_direct_avx512};

}  // namespace

const TileKernels* tile_kernels_avx512(int32_t /*head_dim*/) { return &kAvx512; }

}  // namespace tessera::kernels::attn_detail
