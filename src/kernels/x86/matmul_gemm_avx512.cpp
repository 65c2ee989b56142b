// AVX-512 VNNI register-blocked kernel for m > 1 (prefill, batched decode, speculative
// verification) over 32-block weights (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0).
//
// Micro-tile: C weight rows x R activation rows (C = 1, R <= 16) of 512-bit float accumulators
// held in registers for the whole K walk. Each step covers two blocks (64 columns): every weight
// row of the tile is unpacked once (nibbles -> bytes, fp16 d/m -> floats) and dotted with all R
// activation rows; every activation vector is loaded once and dotted with all C weight rows. Per
// (weight row, activation row) pair and step the work is 4 vector ops: vpdpbusd, cvtdq2ps, one mul
// for the scale dw*dx (dx comes pre-broadcast from MatmulArgs::xdv) and one fma.
// NOTE(gemm): those 4 ops per 64 multiply-adds are the floor the canonical order allows (every
// output has 16 float lanes, each taking one fma per block): about 64 int8 ops per cycle on the
// two 512-bit ports, a quarter of vpdpbusd's peak. Going past it needs a canonical order where one
// fma serves 16 outputs (a full int32 dot per block, weights repacked so a vpdpbusd lane is an
// output row), i.e. a change of matmul_canon.h for every path.
//
// Canonical order (matmul_canon.h), unchanged: accumulator lanes 0..7 hold the even block's 8 int32
// lane sums, lanes 8..15 the odd block's, each updated by one fma per block in ascending block
// order; Q4_1/Q5_1 minimum terms are two fma chains (even, odd blocks) per output, here vectorized
// across the R activation rows (lane j = activation row j, from MatmulArgs::xs_t). So an output has
// the same bits as in the m = 1 kernel and the scalar twin; tiling only picks which outputs are
// computed together.
//
// Loop nest (cache): activation panels of kPanelRows rows (xq + xdv of a panel stay in L2) >
// weight-row chunks of kWeightChunk rows (stay in L1) > activation tiles of R rows (stay in L1
// while the chunk's weight rows pass) > micro-tile.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>

#include "kernels/matmul_canon.h"
#include "kernels/quant_blocks.h"
#include "kernels/x86/matmul_avx512_blocks.h"

namespace tessera::kernels::avx512 {
namespace {

// Tile sizes, measured on SmolLM2's shapes (1 thread, CPU time): one weight row per micro-tile
// (C = 1: two rows reuse each activation load but spill the scale vectors) and 16 activation rows
// (R; 16 rows of xq + xdv, 2 x cols bytes each, fit L1 next to the weight chunk for cols up to
// kGemmMaxCols). Panels of 32 activation rows beat 64..256 at m = 512.
constexpr int kTileCols = 1;                  // C: weight rows per micro-tile
constexpr int kTileRows = 16;                 // R
constexpr int64_t kPanelRows = 32;            // activation rows per L2 panel
constexpr int64_t kWeightChunk = 16;          // weight rows per L1 chunk
// Software prefetch distance in weight rows, as the m = 1 kernel: at small m over a large matrix
// (the 49152-row logits at batched decode) the weights stream from DRAM (without it m = 8 over
// 576->49152 ran at 0.58x of the tiled kernel).
constexpr int64_t kPrefetchRows = 4;

constexpr bool has_min(DType t) { return t == DType::Q4_1 || t == DType::Q5_1; }

// y[i0 + j][r0 + c] for j < R, c < C.
template <DType T, int C, int R>
void micro_tile(const MatmulArgs& a, int64_t r0, int64_t i0) {
  constexpr bool kSigned = signed_weights(T);
  constexpr bool kMin = has_min(T);
  const size_t bb = dtype_block_bytes(T);
  const int64_t cols = a.cols, nb = cols / kQk, xdv_ld = nb * 8;
  const uint8_t* w[C];
  for (int c = 0; c < C; ++c) w[c] = a.w + static_cast<size_t>(r0 + c) * a.row_bytes;
  const int8_t* xq = a.xq + i0 * cols;     // row j: xq + j * cols
  const float* xdv = a.xdv + i0 * xdv_ld;  // row j: xdv + j * xdv_ld
  const float* xs_t = a.xs_t + i0;         // block b: xs_t + b * ld_xs_t, lane j = row i0 + j
  const __m512i halves = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  __m512 acc[C][R];
  __m512 ms_even[C], ms_odd[C];  // canonical msum[0], msum[1]; lane j = activation row j
  for (int c = 0; c < C; ++c) {
    ms_even[c] = ms_odd[c] = _mm512_setzero_ps();
    for (int j = 0; j < R; ++j) acc[c][j] = _mm512_setzero_ps();
  }
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    __m512i wq[C];
    __m512 dv[C];  // [dw_b x8, dw_b+1 x8]
    __mmask64 neg[C];
    __m512 xs_even, xs_odd;
    if constexpr (kMin) {
      xs_even = _mm512_loadu_ps(xs_t + b * a.ld_xs_t);
      xs_odd = _mm512_loadu_ps(xs_t + (b + 1) * a.ld_xs_t);
    }
    for (int c = 0; c < C; ++c) {
      __m128 dm;  // [d0, d1, m0, m1]
      _mm_prefetch(reinterpret_cast<const char*>(w[c] + kPrefetchRows * a.row_bytes + b * bb), _MM_HINT_T1);
      wq[c] = unpack2<T>(w[c] + b * bb, &dm);
      dv[c] = _mm512_permutexvar_ps(halves, _mm512_castps128_ps512(dm));
      if constexpr (kSigned) {
        neg[c] = _mm512_movepi8_mask(wq[c]);
        wq[c] = _mm512_abs_epi8(wq[c]);
      }
      if constexpr (kMin) {
        const __m512 dmz = _mm512_castps128_ps512(dm);
        ms_even[c] = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_set1_epi32(2), dmz), xs_even, ms_even[c]);
        ms_odd[c] = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_set1_epi32(3), dmz), xs_odd, ms_odd[c]);
      }
    }
    for (int j = 0; j < R; ++j) {
      const __m512i xv = _mm512_loadu_si512(xq + j * cols + b * kQk);
      const __m512 xd = _mm512_loadu_ps(xdv + j * xdv_ld + b * 8);
      for (int c = 0; c < C; ++c) {
        __m512i x = xv;
        if constexpr (kSigned) x = _mm512_mask_sub_epi8(xv, neg[c], _mm512_setzero_si512(), xv);
        const __m512i isum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wq[c], x);
        acc[c][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dv[c], xd), acc[c][j]);
      }
    }
  }
  if (b < nb) {  // a last even block: lanes 0..7 only
    constexpr __mmask16 kLow = 0x00FF;
    __m512i wq[C];
    __m512 dv[C];
    __mmask64 neg[C];
    __m512 xs_even;
    if constexpr (kMin) xs_even = _mm512_loadu_ps(xs_t + b * a.ld_xs_t);
    for (int c = 0; c < C; ++c) {
      float dw = 0.0f, mw = 0.0f;
      wq[c] = _mm512_zextsi256_si512(unpack1<T>(w[c] + b * bb, &dw, &mw));
      dv[c] = _mm512_set1_ps(dw);
      if constexpr (kSigned) {
        neg[c] = _mm512_movepi8_mask(wq[c]);
        wq[c] = _mm512_abs_epi8(wq[c]);
      }
      if constexpr (kMin) ms_even[c] = _mm512_fmadd_ps(_mm512_set1_ps(mw), xs_even, ms_even[c]);
    }
    for (int j = 0; j < R; ++j) {
      const __m512i xv = _mm512_maskz_loadu_epi8(0xFFFFFFFFull, xq + j * cols + b * kQk);
      const __m512 xd = _mm512_maskz_loadu_ps(kLow, xdv + j * xdv_ld + b * 8);
      for (int c = 0; c < C; ++c) {
        __m512i x = xv;
        if constexpr (kSigned) x = _mm512_mask_sub_epi8(xv, neg[c], _mm512_setzero_si512(), xv);
        const __m512i isum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wq[c], x);
        acc[c][j] = _mm512_mask3_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dv[c], xd), acc[c][j], kLow);
      }
    }
  }
  for (int c = 0; c < C; ++c) {
    alignas(64) float msum[16];
    if constexpr (kMin) _mm512_store_ps(msum, _mm512_add_ps(ms_even[c], ms_odd[c]));
    for (int j = 0; j < R; ++j) {
      float v = hsum_canonical(acc[c][j]);
      if constexpr (kMin) v = v + msum[j];
      a.y[(i0 + j) * a.rows + r0 + c] = v;
    }
  }
}

