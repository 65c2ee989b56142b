// Internal: the walk over the 16-row groups of packed weights that every packed AVX-512 and AMX
// kernel makes (x86/matmul_packed_avx512.cpp, x86/matmul_packed_kquant_avx512.cpp,
// x86/matmul_packed_kquant_amx.cpp, x86/matmul_packed_amx.cpp): which groups cover a range of weight rows, where each starts,
// and which of its 16 output lanes belong to the range.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/matmul_canon.h"
#include "kernels/matmul_pack.h"

namespace tessera::kernels {

// fn(g, group, y_base, store) for each group g that holds rows of [r_begin, r_end): group = its
// records (group_bytes each group), y_base = a.y + 16 g (output row i of the group's lane r at
// y_base[i * a.rows + r]), store = the lanes in the range (a range may start or end inside a group).
template <typename Fn>
inline void for_each_packed_group(const MatmulArgs& a, size_t group_bytes, int64_t r_begin, int64_t r_end, Fn&& fn) {
  for (int64_t g = r_begin / kPackRows; g * kPackRows < r_end; ++g) {
    const int64_t lo = std::max(r_begin, g * kPackRows) - g * kPackRows;
    const int64_t hi = std::min(r_end, (g + 1) * kPackRows) - g * kPackRows;
    const auto store = static_cast<__mmask16>(((1u << hi) - 1u) & ~((1u << lo) - 1u));
    fn(g, a.packed + static_cast<size_t>(g) * group_bytes, a.y + g * kPackRows, store);
  }
}

}  // namespace tessera::kernels
