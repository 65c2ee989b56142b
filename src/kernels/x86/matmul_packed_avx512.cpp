// AVX-512 VNNI kernel for the 32-block weight types over the packed layout of matmul_pack.h:
// m = 1 (decode), m > 1 (prefill, batched decode, speculative verification) alike.
//
// Per record (16 weight rows x one 32-block): the 4 (Q8_0: 8) vectors of packed bytes become 8
// vectors of unsigned weights w[q], lane r = elements 4q..4q+3 of row r. For each activation row,
// one chain of 8 vpdpbusd against the broadcast activation dwords gives every row's exact int32
// block dot in its lane; the chain starts at -o * sum(x) (the weight offset o of Q4_0, Q5_0, Q8_0,
// from a per-call table), so the offset costs no vector op. Then the canonical float step of
// matmul_canon.h for 16 outputs at once: y = fma(float(isum), dw * dx, y) (and y = fma(mw, s_x, y)
// for Q4_1/Q5_1). About 11 vector ops per activation row and record (512 multiply-adds); the
// unpacking (Q5_0: ~20 ops) is shared by a tile of 16 activation rows (8, then the tail, below 16).
//
// Loop nest: groups of 16 weight rows (a group's records, nb x 16 x block bytes, stay in L1) >
// tiles of R activation rows (y[R] in registers over the whole K walk) > blocks > chunks of rows
// whose chains interleave.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "kernels/matmul_canon.h"
#include "kernels/matmul_pack.h"
#include "kernels/quant_blocks.h"
#include "kernels/x86/packed_groups.h"
#include "kernels/x86/packed_prefetch.h"

namespace tessera::kernels::avx512 {
namespace {

// Activation rows per tile: kWideTileRows while m allows (one unpacking of each record per 16
// rows), then one of kTileRows (8 y + 8 w + 8 chains), then the tail. kChunkRows: rows whose chains
// interleave in a wide tile. 8 chains (16 y + 8 w + 8 chains + dw is one zmm over 32: the
// compiler spills, and it still measured faster) beat 4 by 3-12% at m = 16..512 on the
// Qwen2.5-0.5B shapes (Q5_0, Q8_0, Q4_1, 2 threads, weights cold, bench/LOG.md): 4 chains of 8
// dependent vpdpbusd left the ports waiting on the chains' latency.
constexpr int kWideTileRows = 16;
constexpr int kTileRows = 8;
constexpr int kChunkRows = 8;
constexpr size_t kPrefetchRecords = 4;  // software prefetch distance of the weight stream

template <DType T>
using Layout = PackedLayout<T>;

// One record -> w[8] (lane r: 4 unsigned weights of row r), dw and mw (lane r: row r's scales).
template <DType T>
inline void unpack_record(const uint8_t* rec, __m512i w[8], __m512* dw, __m512* mw) {
  using L = Layout<T>;
  if constexpr (L::kQ8) {
    for (int q = 0; q < 8; ++q) w[q] = _mm512_loadu_si512(rec + 64 * q);
  } else {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    for (int v = 0; v < 4; ++v) {
      const __m512i raw = _mm512_loadu_si512(rec + 64 * v);
      w[v] = _mm512_and_si512(raw, low4);
      w[v + 4] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
      if constexpr (L::kQ5) {
        const __m512i sixteen = _mm512_set1_epi8(0x10);
        __mmask64 lo, hi;
        __builtin_memcpy(&lo, rec + L::kQsBytes + 16 * v, 8);
        __builtin_memcpy(&hi, rec + L::kQsBytes + 16 * v + 8, 8);
        // The fifth bit: one masked byte add (the nibble's bit 4 is clear) per vector.
        w[v] = _mm512_mask_add_epi8(w[v], lo, w[v], sixteen);
        w[v + 4] = _mm512_mask_add_epi8(w[v + 4], hi, w[v + 4], sixteen);
      }
    }
  }
  *dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + L::kScaleAt)));
  if constexpr (L::kMin) {
    *mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + L::kScaleAt + 32)));
  }
}

