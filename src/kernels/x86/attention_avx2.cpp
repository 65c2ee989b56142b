// AVX2 + FMA + F16C tile kernels of the flash attention (see attention_internal.h for the
// contract). head_dim must be a multiple of 8 (other head sizes take the scalar kernels).
// K tiles are read as contiguous runs of the block-transposed K (KvLayer); scores are 2 rows x 32
// keys of FMA chains over d ascending; exp is a degree-7 polynomial after range reduction.
#include <immintrin.h>

#include <algorithm>

#include "kernels/attention_internal.h"
#include "kernels/x86/attention_avx2_math.h"

namespace tessera::kernels::attn_detail {
namespace {

using avx2::softmax_weights;

// 8 int8 -> float(q) * d (the reference's one rounding).
inline __m256 dequant8(const int8_t* q, __m256 d) {
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q)))), d);
}

// kQ8 keys [key_begin, key_begin + n) run by run, as load_tile_avx2 does f16 (tails scalar).
void load_tile_q8_avx2(const KvLayer& kv, const int32_t* blocks, int32_t kv_head, int32_t key_begin,
                       int32_t n, float* kt, float* vt, const float** v_rows, PrefetchStream& pf,
                       int32_t lines_per_key) {
  const int32_t hd = kv.head_dim, bs = kv.block_size;
  for_key_runs(kv, blocks, key_begin, n, [&](int32_t block, int32_t in_block, int32_t j, int32_t run) {
    const int64_t s = scale_offset(kv, block, in_block, kv_head);
    const int8_t* v = static_cast<const int8_t*>(kv.v) + v_offset(kv, block, in_block, kv_head);
    for (int32_t c = 0; c < run; ++c) {
      float* dst = vt + int64_t{j + c} * hd;
      const int8_t* row = v + int64_t{c} * hd;
      const float d = kv.v_scale[s + c];
      int32_t e = 0;
      for (; e + 8 <= hd; e += 8) _mm256_storeu_ps(dst + e, dequant8(row + e, _mm256_set1_ps(d)));
      for (; e < hd; ++e) dst[e] = static_cast<float>(row[e]) * d;
      v_rows[j + c] = dst;
      pf.issue(lines_per_key);
    }
    const int8_t* k = static_cast<const int8_t*>(kv.k) + k_offset(kv, block, in_block, kv_head);
    for (int32_t d = 0; d < hd; ++d) {
      float* dst = kt + int64_t{d} * kTileKeys + j;
      const int8_t* row = k + int64_t{d} * bs;
      int32_t c = 0;
      for (; c + 8 <= run; c += 8) _mm256_storeu_ps(dst + c, dequant8(row + c, _mm256_loadu_ps(kv.k_scale + s + c)));
      for (; c < run; ++c) dst[c] = static_cast<float>(row[c]) * kv.k_scale[s + c];
    }
  });
}

void load_tile_avx2(const KvLayer& kv, const int32_t* blocks, int32_t kv_head, int32_t key_begin,
                    int32_t n, PrefetchStream* next, float* kt, float* vt, const float** v_rows) {
  const int32_t hd = kv.head_dim, bs = kv.block_size;
  const bool f16 = kv.dtype == KvDType::kF16;
  PrefetchStream none;
  PrefetchStream& pf = next != nullptr ? *next : none;
  const int32_t lines_per_key = pf.lines_per_key(n);
  if (kv.dtype == KvDType::kQ8) {
    load_tile_q8_avx2(kv, blocks, kv_head, key_begin, n, kt, vt, v_rows, pf, lines_per_key);
    for (int32_t d = 0; d < hd; ++d) std::fill(kt + int64_t{d} * kTileKeys + n, kt + int64_t{d + 1} * kTileKeys, 0.0f);
    return;
  }
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
      for (int32_t d = 0; d < hd; d += 8) {
        _mm256_storeu_ps(dst + d, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + d))));
      }
      v_rows[j] = dst;
    }
  }
  // K rows of the tile: contiguous runs of each block (K is [head_dim][block_size] per block).
  for_key_runs(kv, blocks, key_begin, n, [&](int32_t block, int32_t in_block, int32_t j, int32_t run) {
    const int64_t off = k_offset(kv, block, in_block, kv_head);
    for (int32_t d = 0; d < hd; ++d) {
      float* dst = kt + int64_t{d} * kTileKeys + j;
      const int64_t src = off + int64_t{d} * bs;
      int32_t c = 0;
      if (f16) {
        const uint16_t* k = static_cast<const uint16_t*>(kv.k) + src;
        for (; c + 8 <= run; c += 8) {
          _mm256_storeu_ps(dst + c, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k + c))));
        }
        for (; c < run; ++c) dst[c] = _cvtsh_ss(k[c]);
      } else {
        const float* k = static_cast<const float*>(kv.k) + src;
        for (; c < run; ++c) dst[c] = k[c];
      }
    }
  });
  for (int32_t d = 0; d < hd; ++d) std::fill(kt + int64_t{d} * kTileKeys + n, kt + int64_t{d + 1} * kTileKeys, 0.0f);
}

