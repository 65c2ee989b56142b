// Internal: the far software prefetch of the packed matmul kernels (the AVX-512 VNNI ones,
// x86/matmul_packed_avx512.cpp and x86/matmul_packed_kquant_avx512.cpp, and the AVX2 Q6_K one).
//
// A kernel walks one 16-row group's records once per tile of activation rows (8 rows per tile on
// AVX-512, 4 on AVX2). Only the first tile used to read the records from DRAM, at its own pace, and
// the later tiles read nothing new, so the DRAM stream ran in bursts. With NextGroup every tile of
// group g fetches its share of group g + 1's records into L2 while it walks group g: the stream
// runs at an even pace over the whole group, and the next group's first tile finds its records in
// L2. Qwen2.5-0.5B's shapes at m = 16 from DRAM, one thread (bench_matmul ... cold, GOP per CPU
// second, AVX-512): Q5_0 896->4864 219-241 -> 270, Q8_0 896->151936 184-194 -> 258-262, Q4_K
// 4864->896 207 -> 294, Q6_K 161 -> 250. The AVX2 kernels, compute-bound near 115 GOP/s, gained
// nothing from it (Q4_K lost: 155 -> 108) except Q6_K (124 -> 183), so only that one uses it
// there. At m = 1 the AVX-512 kernels leave it off. Prefetches change no value.
#pragma once
#include <xmmintrin.h>

#include <cstddef>
#include <cstdint>

namespace tessera::kernels {

// Tile `index` of `count` over a group prefetches every count-th 64-byte line of the next group's
// records, starting at line `index`: the group's tiles together fetch the next group once. count 0:
// the calling range ends with this group (its next group is another thread's, or past the matrix).
struct NextGroup {
  const uint8_t* base = nullptr;  // the next group's first record
  int index = 0;
  int count = 0;

  // This tile's share of record b of the next group, records of `record` bytes, into L2.
  inline void fetch(int64_t b, size_t record) const {
    if (count == 0) return;
    const uint8_t* far = base + static_cast<size_t>(b) * record;
    for (size_t line = 64 * static_cast<size_t>(index); line < record; line += 64 * static_cast<size_t>(count)) {
      _mm_prefetch(reinterpret_cast<const char*>(far + line), _MM_HINT_T1);
    }
  }
};

// The NextGroup of a range's group g (its first tile), tiles = tiles per group.
inline NextGroup next_group(const uint8_t* group, size_t group_bytes, int64_t g, int64_t r_end, int64_t pack_rows,
                            int tiles) {
  return NextGroup{group + group_bytes, 0, (g + 1) * pack_rows < r_end ? tiles : 0};
}

}  // namespace tessera::kernels
