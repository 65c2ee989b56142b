// AVX-512 (VNNI) matmul kernels. 32-block weights: two blocks per 512-bit step, weight bytes
// unpacked once and dotted with up to kTile activation rows (the tiled kernel for m > 1 is the
// m = 1 kernel with more rows), 8 int32 lanes per block from vpdpbusd, then the canonical float
// reduction of matmul_canon.h: lanes 0..7 of the accumulator hold even blocks, 8..15 odd blocks.
// Float weights: one 16-lane fma accumulator per output. K-quants: the AVX2 kernel.
// NOTE(quant): GCC 12 warns "__Y may be used uninitialized" inside avx512fintrin.h's cast
// intrinsics (_mm512_castsi256_si512 and friends leave the upper half undefined on purpose).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/matmul_canon.h"
#include "kernels/quant_blocks.h"

namespace tessera::kernels::avx512 {
namespace {

constexpr int kTile = 8;        // activation rows sharing one unpacked weight block
constexpr int64_t kRowChunk = 8;  // weight rows kept hot in L1 while every tile passes
constexpr int64_t kPrefetchRows = 4;  // software prefetch distance, in weight rows

inline float hsum_canonical(__m512 acc) {
  const __m256 v = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
  const __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 u = _mm_add_ps(t, _mm_movehl_ps(t, t));
  return _mm_cvtss_f32(_mm_add_ss(u, _mm_movehdup_ps(u)));
}

constexpr bool signed_weights(DType t) { return t == DType::Q4_0 || t == DType::Q5_0 || t == DType::Q8_0; }

// Bytes of two 16-byte nibble arrays -> [b0 lo, b0 hi, b1 lo, b1 hi] (element order of 2 blocks).
inline __m512i nibbles2(const uint8_t* qs0, const uint8_t* qs1) {
  const __m256i y = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs1)),
                                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs0)));
  const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(y), _mm256_srli_epi16(y, 4), 1);
  return _mm512_and_si512(_mm512_shuffle_i64x2(z, z, 0xD8), _mm512_set1_epi8(0x0F));
}

inline __m256i nibbles1(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
}

// Integer weights of blocks b and b+1 (64 bytes); *dm = [d0, d1, m0, m1] (m = 0 without minimum).
template <DType T>
inline __m512i unpack2(const uint8_t* w, __m128* dm) {
  constexpr size_t kBytes = T == DType::Q4_0 ? 18 : T == DType::Q4_1 ? 20 : T == DType::Q5_0 ? 22
                          : T == DType::Q5_1 ? 24 : 34;
  const uint8_t* w1 = w + kBytes;
  uint16_t h[4];  // d0, d1, m0, m1 as fp16 bits (every block starts with d, the _1 types then m)
  __builtin_memcpy(&h[0], w, 2);
  __builtin_memcpy(&h[1], w1, 2);
  if constexpr (T == DType::Q4_1 || T == DType::Q5_1) {
    __builtin_memcpy(&h[2], w + 2, 2);
    __builtin_memcpy(&h[3], w1 + 2, 2);
  } else {
    h[2] = h[3] = 0;
  }
  uint64_t bits;
  __builtin_memcpy(&bits, h, 8);
  *dm = _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(bits)));
  if constexpr (T == DType::Q8_0) {
    const auto* b0 = reinterpret_cast<const BlockQ8_0*>(w);
    const auto* b1 = reinterpret_cast<const BlockQ8_0*>(w1);
    return _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0->qs))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b1->qs)), 1);
  } else if constexpr (T == DType::Q4_0) {
    const auto* b0 = reinterpret_cast<const BlockQ4_0*>(w);
    const auto* b1 = reinterpret_cast<const BlockQ4_0*>(w1);
    return _mm512_sub_epi8(nibbles2(b0->qs, b1->qs), _mm512_set1_epi8(8));
  } else if constexpr (T == DType::Q4_1) {
    const auto* b0 = reinterpret_cast<const BlockQ4_1*>(w);
    const auto* b1 = reinterpret_cast<const BlockQ4_1*>(w1);
    return nibbles2(b0->qs, b1->qs);
  } else {
    using Block = std::conditional_t<T == DType::Q5_0, BlockQ5_0, BlockQ5_1>;
    const auto* b0 = reinterpret_cast<const Block*>(w);
    const auto* b1 = reinterpret_cast<const Block*>(w1);
    const __mmask64 high = static_cast<__mmask64>(load_qh(b0->qh)) |
                           (static_cast<__mmask64>(load_qh(b1->qh)) << 32);
    const __m512i q = nibbles2(b0->qs, b1->qs);
    const __m512i q5 = _mm512_mask_add_epi8(q, high, q, _mm512_set1_epi8(0x10));
    if constexpr (T == DType::Q5_0) return _mm512_sub_epi8(q5, _mm512_set1_epi8(16));
    return q5;
  }
}

