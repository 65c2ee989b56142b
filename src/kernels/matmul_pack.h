// Internal: the repacked layout of 32-block weights read by the AVX-512 and AMX kernels
// (x86/matmul_packed_avx512.cpp, x86/matmul_packed_amx.cpp) and, as two halves of 8 rows per
// 256-bit vector, by the AVX2 kernel (x86/matmul_packed_avx2.cpp). The canonical order (matmul_canon.h) needs, per output row and
// block, one exact int32 dot; with rows interleaved so that lane r of a 512-bit vector holds 4
// consecutive weights of row r, one vpdpbusd with a broadcast activation dword advances 16 outputs
// at once and no horizontal sum is ever needed.
//
// Rows are taken in groups of kPackRows = 16 (the last group zero-padded). A group is a run of
// cols / 32 block records; record (g, b) holds block b of the group's 16 rows, 16 x the GGUF block
// size in bytes:
//   Q4_0, Q4_1, Q5_0, Q5_1: qs[4][16][4]: qs[v][r][t] = byte 4v + t of row r's GGUF qs, i.e. low
//     nibble = element 4v + t, high nibble = element 16 + 4v + t (weights as unsigned 0..15);
//   Q5_0, Q5_1 then qh[8] (uint64): bit 4r + t of qh[2v + h] = the fifth bit of element
//     16h + 4v + t of row r;
//   Q8_0: qs[8][16][4]: qs[q][r][t] = element 4q + t of row r, plus 128 (unsigned);
//   then d[16] (fp16), and for Q4_1, Q5_1 m[16] (fp16).
// Unsigned weights make vpdpbusd (u8 x s8) exact; the offset comes back as an integer:
// dot(q - o, x) = dot(q, x) - o * sum(x), o = 8, 16, 128 for Q4_0, Q5_0, Q8_0.
//
// K-quants (x86/matmul_packed_kquant_avx512.cpp; x86/matmul_packed_kquant_avx2.cpp as two halves
// of 8 rows): record
// (g, b) holds super-block b (256 elements) of the group's 16 rows, sub-block scales unpacked:
//   Q4_K, Q5_K: qs[4][8][16][4]: qs[c][v][r][t] = byte 32c + 4v + t of row r's GGUF qs, i.e. low
//     nibble = element 4v + t of sub-block 2c, high nibble = the same of sub-block 2c + 1;
//     Q5_K then qh[8][8] (uint64): bit 4r + t of qh[j][v] = the fifth bit of element 4v + t of
//     sub-block j of row r; then sc[8][16], mn[8][16] (uint8, 6-bit: sub-block j's scale, min of
//     row r), d[16], dmin[16] (fp16). 2368 (Q5_K 2880) bytes against 16 x 144 (176) in the GGUF.
//   Q6_K: q[16][3][16][4]: sub-block j's 16 elements as 4 vectors u = 0..3 of 4 elements of the
//     16 rows, in 3 bytes per 4 weights: byte q[j][k][r][t] (k < 3) = the 6-bit weight (0..63,
//     value q - 32) of element 16j + 4k + t of row r in bits 0-5, and bits 2k, 2k + 1 of element
//     16j + 12 + t in bits 6-7. The kernels put vectors 0-2 back with one AND each and vector 3
//     with three shifts, two bit-selects and an AND, per sub-block and 16 rows, once for every
//     activation row of a tile. Then sc[16][16] (int8, sub-block j's scale of row r) and d[16]
//     (fp16): 3392 bytes against 16 x 210 (one byte per weight, as before, cost 4416: the m = 1
//     pass read 31% more than the file).
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "util/dtype.h"

namespace tessera::kernels {

inline constexpr int64_t kPackRows = 16;

// Whether `type` has a packed layout (the 32-block types and the K-quants).
bool packable(DType type);
inline bool is_kquant(DType type) { return type == DType::Q4_K || type == DType::Q5_K || type == DType::Q6_K; }
// Where things sit in one K-quant record (see above).
template <DType T>
struct PackedKLayout {
  static constexpr bool kQ6 = T == DType::Q6_K;
  static constexpr bool kQ5 = T == DType::Q5_K;
  static constexpr size_t kQsBytes = kQ6 ? 3072 : 2048;
  static constexpr size_t kQhAt = kQsBytes;                       // Q5_K: qh[8][8] uint64
  static constexpr size_t kScAt = kQsBytes + (kQ5 ? 512 : 0);     // sc[sub-blocks][16]
  static constexpr size_t kMnAt = kScAt + 128;                    // Q4_K/Q5_K: mn[8][16]
  static constexpr size_t kDAt = kScAt + 256;  // d[16] fp16, after sc[16][16] (Q6_K) or sc + mn
  static constexpr size_t kDminAt = kDAt + 32;                    // Q4_K/Q5_K: dmin[16] fp16
  static constexpr size_t kBytes = (kDAt + (kQ6 ? 32 : 64) + 63) / 64 * 64;  // whole cache lines
};
// Integer offset o of the packed unsigned weights (see above).
constexpr int32_t packed_weight_offset(DType type) {
  return type == DType::Q4_0 ? 8 : type == DType::Q5_0 ? 16 : type == DType::Q8_0 ? 128 : 0;
}
// Where things sit in one record of type T (see above), for the kernels.
template <DType T>
struct PackedLayout {
  static constexpr bool kQ8 = T == DType::Q8_0;
  static constexpr bool kQ5 = T == DType::Q5_0 || T == DType::Q5_1;
  static constexpr bool kMin = T == DType::Q4_1 || T == DType::Q5_1;  // has m[16]
  static constexpr int32_t kOffset = packed_weight_offset(T);
  static constexpr size_t kQsBytes = kQ8 ? 512 : 256;               // the weights
  static constexpr size_t kScaleAt = kQsBytes + (kQ5 ? 64 : 0);     // d[16] fp16, then m[16]
};

// Bytes of one record: 16 rows x one block.
size_t packed_record_bytes(DType type);
// Bytes of the packed copy of a [rows][cols] weight.
size_t packed_bytes(DType type, int64_t rows, int64_t cols);
// src: [rows][cols] in GGUF blocks; dst: packed_bytes(type, rows, cols) bytes.
void pack_weights(DType type, const uint8_t* src, int64_t rows, int64_t cols, uint8_t* dst);

// Calls fn(std::integral_constant<DType, T>{}) for the packable type T == type and returns true;
// false for other types. The packed kernels' entry points dispatch through it.
template <typename Fn>
bool with_packed_type(DType type, Fn&& fn) {
  switch (type) {
    case DType::Q4_0: fn(std::integral_constant<DType, DType::Q4_0>{}); return true;
    case DType::Q4_1: fn(std::integral_constant<DType, DType::Q4_1>{}); return true;
    case DType::Q5_0: fn(std::integral_constant<DType, DType::Q5_0>{}); return true;
    case DType::Q5_1: fn(std::integral_constant<DType, DType::Q5_1>{}); return true;
    case DType::Q8_0: fn(std::integral_constant<DType, DType::Q8_0>{}); return true;
    default: return false;
  }
}

}  // namespace tessera::kernels
