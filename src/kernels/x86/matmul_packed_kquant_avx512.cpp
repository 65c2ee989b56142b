// AVX-512 VNNI kernel for the K-quants (Q4_K, Q5_K, Q6_K) over the packed layout of matmul_pack.h:
// m = 1 (decode) and m > 1 (prefill, batched decode) alike, the K-quant twin of
// x86/matmul_packed_avx512.cpp.
//
// Lane r of every vector is weight row r of a 16-row group. Per super-block and activation row the
// canonical sums of matmul_canon.h, exact in int32:
//   the sub-block dot in two chains of vpdpbusd (unsigned weights against broadcast activation
//   dwords), s0 over the even weight vectors and s1 over the odd ones;
//   isum += s * sc_j: Q4_K and Q6_K keep each chain inside int16 (Q4_K: 16 weights of 0..15
//     against |x| <= 127, <= 30,480; Q6_K: 8 weights of q - 32 in -32..31, <= 32,512), so one
//     vpdpwssd of the chain's low word against (sc_j, 0) applies the scale: 2 vector ops per
//     sub-block and row instead of add + vpmulld (2 ops) + add. Q5_K's 16 weights of 0..31 can
//     reach 62,992, so it adds the chains and uses vpmulld;
//   Q4_K/Q5_K: msum = sum_j mn_j * bsum32_j: one vpdpwssd per two sub-blocks of the int16 pair
//     (mn_2k, mn_2k+1) against the activation's per-32 sums (bsum32_2k, bsum32_2k+1);
//   Q6_K: the -32 offset rides in the chains, each starting at -32 times the sum of its 8
//     activations (a broadcast from a per-call table), so it costs no vector op;
// then y = fma(float(isum), d * dx, y) and y = fma(-float(msum), dmin * dx, y) for 16 outputs at
// once, bit for bit the scalar twin's (matmul_ref.cpp) float steps.
//
// Loop nest: groups of 16 weight rows > tiles of R activation rows (y[R] in registers over the
// whole K walk) > super-blocks > sub-blocks (each sub-block's weights unpacked once per tile).
// Q4_K batches of 8..127 rows take wide tiles instead (q4k_tile below): 16 rows, one chain per
// sub-block and row, the offset of the centred weights folded into the chain starts.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "kernels/matmul_canon.h"
#include "kernels/matmul_pack.h"
#include "kernels/quant_blocks.h"
#include "kernels/x86/packed_groups.h"
#include "kernels/x86/packed_prefetch.h"

namespace tessera::kernels::avx512 {
namespace {

constexpr int kTileRows = 8;            // y[8] + isum[8] + 8 weight vectors + temporaries < 32 zmm
// Software prefetch of the weight stream, in two reaches. Far (m > 1): every tile of a group
// fetches its share of the next group's records into L2 (NextGroup, packed_prefetch.h). Near: the
// first tile also pulls kNearRecords records ahead into L1 (without it Q4_K 4864->896 at m = 1 from
// DRAM fell 80 -> 68 GOP per CPU second). Q6_K too since its records are 3.4 KB (6-bit weights):
// Qwen2.5-Coder-1.5B's batch-1 step, logits (Q6_K, 151,936 rows) 10.3 -> 7.1-7.4 ms and ffn_down
// 13.6 -> 10.6-11.1 ms on a quiet Emerald Rapids host (the 4.4 KB one-byte records had measured
// 250 -> 244 at m = 16 with it).
constexpr size_t kNearRecords = 2;

// Everything a tile reads besides MatmulArgs, built once per call and thread from the activations.
// Q4_K/Q5_K: the per-32 sums as int16 pairs, bsum32[i][b * 4 + k] = (bsum32_{2k}, bsum32_{2k+1})
// of super-block b (|bsum32| <= 32 * 127 fits). Q6_K: -32 times the sum of each chain's 8
// activations (chain 0: x[0..3] + x[8..11] of a 16-sub-block, chain 1: x[4..7] + x[12..15]),
// laid out tile by tile so that a tile's walk over K reads one contiguous run (a [cols / 16][m]
// transpose put 4 KB between a tile's consecutive reads at m = 512 and lost ~20% to L1 set
// conflicts): neg32_chains[((i / 8 * cols / 16 + b * 16 + j) * 8 + i % 8) * 2 + c] (8 = kTileRows).
struct KArgs {
  const MatmulArgs* a;
  const int32_t* bsum32;        // [m][cols / 64] dwords (Q4_K, Q5_K)
  const int32_t* neg32_chains;  // [ceil(m / 8)][cols / 16][8][2] (Q6_K)
  const int32_t* q4_tiles;      // Q4TileLayout per tile and super-block (Q4_K)
};

inline __m512i bcast(const void* p) { return _mm512_set1_epi32(*static_cast<const int32_t*>(p)); }

// Two consecutive 16-byte rows of a record's unsigned bytes (sub-blocks 2k and 2k + 1 of the 16
// weight rows: scales or mins) as int16 pairs (row 2k in the low word), vpdpwssd's operand.
inline __m512i byte_row_pairs(const uint8_t* p) {
  const auto* v = reinterpret_cast<const __m128i*>(p);
  return _mm512_or_si512(_mm512_cvtepu8_epi32(_mm_loadu_si128(v)),
                         _mm512_slli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(v + 1)), 16));
}

