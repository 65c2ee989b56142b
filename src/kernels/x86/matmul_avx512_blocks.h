// Internal (AVX-512 translation units only): the weight-block unpackers and the canonical
// horizontal sum shared by the m = 1 kernels (matmul_avx512.cpp) and the register-blocked m > 1
// kernel (matmul_gemm_avx512.cpp).
#pragma once
#include <immintrin.h>

#include <type_traits>

#include "kernels/matmul_canon.h"
#include "kernels/quant_blocks.h"

namespace tessera::kernels::avx512 {

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

}  // namespace tessera::kernels::avx512