template <DType T>
inline __m256i unpack1(const uint8_t* w, float* dw, float* mw) {
  if constexpr (T == DType::Q8_0) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(w);
    *dw = _cvtsh_ss(b->d);
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs));
  } else if constexpr (T == DType::Q4_0) {
    const auto* b = reinterpret_cast<const BlockQ4_0*>(w);
    *dw = _cvtsh_ss(b->d);
    return _mm256_sub_epi8(nibbles1(b->qs), _mm256_set1_epi8(8));
  } else if constexpr (T == DType::Q4_1) {
    const auto* b = reinterpret_cast<const BlockQ4_1*>(w);
    *dw = _cvtsh_ss(b->d), *mw = _cvtsh_ss(b->m);
    return nibbles1(b->qs);
  } else {
    using Block = std::conditional_t<T == DType::Q5_0, BlockQ5_0, BlockQ5_1>;
    const auto* b = reinterpret_cast<const Block*>(w);
    *dw = _cvtsh_ss(b->d);
    if constexpr (T == DType::Q5_1) *mw = _cvtsh_ss(b->m);
    const __m256i q = nibbles1(b->qs);
    const __m256i q5 = _mm256_mask_add_epi8(q, static_cast<__mmask32>(load_qh(b->qh)), q,
                                           _mm256_set1_epi8(0x10));
    if constexpr (T == DType::Q5_0) return _mm256_sub_epi8(q5, _mm256_set1_epi8(16));
    return q5;
  }
}

// y[i0 + j][r] for j < R, r in [r_begin, r_end).
template <DType T, int R>
void block32_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end, int64_t i0) {
  constexpr bool kSigned = signed_weights(T);
  constexpr bool kMin = T == DType::Q4_1 || T == DType::Q5_1;
  const size_t block_bytes = dtype_block_bytes(T);
  const int64_t nb = a.cols / kQk;
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
    __m512 acc[R];
    __m128 msum[R];  // lanes 2, 3: the canonical msum[0] (even blocks), msum[1] (odd blocks)
    for (int j = 0; j < R; ++j) acc[j] = _mm512_setzero_ps(), msum[j] = _mm_setzero_ps();
    const __m512i halves = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      __m128 dm;
      // Stream the row kPrefetchRows ahead into L2 (m = 1 over a large matrix is a DRAM read).
      _mm_prefetch(reinterpret_cast<const char*>(wrow + kPrefetchRows * a.row_bytes + b * block_bytes), _MM_HINT_T1);
      __m512i wq = unpack2<T>(wrow + b * block_bytes, &dm);
      __mmask64 neg = 0;
      if constexpr (kSigned) {
        neg = _mm512_movepi8_mask(wq);
        wq = _mm512_abs_epi8(wq);
      }
      for (int j = 0; j < R; ++j) {
        __m512i xv = _mm512_loadu_si512(xq[j] + b * kQk);
        if constexpr (kSigned) xv = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);
        const __m512i isum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wq, xv);
        // [xd0, xd1, xs0, xs1]: lanes 0,1 give the block scales dw*dx, lanes 2,3 the min terms.
        __m128 xds = _mm_castsi128_ps(_mm_loadu_si64(xd[j] + b));
        if constexpr (kMin) {
          xds = _mm_movelh_ps(xds, _mm_castsi128_ps(_mm_loadu_si64(xs[j] + b)));
          msum[j] = _mm_fmadd_ps(dm, xds, msum[j]);
        }
        const __m512 scale = _mm512_permutexvar_ps(halves, _mm512_castps128_ps512(_mm_mul_ps(dm, xds)));
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, acc[j]);
      }
    }
    if (b < nb) {  // a last even block: lanes 0..7
      float dw = 0.0f, mw = 0.0f;
      __m256i wq = unpack1<T>(wrow + b * block_bytes, &dw, &mw);
      __mmask32 neg = 0;
      if constexpr (kSigned) {
        neg = _mm256_movepi8_mask(wq);
        wq = _mm256_abs_epi8(wq);
      }
      for (int j = 0; j < R; ++j) {
        __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[j] + b * kQk));
        if constexpr (kSigned) xv = _mm256_mask_sub_epi8(xv, neg, _mm256_setzero_si256(), xv);
        const __m256i isum = _mm256_dpbusd_epi32(_mm256_setzero_si256(), wq, xv);
        const __m256 lo = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(dw * xd[j][b]),
                                          _mm512_castps512_ps256(acc[j]));
        acc[j] = _mm512_insertf32x8(acc[j], lo, 0);
        if constexpr (kMin) {  // lane 2 only: the even-block msum
          const __m128 t = _mm_fmadd_ss(_mm_set_ss(mw), _mm_set_ss(xs[j][b]), _mm_movehl_ps(msum[j], msum[j]));
          msum[j] = _mm_insert_ps(msum[j], t, 0x20);
        }
      }
    }
    for (int j = 0; j < R; ++j) {
      float v = hsum_canonical(acc[j]);
      if constexpr (kMin) {
        const float m0 = _mm_cvtss_f32(_mm_movehl_ps(msum[j], msum[j]));
        const float m1 = _mm_cvtss_f32(_mm_shuffle_ps(msum[j], msum[j], 3));
        v = v + (m0 + m1);
      }
      a.y[(i0 + j) * a.rows + r] = v;
    }
  }
}