// One Q6_K sub-block's 3 packed vectors (matmul_pack.h) -> its 4 vectors of 6-bit weights.
// Vector 3 gathers bits 6-7 of each: v0's into bits 0-1, v1's into 2-3, v2's into 4-5. The
// 16-bit shifts carry the next byte's low bits into bits 6-7 (or 4-7), which the bit-selects and
// the final AND drop; v2 is masked to its bits 6-7 first so its shift leaves bits 6-7 clear.
inline void unpack_q6_subblock(const uint8_t* q, __m512i w[4]) {
  const __m512i v0 = _mm512_loadu_si512(q), v1 = _mm512_loadu_si512(q + 64), v2 = _mm512_loadu_si512(q + 128);
  const __m512i low6 = _mm512_set1_epi8(0x3F);
  w[0] = _mm512_and_si512(v0, low6);
  w[1] = _mm512_and_si512(v1, low6);
  w[2] = _mm512_and_si512(v2, low6);
  // ternlog 0xE4 = C ? A : B bitwise (A = first, B = second, C = third operand).
  const __m512i b01 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(v0, 6), _mm512_srli_epi16(v1, 4), _mm512_set1_epi8(0x03), 0xE4);
  const __m512i hi2 = _mm512_srli_epi16(_mm512_andnot_si512(low6, v2), 2);
  w[3] = _mm512_ternarylogic_epi32(b01, hi2, _mm512_set1_epi8(0x0F), 0xE4);
}

