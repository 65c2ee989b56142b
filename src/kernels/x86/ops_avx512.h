// Internal: AVX-512 versions of ops in kernels/ops.h (x86/ops_avx512.cpp). Reached only through the
// dispatch in ops.cpp, and only when isa_level() >= kAvx512.
#pragma once
#include <cstdint>

#include "kernels/ops.h"

namespace tessera::kernels::avx512 {

void swiglu(const float* gate, const float* up, float* out, int64_t n);
LogitsScan scan_logits(const float* row, int64_t n);

}  // namespace tessera::kernels::avx512
