// Internal: AVX2 K-quant matmul rows (x86/matmul_kquant_avx2.cpp), called by avx2::matmul_rows.
#pragma once
#include <cstdint>

#include "kernels/matmul_canon.h"

namespace tessera::kernels::avx2 {

// False unless a.type is Q4_K, Q5_K or Q6_K.
bool matmul_rows_kquant(const MatmulArgs& a, int64_t r_begin, int64_t r_end);

}  // namespace tessera::kernels::avx2