template <DType T, int R>
void group_tile(const KArgs& k, const uint8_t* group, int64_t nb, int64_t i0, float* y_base, __mmask16 store,
                bool first_tile, NextGroup next) {
  using L = PackedKLayout<T>;
  const MatmulArgs& a = *k.a;
  __m512 y[R];
  for (int j = 0; j < R; ++j) y[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* rec = group + static_cast<size_t>(b) * L::kBytes;
    // The first tile of a group reads the records from L2 (the previous group's tiles fetched them);
    // later tiles re-read them from L1/L2.
    if (first_tile) {
      for (size_t line = 0; line < L::kBytes; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(rec + kNearRecords * L::kBytes + line), _MM_HINT_T0);
      }
    }
    next.fetch(b, L::kBytes);
    const int8_t* xb = a.xq + i0 * a.cols + b * kQkK;  // row i0's super-block b
    __m512i isum[R];
    for (int j = 0; j < R; ++j) isum[j] = _mm512_setzero_si512();
    if constexpr (L::kQ6) {
      for (int sb = 0; sb < 16; ++sb) {  // sub-blocks of 16: 4 weight vectors each
        const int32_t* neg32 = k.neg32_chains + ((i0 / kTileRows * (a.cols / 16) + b * 16 + sb) * kTileRows) * 2;
        __m512i w[4];
        unpack_q6_subblock(rec + 192 * sb, w);
        // (sc_j, 0) as int16 pairs: the signed scale in the low word, a zero high word.
        const __m512i sc = _mm512_and_si512(
            _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + L::kScAt + 16 * sb))),
            _mm512_set1_epi32(0xFFFF));
        for (int j = 0; j < R; ++j) {
          const int8_t* x = xb + j * a.cols + 16 * sb;
          // Each chain starts at -32 times the sum of its activations, so it holds the dot of the
          // signed weights q - 32 (in int16) and the offset needs no step of its own.
          __m512i s0 = _mm512_dpbusd_epi32(bcast(neg32 + 2 * j), w[0], bcast(x));
          __m512i s1 = _mm512_dpbusd_epi32(bcast(neg32 + 2 * j + 1), w[1], bcast(x + 4));
          s0 = _mm512_dpbusd_epi32(s0, w[2], bcast(x + 8));
          s1 = _mm512_dpbusd_epi32(s1, w[3], bcast(x + 12));
          isum[j] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(isum[j], s0, sc), s1, sc);
        }
      }
    } else {
      const __m512i low4 = _mm512_set1_epi8(0x0F);
      for (int sb = 0; sb < 8; ++sb) {  // sub-blocks of 32: 8 weight vectors each
        __m512i w[8];
        for (int v = 0; v < 8; ++v) {
          const __m512i raw = _mm512_loadu_si512(rec + 512 * (sb / 2) + 64 * v);
          w[v] = _mm512_and_si512(sb % 2 == 0 ? raw : _mm512_srli_epi16(raw, 4), low4);
          if constexpr (L::kQ5) {
            __mmask64 fifth;
            __builtin_memcpy(&fifth, rec + L::kQhAt + 64 * sb + 8 * v, 8);
            w[v] = _mm512_or_si512(w[v], _mm512_maskz_mov_epi8(fifth, _mm512_set1_epi8(0x10)));
          }
        }
        const __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + L::kScAt + 16 * sb)));
        for (int j = 0; j < R; ++j) {
          const int8_t* x = xb + j * a.cols + 32 * sb;
          __m512i s0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[0], bcast(x));
          __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[1], bcast(x + 4));
          s0 = _mm512_dpbusd_epi32(s0, w[2], bcast(x + 8));
          s1 = _mm512_dpbusd_epi32(s1, w[3], bcast(x + 12));
          s0 = _mm512_dpbusd_epi32(s0, w[4], bcast(x + 16));
          s1 = _mm512_dpbusd_epi32(s1, w[5], bcast(x + 20));
          s0 = _mm512_dpbusd_epi32(s0, w[6], bcast(x + 24));
          s1 = _mm512_dpbusd_epi32(s1, w[7], bcast(x + 28));
          if constexpr (L::kQ5) {
            isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(_mm512_add_epi32(s0, s1), sc));
          } else {
            // sc is (sc_j, 0) as int16 pairs (unsigned bytes widened), each chain fits int16.
            isum[j] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(isum[j], s0, sc), s1, sc);
          }
        }
      }
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + L::kDAt)));
    __m512 dx[R];
    for (int j = 0; j < R; ++j) {
      dx[j] = _mm512_set1_ps(a.xd[(i0 + j) * nb + b]);
      y[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]), _mm512_mul_ps(d, dx[j]), y[j]);
    }
    if constexpr (!L::kQ6) {
      // isum is spent: its registers hold msum now.
      for (int j = 0; j < R; ++j) isum[j] = _mm512_setzero_si512();
      for (int k2 = 0; k2 < 4; ++k2) {  // pairs of sub-blocks
        const __m512i pair = byte_row_pairs(rec + L::kMnAt + 32 * k2);
        for (int j = 0; j < R; ++j) {
          isum[j] = _mm512_dpwssd_epi32(isum[j], pair, bcast(k.bsum32 + (i0 + j) * (a.cols / 64) + b * 4 + k2));
        }
      }
      const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + L::kDminAt)));
      for (int j = 0; j < R; ++j) {
        y[j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(isum[j]), _mm512_mul_ps(dmin, dx[j]), y[j]);
      }
    }
  }
  for (int j = 0; j < R; ++j) _mm512_mask_storeu_ps(y_base + (i0 + j) * a.rows, store, y[j]);
}

