// kernels/lora.h's loops with AVX2 + FMA + F16C: a 16-lane group is two ymm registers.
// GCC 12 warns inside its own vcvtph2ps intrinsic (an undefined pass-through operand).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/x86/lora_simd.h"

namespace tessera::kernels::avx2 {
namespace {
struct Isa {
  using V = __m256;
  static constexpr int kWidth = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V loadf(const float* p) { return _mm256_loadu_ps(p); }
  static V loadh(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static void storef(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V set1(float x) { return _mm256_set1_ps(x); }
};
}  // namespace

#include "kernels/x86/lora_simd_impl.h"

}  // namespace tessera::kernels::avx2
