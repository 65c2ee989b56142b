// Weight types as GGUF/ggml store them: dequantize every supported type to f32, quantize f32 to
// the simple types. Block layouts are in quant_blocks.h.
//
// `_ref` functions are the scalar definitions; `dequantize_row` dispatches on util isa_level().
// Quantizers round as ggml's reference quantizers do (same scale choice, same rounding), so a file
// written here dequantizes as one written by llama.cpp's reference path would.
#pragma once
#include <cstdint>

#include "util/dtype.h"

namespace tessera::kernels {

// F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K.
bool dtype_supported_for_dequantize(DType type);
// The types quantize_row_ref can write: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1.
bool dtype_supported_for_quantize(DType type);
// The weight types matmul accepts (the dequantizable ones).
bool dtype_supported_for_matmul(DType type);

// dst[n] = the n values stored at src. n is a multiple of the type's block size. Checked.
void dequantize_row_ref(DType type, const void* src, float* dst, int64_t n);
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

// Writes dtype_row_bytes(type, n) bytes at dst. n is a multiple of the type's block size.
void quantize_row_ref(DType type, const float* src, void* dst, int64_t n);

}  // namespace tessera::kernels