// Q4_K, tiles of up to kQ4TileRows activation rows. One chain per sub-block and row: it starts at
// -8 times the sub-block's activation sum, so it ends at the dot of the centred weights q - 8
// (-8..7) against |x| <= 127: |.| <= 32 * 8 * 127 = 32,512 fits int16, and one vpdpwssd against
// (sc_j, 0) applies the scale (the two-chain tile above spends two). The offset comes back once
// per super-block and row: isum starts at 8 * sum_j sc_j * bsum32_j, 4 vpdpwssd of (8 sc_2k,
// 8 sc_2k+1) against the activation's (bsum32_2k, bsum32_2k+1) (8 * 63 and 32 * 127 fit int16).
// isum is the scalar twin's exact integer, so the float steps give its bits. A tile of 16 rows
// unpacks each sub-block's weights once at m = 16 (the two-chain tile: twice); y lives in a stack
// buffer, isum[16] in registers (rows expanded over constant indices, chains of 8 rows interleaved).
constexpr int kQ4TileRows = 16;
constexpr int kQ4ChunkRows = 8;
// The wide tiles run for batches of kQ4MinRows to kQ4MaxRows rows (batched decode, speculative
// verification); the two-chain tile keeps the rest. Below 8 rows the per-call tile table (16 rows'
// worth per super-block, per thread) costs more than the scale steps save (8960->1536 at m = 1:
// 120 -> 81 GOP/s; m = 2, 4: -10%; measured while the table was still zeroed on every call). From 128 rows (prefill chunks) it measured within -5..+3%
// of the two-chain tile, -5% on 4864->896 (its table outgrows L2). bench/LOG.md has the table.
constexpr int64_t kQ4MinRows = 8, kQ4MaxRows = 127;

// Everything a Q4_K tile reads of the activations, tile by tile so that every address in a tile's
// walk is one pointer plus a constant: per tile of 16 rows and super-block, 8 x [16 rows][32 bytes]
// of x (sub-blocks 0..7), [8][16] int32 chain starts (-8 * bsum32_j), [4][16] int32 pairs
// (bsum32_2k, bsum32_2k+1).
struct Q4TileLayout {
  static constexpr size_t kRows = kQ4TileRows;
  static constexpr size_t kX = 0, kNeg8 = 8 * kRows * 32, kPairs = kNeg8 + 8 * kRows * 4;
  static constexpr size_t kBytes = kPairs + 4 * kRows * 4;  // per tile and super-block: 4,864
};

