// AVX2 matmul kernels, the same scheme as matmul_avx512.cpp on 256-bit registers: one block per
// step, int32 lanes from maddubs + madd (weights as unsigned bytes, the sign moved onto the
// activations for signed types), and two accumulators per output (even blocks, odd blocks) so
// the float reduction is the canonical one of matmul_canon.h. Float weights: two 8-lane
// accumulators (columns c % 16 < 8 and >= 8). K-quants: x86/matmul_kquant_avx2.cpp.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/matmul_canon.h"
#include "kernels/quant_blocks.h"
#include "kernels/x86/matmul_kquant_avx2.h"

namespace tessera::kernels::avx2 {
namespace {

constexpr int kTile = 4;          // activation rows sharing one unpacked weight block
constexpr int64_t kRowChunk = 8;  // weight rows kept hot in L1 while every tile passes
constexpr int64_t kPrefetchRows = 4;  // software prefetch distance, in weight rows

inline float hsum_canonical(__m256 even, __m256 odd) {
  const __m256 v = _mm256_add_ps(even, odd);
  const __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 u = _mm_add_ps(t, _mm_movehl_ps(t, t));
  return _mm_cvtss_f32(_mm_add_ss(u, _mm_movehdup_ps(u)));
}

constexpr bool signed_weights(DType t) {
  return t == DType::Q4_0 || t == DType::Q5_0 || t == DType::Q8_0;
}

inline __m256i nibbles(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
}

// 32 bits -> 32 bytes, 0x10 where the bit is set.
inline __m256i fifth_bits(uint32_t qh) {
  const __m256i idx = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                        0x0101010101010101, 0x0000000000000000);
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)), idx);
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

template <DType T>
inline __m256i unpack(const uint8_t* w, float* dw, float* mw) {
  if constexpr (T == DType::Q8_0) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(w);
    *dw = _cvtsh_ss(b->d);
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs));
  } else if constexpr (T == DType::Q4_0) {
    const auto* b = reinterpret_cast<const BlockQ4_0*>(w);
    *dw = _cvtsh_ss(b->d);
    return _mm256_sub_epi8(nibbles(b->qs), _mm256_set1_epi8(8));
  } else if constexpr (T == DType::Q4_1) {
    const auto* b = reinterpret_cast<const BlockQ4_1*>(w);
    *dw = _cvtsh_ss(b->d), *mw = _cvtsh_ss(b->m);
    return nibbles(b->qs);
  } else {
    using Block = std::conditional_t<T == DType::Q5_0, BlockQ5_0, BlockQ5_1>;
    const auto* b = reinterpret_cast<const Block*>(w);
    *dw = _cvtsh_ss(b->d);
    if constexpr (T == DType::Q5_1) *mw = _cvtsh_ss(b->m);
    const __m256i q5 = _mm256_or_si256(nibbles(b->qs), fifth_bits(load_qh(b->qh)));
    if constexpr (T == DType::Q5_0) return _mm256_sub_epi8(q5, _mm256_set1_epi8(16));
    return q5;
  }
}

// [d0, d1, m0, m1] of two blocks (m = 0 for types without a minimum): every block starts with its
// fp16 d, the _1 types follow it with m.
template <DType T>
inline __m128 load_dm(const uint8_t* w0, const uint8_t* w1) {
  uint16_t h[4];
  __builtin_memcpy(&h[0], w0, 2);
  __builtin_memcpy(&h[1], w1, 2);
  if constexpr (T == DType::Q4_1 || T == DType::Q5_1) {
    __builtin_memcpy(&h[2], w0 + 2, 2);
    __builtin_memcpy(&h[3], w1 + 2, 2);
  } else {
    h[2] = h[3] = 0;
  }
  uint64_t bits;
  __builtin_memcpy(&bits, h, 8);
  return _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(bits)));
}