// Activation rows [i0, i0 + num_rows) in tiles of 16, 8, 4, 2, 1 rows.
template <DType T, int C>
void micro_tile_rows(const MatmulArgs& a, int64_t r0, int64_t i0, int64_t num_rows) {
  while (num_rows > 0) {
    int64_t n = 1;
    if (num_rows >= 16) n = 16, micro_tile<T, C, 16>(a, r0, i0);
    else if (num_rows >= 8) n = 8, micro_tile<T, C, 8>(a, r0, i0);
    else if (num_rows >= 4) n = 4, micro_tile<T, C, 4>(a, r0, i0);
    else if (num_rows >= 2) n = 2, micro_tile<T, C, 2>(a, r0, i0);
    else micro_tile<T, C, 1>(a, r0, i0);
    i0 += n, num_rows -= n;
  }
}

template <DType T>
void gemm(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
  for (int64_t p0 = 0; p0 < a.m; p0 += kPanelRows) {
    const int64_t p1 = std::min(a.m, p0 + kPanelRows);
    for (int64_t r0 = r_begin; r0 < r_end; r0 += kWeightChunk) {
      const int64_t r1 = std::min(r_end, r0 + kWeightChunk);
      for (int64_t i0 = p0; i0 < p1; i0 += kTileRows) {
        const int64_t num_rows = std::min<int64_t>(kTileRows, p1 - i0);
        int64_t r = r0;
        for (; r + kTileCols <= r1; r += kTileCols) micro_tile_rows<T, kTileCols>(a, r, i0, num_rows);
        for (; r < r1; ++r) micro_tile_rows<T, 1>(a, r, i0, num_rows);
      }
    }
  }
}

}  // namespace

bool gemm_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
  if (a.xdv == nullptr || a.xs_t == nullptr || a.cols > kGemmMaxCols) return false;
  switch (a.type) {
    case DType::Q4_0: gemm<DType::Q4_0>(a, r_begin, r_end); return true;
    case DType::Q4_1: gemm<DType::Q4_1>(a, r_begin, r_end); return true;
    case DType::Q5_0: gemm<DType::Q5_0>(a, r_begin, r_end); return true;
    case DType::Q5_1: gemm<DType::Q5_1>(a, r_begin, r_end); return true;
    case DType::Q8_0: gemm<DType::Q8_0>(a, r_begin, r_end); return true;
    default: return false;
  }
}

}  // namespace tessera::kernels::avx512
