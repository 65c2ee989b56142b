// AVX-512 element-wise ops (kernels/ops.h), each the AVX2 op of x86/ops_avx2.cpp on 16 lanes:
// - swiglu: x86/ops_exp.h's exponential on 16 lanes, so every element gets the bits the AVX2 path
//   gives it; 8 left over after the 16-lane chunks take one half-masked chunk and
//   fewer than 8 the scalar tail, the elements AVX2 also leaves to it. (The exp and the division
//   are the op's cost: 0.7 ms of a B = 16 decode step on Qwen2.5-0.5B with 8 lanes.)
// - scan_logits: compare masks instead of blend vectors, and the tail read through a masked load
//   filled with -Inf (an entry that never wins and is never bad).
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _mm512_undefined temporaries.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/x86/ops_avx512.h"

#include <immintrin.h>

#include <cmath>

#include "kernels/x86/ops_exp.h"

namespace tessera::kernels::avx512 {
namespace {

// exp_poly's operations on 16 lanes (x86/ops_exp.h): the AVX2 path's bits.
struct Ops16 {
  using V = __m512;
  static V set1(float v) { return _mm512_set1_ps(v); }
  static V min(V a, V b) { return _mm512_min_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V round(V a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V fnmadd(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }
  static V pow2(V n) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
  }
};

inline __m512 exp512(__m512 x) { return x86::exp_poly<Ops16>(x); }

inline __m512 swiglu16(__m512 g, __m512 u) {
  const __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), g));
  return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u);
}

}  // namespace

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, swiglu16(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  if (i + 8 <= n) {
    const __mmask16 half = 0x00ff;
    const __m512 y = swiglu16(_mm512_maskz_loadu_ps(half, gate + i), _mm512_maskz_loadu_ps(half, up + i));
    _mm512_mask_storeu_ps(out + i, half, y);
    i += 8;
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

// fpclass categories that make a row unusable: QNaN, +Inf, SNaN.
constexpr int kBadClasses = 0x01 | 0x08 | 0x80;

LogitsScan scan_logits(const float* row, int64_t n) {
  const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
  __m512 best[2] = {neg_inf, neg_inf};
  __m512i at[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  __m512i idx[2] = {_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                    _mm512_setr_epi32(16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31)};
  const __m512i step = _mm512_set1_epi32(32);
  __mmask16 bad = 0;
  auto take = [&](int a, __m512 x) {
    const __mmask16 larger = _mm512_cmp_ps_mask(x, best[a], _CMP_GT_OQ);
    best[a] = _mm512_mask_mov_ps(best[a], larger, x);
    at[a] = _mm512_mask_mov_epi32(at[a], larger, idx[a]);
  };
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int a = 0; a < 2; ++a) {
      const __m512 x = _mm512_loadu_ps(row + i + 16 * a);
      bad |= _mm512_fpclass_ps_mask(x, kBadClasses);
      take(a, x);
      idx[a] = _mm512_add_epi32(idx[a], step);
    }
  }
  for (int a = 0; a < 2 && i + 16 * a < n; ++a) {  // the last 1-31 entries
    const int64_t left = n - i - 16 * a;
    const __mmask16 m = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
    const __m512 x = _mm512_mask_loadu_ps(neg_inf, m, row + i + 16 * a);
    bad |= _mm512_mask_fpclass_ps_mask(m, x, kBadClasses);
    take(a, x);
  }
  if (bad != 0) return LogitsScan{};
  const float top = _mm512_reduce_max_ps(_mm512_max_ps(best[0], best[1]));
  const __m512 vtop = _mm512_set1_ps(top);
  const __m512i none = _mm512_set1_epi32(0x7fffffff);
  const __m512i first0 = _mm512_mask_mov_epi32(none, _mm512_cmp_ps_mask(best[0], vtop, _CMP_EQ_OQ), at[0]);
  const __m512i first1 = _mm512_mask_mov_epi32(none, _mm512_cmp_ps_mask(best[1], vtop, _CMP_EQ_OQ), at[1]);
  return LogitsScan{top > -INFINITY, _mm512_reduce_min_epi32(_mm512_min_epi32(first0, first1))};
}

}  // namespace tessera::kernels::avx512