template <DType T, int R>
void block32_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end, int64_t i0) {
  constexpr bool kSigned = signed_weights(T);
  constexpr bool kMin = T == DType::Q4_1 || T == DType::Q5_1;
  const size_t block_bytes = dtype_block_bytes(T);
  const int64_t nb = a.cols / kQk;
  const __m256i ones16 = _mm256_set1_epi16(1);
  const int8_t* xq[R];
  const float* xd[R];
  const float* xs[R];
  for (int j = 0; j < R; ++j) {
    xq[j] = a.xq + (i0 + j) * a.cols;
    xd[j] = a.xd + (i0 + j) * nb;
    xs[j] = a.xs + (i0 + j) * nb;
  }
  for (int64_t r = r_begin; r < r_end; ++r) {
    const uint8_t* wrow = a.w + static_cast<size_t>(r) * a.row_bytes;
    __m256 acc[R][2];  // even blocks, odd blocks
    __m128 msum[R];    // lanes 2, 3: the canonical msum[0] (even blocks), msum[1] (odd blocks)
    for (int j = 0; j < R; ++j) {
      acc[j][0] = acc[j][1] = _mm256_setzero_ps();
      msum[j] = _mm_setzero_ps();
    }
    const __m256i lane1 = _mm256_set1_epi32(1);
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      const uint8_t* w0 = wrow + b * block_bytes;
      // Stream the row kPrefetchRows ahead into L2 (m = 1 over a large matrix is a DRAM read).
      _mm_prefetch(reinterpret_cast<const char*>(w0 + kPrefetchRows * a.row_bytes), _MM_HINT_T1);
      const __m128 dm = load_dm<T>(w0, w0 + block_bytes);
      float unused_d, unused_m;
      __m256i wq0 = unpack<T>(w0, &unused_d, &unused_m);
      __m256i wq1 = unpack<T>(w0 + block_bytes, &unused_d, &unused_m);
      const __m256i ws0 = wq0, ws1 = wq1;
      if constexpr (kSigned) {
        wq0 = _mm256_sign_epi8(wq0, wq0);
        wq1 = _mm256_sign_epi8(wq1, wq1);
      }
      for (int j = 0; j < R; ++j) {
        __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[j] + b * kQk));
        __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[j] + b * kQk + kQk));
        if constexpr (kSigned) {
          x0 = _mm256_sign_epi8(x0, ws0);
          x1 = _mm256_sign_epi8(x1, ws1);
        }
        const __m256i i0 = _mm256_madd_epi16(_mm256_maddubs_epi16(wq0, x0), ones16);
        const __m256i i1 = _mm256_madd_epi16(_mm256_maddubs_epi16(wq1, x1), ones16);
        // [xd0, xd1, xs0, xs1]: lanes 0,1 give the block scales dw*dx, lanes 2,3 the min terms.
        __m128 xds = _mm_castsi128_ps(_mm_loadu_si64(xd[j] + b));
        if constexpr (kMin) {
          xds = _mm_movelh_ps(xds, _mm_castsi128_ps(_mm_loadu_si64(xs[j] + b)));
          msum[j] = _mm_fmadd_ps(dm, xds, msum[j]);
        }
        const __m256 s2 = _mm256_castps128_ps256(_mm_mul_ps(dm, xds));
        acc[j][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0), _mm256_broadcastss_ps(_mm256_castps256_ps128(s2)), acc[j][0]);
        acc[j][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1), _mm256_permutevar8x32_ps(s2, lane1), acc[j][1]);
      }
    }
    if (b < nb) {  // a last even block
      float dw = 0.0f, mw = 0.0f;
      __m256i wq = unpack<T>(wrow + b * block_bytes, &dw, &mw);
      const __m256i wsign = wq;
      if constexpr (kSigned) wq = _mm256_sign_epi8(wq, wq);
      for (int j = 0; j < R; ++j) {
        __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[j] + b * kQk));
        if constexpr (kSigned) xv = _mm256_sign_epi8(xv, wsign);
        const __m256i isum = _mm256_madd_epi16(_mm256_maddubs_epi16(wq, xv), ones16);
        acc[j][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(dw * xd[j][b]), acc[j][0]);
        if constexpr (kMin) {  // lane 2 only: the even-block msum
          const __m128 t = _mm_fmadd_ss(_mm_set_ss(mw), _mm_set_ss(xs[j][b]), _mm_movehl_ps(msum[j], msum[j]));
          msum[j] = _mm_insert_ps(msum[j], t, 0x20);
        }
      }
    }
    for (int j = 0; j < R; ++j) {
      float v = hsum_canonical(acc[j][0], acc[j][1]);
      if constexpr (kMin) {
        const float m0 = _mm_cvtss_f32(_mm_movehl_ps(msum[j], msum[j]));
        const float m1 = _mm_cvtss_f32(_mm_shuffle_ps(msum[j], msum[j], 3));
        v = v + (m0 + m1);
      }
      a.y[(i0 + j) * a.rows + r] = v;
    }
  }
}

