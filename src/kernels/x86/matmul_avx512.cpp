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
#include "kernels/x86/matmul_avx512_blocks.h"

namespace tessera::kernels::avx512 {
namespace {

constexpr int kTile = 8;        // activation rows sharing one unpacked weight block
constexpr int64_t kRowChunk = 8;  // weight rows kept hot in L1 while every tile passes
constexpr int64_t kPrefetchRows = 4;  // software prefetch distance, in weight rows

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
  if (a.m > 1 && gemm_rows(a, r_begin, r_end)) return true;
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
