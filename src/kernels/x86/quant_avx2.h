// Internal: AVX2/F16C dequantizers (x86/quant_avx2.cpp), reached through quant.cpp's dispatch.
// Each returns false for a type it has no fast path for (the caller then uses the reference).
#pragma once
#include <cstdint>

#include "util/dtype.h"

namespace tessera::kernels::avx2 {

bool dequantize_row(DType type, const void* src, float* dst, int64_t n);

}  // namespace tessera::kernels::avx2