template <int R>
void q4k_tile(const KArgs& k, const uint8_t* group, int64_t nb, int64_t i0, float* y_base, __mmask16 store,
              bool first_tile, NextGroup next) {
  using L = PackedKLayout<DType::Q4_K>;
  using T = Q4TileLayout;
  const MatmulArgs& a = *k.a;
  alignas(64) float ybuf[R][16] = {};
  const auto* tile = reinterpret_cast<const uint8_t*>(k.q4_tiles) + static_cast<size_t>(i0 / kQ4TileRows * nb) * T::kBytes;
  constexpr int C = R < kQ4ChunkRows ? R : kQ4ChunkRows;
  for (int64_t b = 0; b < nb; ++b, tile += T::kBytes) {
    const uint8_t* rec = group + static_cast<size_t>(b) * L::kBytes;
    if (first_tile) {
      for (size_t line = 0; line < L::kBytes; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(rec + kNearRecords * L::kBytes + line), _MM_HINT_T0);
      }
    }
    next.fetch(b, L::kBytes);
    const uint8_t* pairs = tile + T::kPairs;
    __m512i isum[R];
    [&]<int... J>(std::integer_sequence<int, J...>) {
      __m512i sc8[4];  // (8 sc_2k, 8 sc_2k+1) as int16 pairs
      for (int k2 = 0; k2 < 4; ++k2) {
        sc8[k2] = _mm512_slli_epi16(byte_row_pairs(rec + L::kScAt + 32 * k2), 3);
      }
      ((isum[J] = _mm512_dpwssd_epi32(_mm512_setzero_si512(), sc8[0], bcast(pairs + 4 * J))), ...);
      for (int k2 = 1; k2 < 4; ++k2) {
        ((isum[J] = _mm512_dpwssd_epi32(isum[J], sc8[k2], bcast(pairs + 4 * (k2 * T::kRows + J)))), ...);
      }
    }(std::make_integer_sequence<int, R>{});
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    for (int sb = 0; sb < 8; ++sb) {
      const uint8_t* x = tile + T::kX + 32 * T::kRows * sb;
      const uint8_t* neg8 = tile + T::kNeg8 + 4 * T::kRows * sb;
      __m512i w[8];
      for (int v = 0; v < 8; ++v) {
        const __m512i raw = _mm512_loadu_si512(rec + 512 * (sb / 2) + 64 * v);
        w[v] = _mm512_and_si512(sb % 2 == 0 ? raw : _mm512_srli_epi16(raw, 4), low4);
      }
      // (sc_j, 0) as int16 pairs: unsigned bytes widened.
      const __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + L::kScAt + 16 * sb)));
      auto chunk = [&]<int J0, int... J>(std::integral_constant<int, J0>, std::integer_sequence<int, J...>) {
        __m512i s[sizeof...(J)];
        ((s[J] = bcast(neg8 + 4 * (J0 + J))), ...);
        for (int v = 0; v < 8; ++v) {
          ((s[J] = _mm512_dpbusd_epi32(s[J], w[v], bcast(x + 32 * (J0 + J) + 4 * v))), ...);
        }
        ((isum[J0 + J] = _mm512_dpwssd_epi32(isum[J0 + J], s[J], sc)), ...);
      };
      [&]<int... K>(std::integer_sequence<int, K...>) {
        (chunk(std::integral_constant<int, K * C>{}, std::make_integer_sequence<int, C>{}), ...);
      }(std::make_integer_sequence<int, R / C>{});
      if constexpr (R % C != 0) {
        chunk(std::integral_constant<int, R / C * C>{}, std::make_integer_sequence<int, R % C>{});
      }
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + L::kDAt)));
    const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + L::kDminAt)));
    __m512i mn[4];  // (mn_2k, mn_2k+1) as int16 pairs
    for (int k2 = 0; k2 < 4; ++k2) mn[k2] = byte_row_pairs(rec + L::kMnAt + 32 * k2);
    [&]<int... J>(std::integer_sequence<int, J...>) {
      auto row = [&](int j, __m512i is) {
        const __m512 dx = _mm512_set1_ps(a.xd[(i0 + j) * nb + b]);
        __m512i msum = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mn[0], bcast(pairs + 4 * j));
        for (int k2 = 1; k2 < 4; ++k2) msum = _mm512_dpwssd_epi32(msum, mn[k2], bcast(pairs + 4 * (k2 * T::kRows + j)));
        __m512 y = _mm512_load_ps(ybuf[j]);
        y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(d, dx), y);
        y = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, dx), y);
        _mm512_store_ps(ybuf[j], y);
      };
      (row(J, isum[J]), ...);
    }(std::make_integer_sequence<int, R>{});
  }
  for (int j = 0; j < R; ++j) _mm512_mask_storeu_ps(y_base + (i0 + j) * a.rows, store, _mm512_load_ps(ybuf[j]));
}

