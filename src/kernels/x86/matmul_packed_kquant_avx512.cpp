// AVX-512 VNNI kernel for the K-quants (Q4_K, Q5_K, Q6_K) over the packed layout of matmul_pack.h:
// m = 1 (decode) and m > 1 (prefill, batched decode) alike, the K-quant twin of
// x86/matmul_packed_avx512.cpp.
//
// Lane r of every vector is weight row r of a 16-row group. Per super-block and activation row the
// canonical sums of matmul_canon.h, exact in int32:
//   dot_j  = 8 (Q6_K: 4) vpdpbusd of the unsigned weights against broadcast activation dwords;
//   isum  += dot_j * sc_j (vpmulld, lane r = row r's sub-block scale);
//   Q4_K/Q5_K: msum = sum_j mn_j * (bsum_{2j} + bsum_{2j+1}): one vpdpwssd per sub-block of the
//     int16 pair (mn_j, mn_j) against the activation's int16 pair (bsum_{2j}, bsum_{2j+1});
//   Q6_K: the -32 offset rides in the sub-block's chain, which starts at -32 * bsum_j (a broadcast
//     from a per-call table), so isum += (dot_j - 32 bsum_j) * sc_j costs no extra vector op;
// then y = fma(float(isum), d * dx, y) and y = fma(-float(msum), dmin * dx, y) for 16 outputs at
// once, bit for bit the scalar twin's (matmul_ref.cpp) float steps.
//
// Loop nest: groups of 16 weight rows > tiles of R activation rows (y[R] in registers over the
// whole K walk) > super-blocks > sub-blocks (each sub-block's weights unpacked once per tile).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "kernels/matmul_canon.h"
#include "kernels/matmul_pack.h"
#include "kernels/quant_blocks.h"
#include "kernels/x86/packed_kquant_tables.h"
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

// Everything a tile reads besides MatmulArgs: the activations' per-16 sums as int16 pairs,
// bsum16[i][b * 8 + k] = (bsum_{2k}, bsum_{2k+1}) of super-block b (|bsum| <= 16 * 127 fits).
// Q6_K: -32 * bsum per 16 activations, transposed so that a tile's rows sit side by side:
// neg32_bsums[(b * 16 + j) * m + i] for sub-block j of super-block b of row i.
struct KArgs {
  const MatmulArgs* a;
  const int32_t* bsum16;       // [m][cols / 32] dwords (Q4_K, Q5_K)
  const int32_t* neg32_bsums;  // [cols / 16][m] (Q6_K)
};

inline __m512i bcast(const void* p) { return _mm512_set1_epi32(*static_cast<const int32_t*>(p)); }

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
        const int32_t* neg32 = k.neg32_bsums + (b * 16 + sb) * a.m + i0;  // rows i0.. of sub-block sb
        __m512i w[4];
        unpack_q6_subblock(rec + 192 * sb, w);
        const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + L::kScAt + 16 * sb)));
        for (int j = 0; j < R; ++j) {
          const int8_t* x = xb + j * a.cols + 16 * sb;
          // The chain starts at -32 * sum(x) of the sub-block, so the scale multiplies the dot of
          // the signed weights q - 32 and the offset needs no step of its own.
          __m512i s0 = _mm512_dpbusd_epi32(bcast(neg32 + j), w[0], bcast(x));
          __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[1], bcast(x + 4));
          s0 = _mm512_dpbusd_epi32(s0, w[2], bcast(x + 8));
          s1 = _mm512_dpbusd_epi32(s1, w[3], bcast(x + 12));
          isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(_mm512_add_epi32(s0, s1), sc));
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
          isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(_mm512_add_epi32(s0, s1), sc));
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
      for (int sb = 0; sb < 8; ++sb) {
        const __m512i mn = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + L::kMnAt + 16 * sb)));
        const __m512i pair = _mm512_or_si512(mn, _mm512_slli_epi32(mn, 16));  // (mn, mn) as int16
        for (int j = 0; j < R; ++j) {
          isum[j] = _mm512_dpwssd_epi32(isum[j], pair, bcast(k.bsum16 + (i0 + j) * (a.cols / 32) + b * 8 + sb));
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

template <DType T>
void packed(const KArgs& k, int64_t r_begin, int64_t r_end) {
  const MatmulArgs& a = *k.a;
  const int64_t nb = a.cols / kQkK;
  const size_t group_bytes = static_cast<size_t>(nb) * PackedKLayout<T>::kBytes;
  for (int64_t g = r_begin / kPackRows; g * kPackRows < r_end; ++g) {
    const int64_t lo = std::max(r_begin, g * kPackRows) - g * kPackRows;
    const int64_t hi = std::min(r_end, (g + 1) * kPackRows) - g * kPackRows;
    const auto store = static_cast<__mmask16>(((1u << hi) - 1u) & ~((1u << lo) - 1u));
    const uint8_t* group = a.packed + static_cast<size_t>(g) * group_bytes;
    float* y_base = a.y + g * kPackRows;
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
  }
}

// -32 * a.xbsums (Q6_K's weight offset times the activation's per-16 sums, exact:
// |32 * 16 * 127| < 2^17), transposed to [cols / 16][m], built once per call and thread.
const int32_t* neg32_bsums(const MatmulArgs& a) {
  thread_local DerivedTable table;
  const int64_t per_row = a.cols / 16;
  return table.get(a, a.cols, static_cast<size_t>(a.m * per_row), [&](int32_t* t) {
    for (int64_t i = 0; i < a.m; ++i) {
      for (int64_t c = 0; c < per_row; ++c) t[c * a.m + i] = -32 * a.xbsums[i * per_row + c];
    }
  });
}

}  // namespace

bool packed_kquant_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
  if (a.packed == nullptr || !is_kquant(a.type)) return false;
  const bool q6 = a.type == DType::Q6_K;
  const KArgs k{&a, q6 ? nullptr : bsum16_pairs(a), q6 ? neg32_bsums(a) : nullptr};
  switch (a.type) {
    case DType::Q4_K: packed<DType::Q4_K>(k, r_begin, r_end); break;
    case DType::Q5_K: packed<DType::Q5_K>(k, r_begin, r_end); break;
    default: packed<DType::Q6_K>(k, r_begin, r_end); break;
  }
  return true;
}

}  // namespace tessera::kernels::avx512
