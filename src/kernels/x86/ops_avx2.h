// Internal: AVX2+FMA versions of the ops in kernels/ops.h (x86/ops_avx2.cpp). Reached only through
// the dispatch in ops.cpp, and only when isa_level() >= kAvx2.
#pragma once
#include <cstdint>

#include "kernels/ops.h"

namespace tessera::kernels::avx2 {

void rmsnorm(const float* x, const float* weight, float eps, float* out, int64_t n,
             int64_t num_rows);
void swiglu(const float* gate, const float* up, float* out, int64_t n);
void add_inplace(float* x, const float* y, int64_t n);
void scale(float* x, float s, int64_t n);
void softmax(float* x, int64_t n);
void fp32_to_fp16_row(const float* x, uint16_t* out, int64_t n);
LogitsScan scan_logits(const float* row, int64_t n);

}  // namespace tessera::kernels::avx2
