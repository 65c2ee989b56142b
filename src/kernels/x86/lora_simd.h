// Internal: the AVX2 and AVX-512 loops of kernels/lora.h (x86/lora_avx2.cpp, x86/lora_avx512.cpp,
// one template, x86/lora_simd_impl.h). Reached only through lora.cpp's dispatch on isa_level().
// Weights f32 or f16 (half = true: IEEE half bits, widened in registers with F16C).
#pragma once
#include <cstdint>

namespace tessera::kernels {

#define TESSERA_LORA_SIMD_DECLS                                                                              \
  /* out[r] = scale * dot16(a, xs[r]) for nb <= 4 rows (lora.h's order) */                                 \
  void lora_shrink_rows(const void* a, bool half, const float* const* xs, int64_t nb, int64_t n_in, float scale, \
                        float* out);                                                                         \
  /* ys[r][o] = fma(us[r][j], bt[j][o0 + o], ys[r][o]) for j ascending, o in [0, len), nb <= 4 rows */      \
  void lora_expand_rows(const float* const* us, int64_t nb, const void* bt, bool half, int64_t n_out, int64_t o0, \
                        int64_t len, int32_t rank, float* const* ys);

namespace avx2 {
TESSERA_LORA_SIMD_DECLS
}  // namespace avx2
namespace avx512 {
TESSERA_LORA_SIMD_DECLS
}  // namespace avx512

#undef TESSERA_LORA_SIMD_DECLS

}  // namespace tessera::kernels
