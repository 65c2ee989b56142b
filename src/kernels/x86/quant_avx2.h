// Internal: AVX2/F16C dequantizers (x86/quant_avx2.cpp), reached through quant.cpp's dispatch.
// Each returns false for a type it has no fast path for (the caller then uses the reference).
#pragma once
#include <cstdint>

#include "util/dtype.h"

namespace tessera::kernels::avx2 {

bool dequantize_row(DType type, const void* src, float* dst, int64_t n);

// Same contract and bits as kernels::quantize_activations (matmul_canon.h): blocks of `block`
// (32 or 256) elements; xs and xsum written for 32-blocks, xbsums (per 16) for 256-blocks.
void quantize_activations(const float* x, int64_t num_blocks, int64_t block, int8_t* xq,
                          float* xd, float* xs, int32_t* xsum, int32_t* xbsums);

}  // namespace tessera::kernels::avx2