// Weight rows in chunks of kRowChunk (they stay in L1) against every tile of activation rows.
template <DType T>
void block32(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
  for (int64_t r0 = r_begin; r0 < r_end; r0 += kRowChunk) {
    const int64_t r1 = std::min(r_end, r0 + kRowChunk);
    int64_t i0 = 0;
    for (; i0 + kTile <= a.m; i0 += kTile) block32_rows<T, kTile>(a, r0, r1, i0);
    switch (a.m - i0) {
      case 7: block32_rows<T, 7>(a, r0, r1, i0); break;
      case 6: block32_rows<T, 6>(a, r0, r1, i0); break;
      case 5: block32_rows<T, 5>(a, r0, r1, i0); break;
      case 4: block32_rows<T, 4>(a, r0, r1, i0); break;
      case 3: block32_rows<T, 3>(a, r0, r1, i0); break;
      case 2: block32_rows<T, 2>(a, r0, r1, i0); break;
      case 1: block32_rows<T, 1>(a, r0, r1, i0); break;
      default: break;
    }
  }
}

template <DType T>
inline __m512 load16(const uint8_t* wrow, int64_t c) {
  if constexpr (T == DType::F32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(wrow) + c);
  } else {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(wrow) + c));
    if constexpr (T == DType::F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

template <DType T, int R>
void float_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end, int64_t i0) {
  for (int64_t r = r_begin; r < r_end; ++r) {
    const uint8_t* wrow = a.w + static_cast<size_t>(r) * a.row_bytes;
    __m512 acc[R];
    for (int j = 0; j < R; ++j) acc[j] = _mm512_setzero_ps();
    const size_t esize = T == DType::F32 ? 4 : 2;
    for (int64_t c = 0; c < a.cols; c += 16) {
      _mm_prefetch(reinterpret_cast<const char*>(wrow + kPrefetchRows * a.row_bytes + c * esize), _MM_HINT_T1);
      const __m512 w = load16<T>(wrow, c);
      for (int j = 0; j < R; ++j) {
        acc[j] = _mm512_fmadd_ps(w, _mm512_loadu_ps(a.x + (i0 + j) * a.cols + c), acc[j]);
      }
    }
    for (int j = 0; j < R; ++j) a.y[(i0 + j) * a.rows + r] = hsum_canonical(acc[j]);
  }
}

template <DType T>
void float_kernel(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
  for (int64_t r0 = r_begin; r0 < r_end; r0 += kRowChunk) {
    const int64_t r1 = std::min(r_end, r0 + kRowChunk);
    int64_t i0 = 0;
    for (; i0 + kTile <= a.m; i0 += kTile) float_rows<T, kTile>(a, r0, r1, i0);
    switch (a.m - i0) {
      case 7: float_rows<T, 7>(a, r0, r1, i0); break;
      case 6: float_rows<T, 6>(a, r0, r1, i0); break;
      case 5: float_rows<T, 5>(a, r0, r1, i0); break;
      case 4: float_rows<T, 4>(a, r0, r1, i0); break;
      case 3: float_rows<T, 3>(a, r0, r1, i0); break;
      case 2: float_rows<T, 2>(a, r0, r1, i0); break;
      case 1: float_rows<T, 1>(a, r0, r1, i0); break;
      default: break;
    }
  }
}

}  // namespace

bool matmul_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
  const bool cols16 = a.cols % 16 == 0;
  switch (a.type) {
    case DType::Q4_0: block32<DType::Q4_0>(a, r_begin, r_end); return true;
    case DType::Q4_1: block32<DType::Q4_1>(a, r_begin, r_end); return true;
    case DType::Q5_0: block32<DType::Q5_0>(a, r_begin, r_end); return true;
    case DType::Q5_1: block32<DType::Q5_1>(a, r_begin, r_end); return true;
    case DType::Q8_0: block32<DType::Q8_0>(a, r_begin, r_end); return true;
    case DType::F32: if (!cols16) return false; float_kernel<DType::F32>(a, r_begin, r_end); return true;
    case DType::F16: if (!cols16) return false; float_kernel<DType::F16>(a, r_begin, r_end); return true;
    case DType::BF16: if (!cols16) return false; float_kernel<DType::BF16>(a, r_begin, r_end); return true;
    default: return false;
  }
}

}  // namespace tessera::kernels::avx512
