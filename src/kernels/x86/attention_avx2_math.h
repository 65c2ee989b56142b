// Pieces shared by the AVX2 attention tile kernels (attention_avx2.cpp, the three-step tile
// kernels; attention_direct_avx2.cpp, the fused tile that reads K and V straight from the cache).
// Both must give each row the same bits, so the exponential and the softmax weights live here once.
// Include only from files compiled with the AVX2 flags.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/attention.h"
#include "kernels/x86/avx2_helpers.h"

namespace tessera::kernels::attn_detail::avx2 {

// e^x for x <= 0 (inputs below -87 give ~1e-38 instead of 0; callers mask unused lanes).
inline __m256 exp256(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// All-ones in the first clamp(count, 0, 8) lanes.
inline __m256 lanes_below(int32_t count) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(count), idx));
}

// The online-softmax step of one row before its values are read: with the row's first n scores s
// (n >= 1; s is read in whole chunks of 8), sets m' = max(m, max s), p[j] = e^(s_j - m') (0 past
// n, up to the next 8), l = l * alpha + sum p and returns alpha = e^(m - m') (0 for a fresh row).
// state = [acc(head_dim), m, l].
inline float softmax_weights(const float* s, int32_t n, int32_t head_dim, float* state, float* p) {
  float& m = state[head_dim];
  float& l = state[head_dim + 1];
  const int32_t num_chunks = (n + 7) / 8;
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 vmax = neg_inf;
  for (int32_t c = 0; c < num_chunks; ++c) {
    const __m256 mask = lanes_below(n - 8 * c);
    vmax = _mm256_max_ps(vmax, _mm256_blendv_ps(neg_inf, _mm256_loadu_ps(s + 8 * c), mask));
  }
  const float m_new = std::max(m, kernels::avx2::hmax(vmax));
  const float alpha = m == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(m - m_new);
  __m256 vsum = _mm256_setzero_ps();
  const __m256 vm = _mm256_set1_ps(m_new);
  for (int32_t c = 0; c < num_chunks; ++c) {
    const __m256 mask = lanes_below(n - 8 * c);
    const __m256 e = _mm256_and_ps(mask, exp256(_mm256_sub_ps(_mm256_loadu_ps(s + 8 * c), vm)));
    _mm256_storeu_ps(p + 8 * c, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  l = l * alpha + kernels::avx2::hsum(vsum);
  m = m_new;
  return alpha;
}

}  // namespace tessera::kernels::attn_detail::avx2
