// Pieces shared by the AVX-512 attention tile kernels (attention_avx512.cpp, the three-step tile
// kernels; attention_direct_avx512.cpp, the fused tile that reads K and V straight from the cache).
// Both must give each row the same bits, so the exponential and the softmax weights live here once.
// Include only from files compiled with the AVX-512 flags.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/attention.h"

namespace tessera::kernels::attn_detail::avx512 {

// e^x for x <= 0 (inputs below -87 give ~1e-38 instead of 0; callers mask unused lanes).
inline __m512 exp512(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

inline __mmask16 lanes_below(int32_t count) {  // first clamp(count, 0, 16) lanes
  count = std::clamp(count, 0, 16);
  return static_cast<__mmask16>(count == 16 ? 0xffffu : (1u << count) - 1u);
}

// The online-softmax step of one row before its values are read: with the row's first n scores s
// (n >= 1), sets m' = max(m, max s), p[j] = e^(s_j - m') (0 past n, up to the next 16), l = l * alpha +
// sum p and returns alpha = e^(m - m') (0 for a fresh row). state = [acc(head_dim), m, l].
inline float softmax_weights(const float* s, int32_t n, int32_t head_dim, float* state, float* p) {
  float& m = state[head_dim];
  float& l = state[head_dim + 1];
  const int32_t num_chunks = (n + 15) / 16;
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 vmax = neg_inf;
  for (int32_t c = 0; c < num_chunks; ++c) {
    vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(neg_inf, lanes_below(n - 16 * c), s + 16 * c));
  }
  const float m_new = std::max(m, _mm512_reduce_max_ps(vmax));
  const float alpha = m == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(m - m_new);
  __m512 vsum = _mm512_setzero_ps();
  const __m512 vm = _mm512_set1_ps(m_new);
  for (int32_t c = 0; c < num_chunks; ++c) {
    const __mmask16 mask = lanes_below(n - 16 * c);
    const __m512 e = _mm512_maskz_mov_ps(mask, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, s + 16 * c), vm)));
    _mm512_storeu_ps(p + 16 * c, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  l = l * alpha + _mm512_reduce_add_ps(vsum);
  m = m_new;
  return alpha;
}

}  // namespace tessera::kernels::attn_detail::avx512