void scores_avx2(const float* const* q_rows, int32_t num_rows, const float* kt, int32_t head_dim,
                 float scale, float* s) {
  const __m256 vscale = _mm256_set1_ps(scale);
  int32_t r = 0;
  for (; r + 2 <= num_rows; r += 2) {
    const float* q0 = q_rows[r];
    const float* q1 = q_rows[r + 1];
    for (int32_t half = 0; half < kTileKeys; half += 32) {
      __m256 a[4], b[4];
      for (int c = 0; c < 4; ++c) a[c] = b[c] = _mm256_setzero_ps();
      for (int32_t d = 0; d < head_dim; ++d) {
        const float* k = kt + int64_t{d} * kTileKeys + half;
        const __m256 b0 = _mm256_set1_ps(q0[d]);
        const __m256 b1 = _mm256_set1_ps(q1[d]);
        for (int c = 0; c < 4; ++c) {
          const __m256 kv = _mm256_loadu_ps(k + 8 * c);
          a[c] = _mm256_fmadd_ps(b0, kv, a[c]);
          b[c] = _mm256_fmadd_ps(b1, kv, b[c]);
        }
      }
      for (int c = 0; c < 4; ++c) {
        _mm256_storeu_ps(s + int64_t{r} * kTileKeys + half + 8 * c, _mm256_mul_ps(a[c], vscale));
        _mm256_storeu_ps(s + int64_t{r + 1} * kTileKeys + half + 8 * c, _mm256_mul_ps(b[c], vscale));
      }
    }
  }
  for (; r < num_rows; ++r) {
    const float* q = q_rows[r];
    __m256 a[8];
    for (auto& x : a) x = _mm256_setzero_ps();
    for (int32_t d = 0; d < head_dim; ++d) {
      const float* k = kt + int64_t{d} * kTileKeys;
      const __m256 b = _mm256_set1_ps(q[d]);
      for (int c = 0; c < 8; ++c) a[c] = _mm256_fmadd_ps(b, _mm256_loadu_ps(k + 8 * c), a[c]);
    }
    for (int c = 0; c < 8; ++c) _mm256_storeu_ps(s + int64_t{r} * kTileKeys + 8 * c, _mm256_mul_ps(a[c], vscale));
  }
}

// acc[d0 .. d0 + 8*NV) = acc * alpha + sum_j p_j v_j[...], even and odd keys in two chains.
template <int NV>
inline void accumulate(const float* p, int32_t n, const float* const* v_rows, int32_t d0,
                       __m256 valpha, float* acc) {
  __m256 a[NV], b[NV];
  for (int c = 0; c < NV; ++c) {
    a[c] = _mm256_mul_ps(_mm256_loadu_ps(acc + d0 + 8 * c), valpha);
    b[c] = _mm256_setzero_ps();
  }
  int32_t j = 0;
  for (; j + 2 <= n; j += 2) {
    const __m256 pa = _mm256_set1_ps(p[j]);
    const __m256 pb = _mm256_set1_ps(p[j + 1]);
    for (int c = 0; c < NV; ++c) {
      a[c] = _mm256_fmadd_ps(pa, _mm256_loadu_ps(v_rows[j] + d0 + 8 * c), a[c]);
      b[c] = _mm256_fmadd_ps(pb, _mm256_loadu_ps(v_rows[j + 1] + d0 + 8 * c), b[c]);
    }
  }
  if (j < n) {
    const __m256 pa = _mm256_set1_ps(p[j]);
    for (int c = 0; c < NV; ++c) a[c] = _mm256_fmadd_ps(pa, _mm256_loadu_ps(v_rows[j] + d0 + 8 * c), a[c]);
  }
  for (int c = 0; c < NV; ++c) _mm256_storeu_ps(acc + d0 + 8 * c, _mm256_add_ps(a[c], b[c]));
}

void update_avx2(const float* s, int32_t n, const float* const* v_rows, int32_t head_dim,
                 float* state) {
  alignas(32) float p[kTileKeys];
  const float alpha = softmax_weights(s, n, head_dim, state, p);
  const __m256 valpha = _mm256_set1_ps(alpha);
  int32_t d0 = 0;
  for (; d0 + 32 <= head_dim; d0 += 32) accumulate<4>(p, n, v_rows, d0, valpha, state);
  switch ((head_dim - d0) / 8) {
    case 3: accumulate<3>(p, n, v_rows, d0, valpha, state); break;
    case 2: accumulate<2>(p, n, v_rows, d0, valpha, state); break;
    case 1: accumulate<1>(p, n, v_rows, d0, valpha, state); break;
    default: break;
  }
}

const TileKernels kAvx2 = {load_tile_avx2, scores_avx2, update_avx2, tile_direct_avx2};

}  // namespace

const TileKernels* tile_kernels_avx2(int32_t head_dim) {
  return head_dim % 8 == 0 ? &kAvx2 : nullptr;
}

}  // namespace tessera::kernels::attn_detail
