// Internal: small AVX2 helpers shared by the AVX2 kernel files: horizontal sum and max (ops,
// attention) and the bit-to-byte expansion of Q5_0/Q5_1's fifth bits (both matmul kernels).
// Include only from files compiled with the AVX2 flags.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace tessera::kernels::avx2 {

// Lane sum and lane max of v, in one fixed order: (lo + hi) halves, then pairs, then the last two.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 32 bits -> 32 bytes: byte i is 0x10 where bit i of `bits` is set, else 0.
inline __m256i fifth_bits(uint32_t bits) {
  const __m256i idx = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                        0x0101010101010101, 0x0000000000000000);
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), idx);
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

}  // namespace tessera::kernels::avx2
