// Dispatch of kernels/quant.h's dequantize_row on util isa_level().
#include "kernels/quant.h"

#include "util/check.h"
#include "util/cpu_features.h"

#if !defined(TESSERA_FORCE_SCALAR)
#include "kernels/x86/quant_avx2.h"
#endif

namespace tessera::kernels {

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
#if !defined(TESSERA_FORCE_SCALAR)
  if (isa_level() >= IsaLevel::kAvx2) {
    TESSERA_CHECK(n >= 0 && n % dtype_block_size(type) == 0, "dequantize_row: bad length {}", n);
    if (avx2::dequantize_row(type, src, dst, n)) return;
  }
#endif
  dequantize_row_ref(type, src, dst, n);
}

}  // namespace tessera::kernels
