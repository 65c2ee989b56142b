// Internal: the per-call activation table the packed K-quant kernels share (the AVX-512 VNNI one,
// x86/matmul_packed_kquant_avx512.cpp, and the Q4_K/Q5_K AMX one, x86/matmul_packed_kquant_amx.cpp;
// both compile with AVX-512).
#pragma once
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/matmul_canon.h"

namespace tessera::kernels {

// a.xbsums (int32 per 16 activations) as int16 pairs, bsum16[i][b * 8 + k] = (bsum_{2k},
// bsum_{2k+1}) of super-block b of row i (|bsum| <= 16 * 127 fits), the operand of the vpdpwssd
// steps: Q4_K/Q5_K's mins against (mn_k, mn_k), Q6_K's offset against (sc_{2k}, sc_{2k+1}).
// [m][cols / 32] dwords, built once per call and thread (the row pieces of one call share it).
inline const int32_t* bsum16_pairs(const MatmulArgs& a) {
  thread_local DerivedTable table;
  const size_t n = static_cast<size_t>(a.m * (a.cols / 16));
  return table.get(a, a.cols, (n + 1) / 2, [&](int32_t* t) {
    auto* buf = reinterpret_cast<int16_t*>(t);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(buf + i), _mm512_cvtepi32_epi16(_mm512_loadu_si512(a.xbsums + i)));
    }
    for (; i < n; ++i) buf[i] = static_cast<int16_t>(a.xbsums[i]);
  });
}

}  // namespace tessera::kernels