using Q4TileFn = void (*)(const KArgs&, const uint8_t*, int64_t, int64_t, float*, __mmask16, bool, NextGroup);

template <int... Rs>
constexpr std::array<Q4TileFn, sizeof...(Rs)> q4k_tiles(std::integer_sequence<int, Rs...>) {
  return {&q4k_tile<Rs + 1>...};
}
// q4k_tile<r + 1> at index r.
constexpr auto kQ4Tiles = q4k_tiles(std::make_integer_sequence<int, kQ4TileRows>{});

void packed_q4k(const KArgs& k, int64_t r_begin, int64_t r_end) {
  const MatmulArgs& a = *k.a;
  const int64_t nb = a.cols / kQkK;
  const size_t group_bytes = static_cast<size_t>(nb) * PackedKLayout<DType::Q4_K>::kBytes;
  for_each_packed_group(a, group_bytes, r_begin, r_end, [&](int64_t g, const uint8_t* group, float* y_base, __mmask16 store) {
    const int tiles = static_cast<int>((a.m + kQ4TileRows - 1) / kQ4TileRows);
    NextGroup next = next_group(group, group_bytes, g, r_end, kPackRows, a.m > 1 ? tiles : 0);
    for (int64_t i0 = 0; i0 < a.m; i0 += kQ4TileRows, ++next.index) {
      const int64_t rows = std::min<int64_t>(kQ4TileRows, a.m - i0);
      kQ4Tiles[rows - 1](k, group, nb, i0, y_base, store, i0 == 0, next);
    }
  });
}

template <DType T>
void packed(const KArgs& k, int64_t r_begin, int64_t r_end) {
  const MatmulArgs& a = *k.a;
  const int64_t nb = a.cols / kQkK;
  const size_t group_bytes = static_cast<size_t>(nb) * PackedKLayout<T>::kBytes;
  for_each_packed_group(a, group_bytes, r_begin, r_end, [&](int64_t g, const uint8_t* group, float* y_base, __mmask16 store) {
    const int tiles = static_cast<int>((a.m + kTileRows - 1) / kTileRows);
    // m = 1 (decode: a read of the weights) keeps the near prefetch and the hardware's alone: the
    // far one measured -5..+15% there, within the noise (packed_prefetch.h).
    NextGroup next = next_group(group, group_bytes, g, r_end, kPackRows, a.m > 1 ? tiles : 0);
    int64_t i0 = 0;
    for (; i0 + kTileRows <= a.m; i0 += kTileRows, ++next.index) {
      group_tile<T, kTileRows>(k, group, nb, i0, y_base, store, i0 == 0, next);
    }
    // The tail in one tile of exactly its rows (every tile unpacks the records again).
    const bool first = i0 == 0;
    switch (a.m - i0) {
      case 7: group_tile<T, 7>(k, group, nb, i0, y_base, store, first, next); break;
      case 6: group_tile<T, 6>(k, group, nb, i0, y_base, store, first, next); break;
      case 5: group_tile<T, 5>(k, group, nb, i0, y_base, store, first, next); break;
      case 4: group_tile<T, 4>(k, group, nb, i0, y_base, store, first, next); break;
      case 3: group_tile<T, 3>(k, group, nb, i0, y_base, store, first, next); break;
      case 2: group_tile<T, 2>(k, group, nb, i0, y_base, store, first, next); break;
      case 1: group_tile<T, 1>(k, group, nb, i0, y_base, store, first, next); break;
      default: break;
    }
  });
}