template <DType T>
inline __m256 load8(const uint8_t* wrow, int64_t c) {
  if constexpr (T == DType::F32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(wrow) + c);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(wrow) + c));
    if constexpr (T == DType::F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

template <DType T, int R>
void float_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end, int64_t i0) {
  for (int64_t r = r_begin; r < r_end; ++r) {
    const uint8_t* wrow = a.w + static_cast<size_t>(r) * a.row_bytes;
    __m256 acc[R][2];
    for (int j = 0; j < R; ++j) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
    const size_t esize = T == DType::F32 ? 4 : 2;
    for (int64_t c = 0; c < a.cols; c += 16) {
      if ((c * esize) % 64 == 0) {
        _mm_prefetch(reinterpret_cast<const char*>(wrow + kPrefetchRows * a.row_bytes + c * esize), _MM_HINT_T1);
      }
      const __m256 w0 = load8<T>(wrow, c), w1 = load8<T>(wrow, c + 8);
      for (int j = 0; j < R; ++j) {
        const float* x = a.x + (i0 + j) * a.cols + c;
        acc[j][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x), acc[j][0]);
        acc[j][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + 8), acc[j][1]);
      }
    }
    for (int j = 0; j < R; ++j) a.y[(i0 + j) * a.rows + r] = hsum_canonical(acc[j][0], acc[j][1]);
  }
}

// Weight rows in chunks of kRowChunk (they stay in L1) against every tile of activation rows.
template <DType T, bool kFloat>
void tiles(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
  for (int64_t r0 = r_begin; r0 < r_end; r0 += kRowChunk) {
    const int64_t r1 = std::min(r_end, r0 + kRowChunk);
    int64_t i0 = 0;
    for (; i0 + kTile <= a.m; i0 += kTile) {
      if constexpr (kFloat) float_rows<T, kTile>(a, r0, r1, i0);
      else block32_rows<T, kTile>(a, r0, r1, i0);
    }
    const int64_t left = a.m - i0;
    if constexpr (kFloat) {
      if (left == 3) float_rows<T, 3>(a, r0, r1, i0);
      if (left == 2) float_rows<T, 2>(a, r0, r1, i0);
      if (left == 1) float_rows<T, 1>(a, r0, r1, i0);
    } else {
      if (left == 3) block32_rows<T, 3>(a, r0, r1, i0);
      if (left == 2) block32_rows<T, 2>(a, r0, r1, i0);
      if (left == 1) block32_rows<T, 1>(a, r0, r1, i0);
    }
  }
}

}  // namespace

bool matmul_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
  const bool cols16 = a.cols % 16 == 0;
  switch (a.type) {
    case DType::Q4_0: tiles<DType::Q4_0, false>(a, r_begin, r_end); return true;
    case DType::Q4_1: tiles<DType::Q4_1, false>(a, r_begin, r_end); return true;
    case DType::Q5_0: tiles<DType::Q5_0, false>(a, r_begin, r_end); return true;
    case DType::Q5_1: tiles<DType::Q5_1, false>(a, r_begin, r_end); return true;
    case DType::Q8_0: tiles<DType::Q8_0, false>(a, r_begin, r_end); return true;
    case DType::F32: if (!cols16) return false; tiles<DType::F32, true>(a, r_begin, r_end); return true;
    case DType::F16: if (!cols16) return false; tiles<DType::F16, true>(a, r_begin, r_end); return true;
    case DType::BF16: if (!cols16) return false; tiles<DType::BF16, true>(a, r_begin, r_end); return true;
    default: return matmul_rows_kquant(a, r_begin, r_end);
  }
}

}  // namespace tessera::kernels::avx2
