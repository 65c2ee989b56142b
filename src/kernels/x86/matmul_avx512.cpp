// AVX-512 matmul kernels for float weights (F32, F16, BF16): one 16-lane fma accumulator per
// output, lane c % 16 as matmul_canon.h defines it, weight rows against tiles of up to kTile
// activation rows. 32-block weights: x86/matmul_packed_avx512.cpp (packed layout) or the AVX2
// kernel; K-quants: the AVX2 kernel.
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

// reduce16 of matmul_canon.h on one register.
inline float hsum_canonical(__m512 acc) {
  const __m256 v = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
  const __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 u = _mm_add_ps(t, _mm_movehl_ps(t, t));
  return _mm_cvtss_f32(_mm_add_ss(u, _mm_movehdup_ps(u)));
}

constexpr int kTile = 8;        // activation rows sharing one unpacked weight block
constexpr int64_t kRowChunk = 8;  // weight rows kept hot in L1 while every tile passes
constexpr int64_t kPrefetchRows = 4;  // software prefetch distance, in weight rows

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
  if (a.cols % 16 != 0) return false;
  switch (a.type) {
    case DType::F32: float_kernel<DType::F32>(a, r_begin, r_end); return true;
    case DType::F16: float_kernel<DType::F16>(a, r_begin, r_end); return true;
    case DType::BF16: float_kernel<DType::BF16>(a, r_begin, r_end); return true;
    default: return false;
  }
}

}  // namespace tessera::kernels::avx512
