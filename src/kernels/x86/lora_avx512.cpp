// kernels/lora.h's loops with AVX-512F (+ F16C widening): a 16-lane group is one zmm register.
// GCC 12 warns inside its own vcvtph2ps intrinsic (an undefined pass-through operand).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/x86/lora_simd.h"

namespace tessera::kernels::avx512 {
namespace {
struct Isa {
  using V = __m512;
  static constexpr int kWidth = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V loadf(const float* p) { return _mm512_loadu_ps(p); }
  static V loadh(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static void storef(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V set1(float x) { return _mm512_set1_ps(x); }
};
}  // namespace

#include "kernels/x86/lora_simd_impl.h"

}  // namespace tessera::kernels::avx512