// y[i0 + j][g * 16 + lane] for j < R, lanes in `store` (rows of [r_begin, r_end) in group g).
// xoff[row * nb + b] = -o * sum(x) of activation block (row, b) (types with an offset o), the
// start of each block dot's chain: the offset costs a broadcast load, not a multiply and a subtract.
template <DType T, int R>
void group_tile(const MatmulArgs& a, const int32_t* xoff, const uint8_t* group, int64_t nb, int64_t i0,
                float* y_base, __mmask16 store, bool first_tile, NextGroup next) {
  using L = Layout<T>;
  const size_t record = packed_record_bytes(T);
  __m512 y[R];
  for (int j = 0; j < R; ++j) y[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* rec = group + static_cast<size_t>(b) * record;
    // The first tile of a group pulls kPrefetchRecords records ahead into L1 (from L2, where the
    // previous group's tiles fetched them, or from DRAM in a range's first group); later tiles
    // re-read them from L1. Every tile fetches its share of the next group (packed_prefetch.h).
    if (first_tile) {
      for (size_t line = 0; line < record; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(rec + kPrefetchRecords * record + line), _MM_HINT_T0);
      }
    }
    next.fetch(b, record);
    __m512i w[8];
    __m512 dw, mw;
    unpack_record<T>(rec, w, &dw, &mw);
    // One chain of 8 vpdpbusd per activation row, the chains of a chunk of C rows interleaved,
    // then the float step of each row's 16 outputs. Rows go through pack expansions over constant
    // indices so that y[] stays in registers (a loop over j, even unrolled, leaves it on the stack).
    auto chunk = [&]<int J0, int... J>(std::integral_constant<int, J0>, std::integer_sequence<int, J...>) {
      const int32_t* x4[sizeof...(J)];
      __m512i s[sizeof...(J)];
      ((x4[J] = reinterpret_cast<const int32_t*>(a.xq + (i0 + J0 + J) * a.cols + b * kQk)), ...);
      ((s[J] = L::kOffset != 0 ? _mm512_set1_epi32(xoff[(i0 + J0 + J) * nb + b]) : _mm512_setzero_si512()), ...);
      for (int q = 0; q < 8; ++q) {
        ((s[J] = _mm512_dpbusd_epi32(s[J], w[q], _mm512_set1_epi32(x4[J][q]))), ...);
      }
      ((y[J0 + J] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[J]),
                                    _mm512_mul_ps(dw, _mm512_set1_ps(a.xd[(i0 + J0 + J) * nb + b])), y[J0 + J])),
       ...);
      if constexpr (L::kMin) {
        ((y[J0 + J] = _mm512_fmadd_ps(mw, _mm512_set1_ps(a.xs[(i0 + J0 + J) * nb + b]), y[J0 + J])), ...);
      }
    };
    constexpr int C = R == kWideTileRows ? kChunkRows : R;
    [&]<int... K>(std::integer_sequence<int, K...>) {
      (chunk(std::integral_constant<int, K * C>{}, std::make_integer_sequence<int, C>{}), ...);
    }(std::make_integer_sequence<int, R / C>{});
  }
  for (int j = 0; j < R; ++j) _mm512_mask_storeu_ps(y_base + (i0 + j) * a.rows, store, y[j]);
}

template <DType T>
void packed(const MatmulArgs& a, const int32_t* xoff, int64_t r_begin, int64_t r_end) {
  const int64_t nb = a.cols / kQk;
  const size_t group_bytes = static_cast<size_t>(nb) * packed_record_bytes(T);
  for_each_packed_group(a, group_bytes, r_begin, r_end, [&](int64_t g, const uint8_t* group, float* y_base, __mmask16 store) {
    const int64_t wide = a.m / kWideTileRows, rest = a.m % kWideTileRows;
    const int tiles = static_cast<int>(wide + rest / kTileRows + (rest % kTileRows != 0 ? 1 : 0));
    // m = 1 (decode: a read of the weights) keeps the near prefetch and the hardware's alone: the
    // far one measured -5..+15% there, within the noise (packed_prefetch.h).
    NextGroup next = next_group(group, group_bytes, g, r_end, kPackRows, a.m > 1 ? tiles : 0);
    int64_t i0 = 0;
    for (; i0 + kWideTileRows <= a.m; i0 += kWideTileRows, ++next.index) {
      group_tile<T, kWideTileRows>(a, xoff, group, nb, i0, y_base, store, i0 == 0, next);
    }
    if (i0 + kTileRows <= a.m) {
      group_tile<T, kTileRows>(a, xoff, group, nb, i0, y_base, store, i0 == 0, next);
      i0 += kTileRows, ++next.index;
    }
    // The tail in one tile of exactly its rows: each tile unpacks every record again, which at
    // m = 3 or 5 (speculative verification, small batches) split as 2 + 1 or 4 + 1 cost a third
    // more than the dots themselves.
    const bool first = i0 == 0;
    switch (a.m - i0) {
      case 7: group_tile<T, 7>(a, xoff, group, nb, i0, y_base, store, first, next); break;
      case 6: group_tile<T, 6>(a, xoff, group, nb, i0, y_base, store, first, next); break;
      case 5: group_tile<T, 5>(a, xoff, group, nb, i0, y_base, store, first, next); break;
      case 4: group_tile<T, 4>(a, xoff, group, nb, i0, y_base, store, first, next); break;
      case 3: group_tile<T, 3>(a, xoff, group, nb, i0, y_base, store, first, next); break;
      case 2: group_tile<T, 2>(a, xoff, group, nb, i0, y_base, store, first, next); break;
      case 1: group_tile<T, 1>(a, xoff, group, nb, i0, y_base, store, first, next); break;
      default: break;
    }
  });
}

// -o * a.xsum (int32 per activation block, exact: |o * sum| <= 128 * 32 * 127), built once per
// call and thread (the pieces of one call share it), one table per offset o = 8, 16, 128.
const int32_t* block_offsets(const MatmulArgs& a, int32_t o) {
  thread_local DerivedTable tables[3];
  const size_t n = static_cast<size_t>(a.m * (a.cols / kQk));
  return tables[o == 8 ? 0 : o == 16 ? 1 : 2].get(a, a.cols, n, [&](int32_t* t) {
    for (size_t i = 0; i < n; ++i) t[i] = -o * a.xsum[i];
  });
}

}  // namespace

bool packed_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
  if (a.packed == nullptr) return false;
  return with_packed_type(a.type, [&](auto t) {
    constexpr DType T = decltype(t)::value;
    packed<T>(a, Layout<T>::kOffset != 0 ? block_offsets(a, Layout<T>::kOffset) : nullptr, r_begin, r_end);
  });
}

}  // namespace tessera::kernels::avx512
