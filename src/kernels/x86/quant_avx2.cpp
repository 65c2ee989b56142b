// AVX2/F16C dequantizers for the types on the embedding-lookup path (F16, BF16, Q8_0, Q4_0, Q4_1).
// Bit-identical to quant_ref.cpp: each value is one int->float conversion and one multiply (and
// one add for Q4_1), in the same order as the reference.
#include "kernels/x86/quant_avx2.h"

#include <immintrin.h>

#include "kernels/quant_blocks.h"

namespace tessera::kernels::avx2 {
namespace {

// 16 nibble bytes -> 32 bytes: [low nibbles (elements 0..15) | high nibbles (16..31)].
inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i lo = _mm_and_si128(b, _mm_set1_epi8(0x0F));
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0x0F));
  return _mm256_set_m128i(hi, lo);
}

inline void store_bytes_scaled(__m256i q, __m256 d, __m256 m, bool add_min, float* y) {
  for (int k = 0; k < 4; ++k) {
    const __m128i part = k < 2 ? _mm256_castsi256_si128(q) : _mm256_extracti128_si256(q, 1);
    const __m128i eight = (k & 1) ? _mm_srli_si128(part, 8) : part;
    __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(eight)), d);
    if (add_min) v = _mm256_add_ps(v, m);
    _mm256_storeu_ps(y + 8 * k, v);
  }
}

}  // namespace

bool dequantize_row(DType type, const void* src, float* dst, int64_t n) {
  switch (type) {
    case DType::F16: {
      const auto* s = static_cast<const uint16_t*>(src);
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
      }
      for (; i < n; ++i) dst[i] = _cvtsh_ss(s[i]);
      return true;
    }
    case DType::BF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
      }
      for (; i < n; ++i) {
        const uint32_t bits = static_cast<uint32_t>(s[i]) << 16;
        __builtin_memcpy(dst + i, &bits, 4);
      }
      return true;
    }
    case DType::Q8_0: {
      const auto* x = static_cast<const BlockQ8_0*>(src);
      for (int64_t b = 0; b < n / kQk; ++b) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(x[b].d));
        store_bytes_scaled(q, d, d, false, dst + b * kQk);
      }
      return true;
    }
    case DType::Q4_0: {
      const auto* x = static_cast<const BlockQ4_0*>(src);
      for (int64_t b = 0; b < n / kQk; ++b) {
        const __m256i q = _mm256_sub_epi8(unpack_nibbles(x[b].qs), _mm256_set1_epi8(8));
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(x[b].d));
        store_bytes_scaled(q, d, d, false, dst + b * kQk);
      }
      return true;
    }
    case DType::Q4_1: {
      const auto* x = static_cast<const BlockQ4_1*>(src);
      for (int64_t b = 0; b < n / kQk; ++b) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(x[b].d));
        const __m256 m = _mm256_set1_ps(_cvtsh_ss(x[b].m));
        store_bytes_scaled(unpack_nibbles(x[b].qs), d, m, true, dst + b * kQk);
      }
      return true;
    }
    default:
      return false;
  }
}

void quantize_activations(const float* x, int64_t num_blocks, int64_t block, int8_t* xq,
                          float* xd, float* xs, int32_t* xsum, int32_t* xbsums) {
  const __m256 sign_off = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t b = 0; b < num_blocks; ++b) {
    const float* xb = x + b * block;
    int8_t* qb = xq + b * block;
    __m256 vmax = _mm256_setzero_ps();
    for (int64_t j = 0; j < block; j += 8) {
      vmax = _mm256_max_ps(vmax, _mm256_and_ps(_mm256_loadu_ps(xb + j), sign_off));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float amax = _mm_cvtss_f32(m);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i sum = _mm256_setzero_si256();
    for (int64_t j = 0; j < block; j += 32) {
      // cvtps rounds half to even (default MXCSR), as std::nearbyint in the scalar twin.
      const __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + j), vid));
      const __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + j + 8), vid));
      const __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + j + 16), vid));
      const __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + j + 24), vid));
      sum = _mm256_add_epi32(sum, _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
      // packs interleave 128-bit lanes; the permute restores element order.
      const __m256i w01 = _mm256_packs_epi32(i0, i1), w23 = _mm256_packs_epi32(i2, i3);
      const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23),
                                                        _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb + j), bytes);
    }
    const float d = amax / 127.0f;
    xd[b] = d;
    if (block == kQk) {
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
      xsum[b] = _mm_cvtsi128_si32(s4);
      xs[b] = d * static_cast<float>(xsum[b]);
    } else {
      for (int g = 0; g < kQkK / 16; ++g) {
        int32_t s = 0;
        for (int j = 0; j < 16; ++j) s += qb[16 * g + j];
        xbsums[b * 16 + g] = s;
      }
    }
  }
}

}  // namespace tessera::kernels::avx2