// Q6_K's chain starts (KArgs::neg32_chains): -32 * the sum of each chain's 8 activations, exact
// (|32 * 8 * 127| < 2^15), built once per call and thread.
const int32_t* neg32_chains(const MatmulArgs& a) {
  thread_local DerivedTable table;
  const int64_t per_row = a.cols / 16;
  const int64_t tiles = (a.m + kTileRows - 1) / kTileRows;
  return table.get(a, a.cols, static_cast<size_t>(tiles * per_row * kTileRows * 2), [&](int32_t* t) {
    // One vpdpbusd of ones against 64 activations gives the 16 dword sums (x[4d..4d+3]); chain 0
    // of a 16-sub-block is dwords 0 + 2, chain 1 dwords 1 + 3 (cols is a multiple of 256).
    const __m512i ones = _mm512_set1_epi8(1);
    alignas(64) int32_t dw[16];
    for (int64_t i = 0; i < a.m; ++i) {
      const int8_t* x = a.xq + i * a.cols;
      for (int64_t c = 0; c < per_row; c += 4, x += 64) {
        _mm512_store_si512(dw, _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, _mm512_loadu_si512(x)));
        for (int g = 0; g < 4; ++g) {
          int32_t* at = t + ((i / kTileRows * per_row + c + g) * kTileRows + i % kTileRows) * 2;
          at[0] = -32 * (dw[4 * g] + dw[4 * g + 2]);
          at[1] = -32 * (dw[4 * g + 1] + dw[4 * g + 3]);
        }
      }
    }
  });
}

// Q4_K's tile table (Q4TileLayout), built once per call and thread.
const int32_t* q4_tiles(const MatmulArgs& a) {
  using T = Q4TileLayout;
  thread_local DerivedTable table;
  const int64_t nb = a.cols / kQkK, tiles = (a.m + kQ4TileRows - 1) / kQ4TileRows;
  return table.get(a, a.cols, static_cast<size_t>(tiles * nb) * T::kBytes / 4, [&](int32_t* t) {
    // Row i's part of every super-block; the last tile's rows past m stay unwritten (a tile of R
    // rows reads rows < R only).
    for (int64_t i = 0; i < a.m; ++i) {
      const int64_t j = i % kQ4TileRows;
      for (int64_t b = 0; b < nb; ++b) {
        auto* at = reinterpret_cast<uint8_t*>(t) + static_cast<size_t>(i / kQ4TileRows * nb + b) * T::kBytes;
        auto* neg8 = reinterpret_cast<int32_t*>(at + T::kNeg8);
        auto* pairs = reinterpret_cast<uint32_t*>(at + T::kPairs);
        const int8_t* x = a.xq + i * a.cols + b * kQkK;
        const int32_t* s16 = a.xbsums + i * (a.cols / 16) + b * 16;
        int32_t s32[8];
        for (int sb = 0; sb < 8; ++sb) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(at + T::kX + 32 * (T::kRows * sb + j)),
                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32 * sb)));
          s32[sb] = s16[2 * sb] + s16[2 * sb + 1];
          neg8[sb * T::kRows + j] = -8 * s32[sb];
        }
        for (int k2 = 0; k2 < 4; ++k2) {
          pairs[k2 * T::kRows + j] = static_cast<uint32_t>(static_cast<uint16_t>(s32[2 * k2])) |
                                     (static_cast<uint32_t>(static_cast<uint16_t>(s32[2 * k2 + 1])) << 16);
        }
      }
    }
  });
}

}  // namespace

bool packed_kquant_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
  if (a.packed == nullptr || !is_kquant(a.type)) return false;
  const bool q6 = a.type == DType::Q6_K;
  const bool q4_wide = a.type == DType::Q4_K && a.m >= kQ4MinRows && a.m <= kQ4MaxRows;
  const KArgs k{&a, q6 || q4_wide ? nullptr : bsum32_pairs(a), q6 ? neg32_chains(a) : nullptr,
                q4_wide ? q4_tiles(a) : nullptr};
  switch (a.type) {
    case DType::Q4_K: q4_wide ? packed_q4k(k, r_begin, r_end) : packed<DType::Q4_K>(k, r_begin, r_end); break;
    case DType::Q5_K: packed<DType::Q5_K>(k, r_begin, r_end); break;
    default: packed<DType::Q6_K>(k, r_begin, r_end); break;
  }
  return true;
}

}  // namespace tessera::kernels::avx512
