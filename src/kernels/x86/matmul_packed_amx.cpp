// AMX-INT8 kernel for the 32-block weight types over the packed layout of matmul_pack.h, for
// batches of activation rows (batched decode, prefill, speculative verification).
//
// Why: in the VNNI kernel every activation row costs 8 vpdpbusd per record (16 weight rows x one
// block), so at m = 16 the dots dominate a decode step. One tdpbsud computes all the exact int32
// dots of up to 16 activation rows x 16 weight rows x one block (K = 32), and the vector units
// are left with the canonical float step of matmul_canon.h: per activation row,
// y = fma(float(isum), dw * dx, y) (and y = fma(mw, s_x, y) for Q4_1/Q5_1), the same operations in
// the same order as every other path, so the bits are the same.
//
// The packed record is already AMX's B layout: row q of the tile (64 bytes) holds weights
// 4q..4q+3 of each of the 16 rows, as unsigned bytes. Q8_0 records are read in place; the 4- and
// 5-bit types are unpacked, one block ahead of the multiply, into a per-thread buffer
// [num_blocks][8][64] for the group of 16 weight rows, and reused by every tile of activation rows. A (activations, signed) is
// read straight from the quantized rows ([m][cols] int8, stride cols).
//
// Tiles: C0, C1 (int32, kTileM x 16), A0, A1 (int8, kTileM x 32), B0, B1 (8 x 64), used by block
// parity and software-pipelined (row_tile): in iteration k the tile unit multiplies block k and
// stores block k-1's dots while the vector units do block k-2's float step. The row tail (< 16
// rows) uses C7, A6 configured with exactly its rows, so one tile configuration serves a whole call.
//
// Each 32-block still needs one tile store and 16 vector reloads (the canonical per-block float
// step), and on the machines measured the tile unit and the vector units do not overlap at all:
// tile work and float step interleaved take longer than their sum (bench/probe_amx_overlap), and
// grouping four blocks per tile phase was slower still (bench/LOG.md, B4). That bounds the
// gain: 1.2-1.5x the VNNI kernel at m = 16 on one thread (bench_matmul).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/matmul_canon.h"
#include "kernels/matmul_pack.h"
#include "kernels/quant_blocks.h"
#include "kernels/x86/amx_tiles.h"
#include "kernels/x86/packed_groups.h"

namespace tessera::kernels::amx {
namespace {

constexpr int kTileM = 16;          // activation rows per full tile
// Software prefetch distance of the weight stream, in records (5 KiB of Q4_1, 8.5 KiB of Q8_0).
// With both cores streaming from DRAM at batched decode, 4 records (1.3 KiB) left the unpack
// waiting: 16 made a B = 16 SmolLM2 step 3-4% faster (gate+up 3.66-3.78 -> 3.13-3.45 ms; 24 and 32
// were slower than 16 again). bench/LOG.md, B4.
constexpr size_t kPrefetchRecords = 16;
constexpr int kBlockBytes = 512;    // one block of 16 weight rows as a B tile: 8 rows x 64 bytes
constexpr int kBRows = 8, kRowBytes = 64;

// Tile numbers. GCC's tile intrinsics paste their tile argument into the assembly text, so these
// must be macros that expand to literals (an enum or constexpr would not assemble).
#define kC0 0
#define kC1 1
#define kA0 2
#define kA1 3
#define kB0 4
#define kB1 5
#define kATail 6
#define kCTail 7

// Loads the configuration for a call whose row tail has `tail` rows (0: none), unless this thread
// already holds it (amx_tiles.h).
void configure(int tail) {
  TileConfig cfg;
  cfg.set(kC0, kTileM, 64), cfg.set(kC1, kTileM, 64);
  cfg.set(kA0, kTileM, kQk), cfg.set(kA1, kTileM, kQk);
  cfg.set(kB0, kBRows, kRowBytes), cfg.set(kB1, kBRows, kRowBytes);
  if (tail > 0) cfg.set(kATail, tail, kQk), cfg.set(kCTail, tail, 64);
  load_tile_config(cfg);
}

template <DType T>
using Layout = PackedLayout<T>;

// Record b of a 4- or 5-bit group -> its B tile (8 x 64 bytes of unsigned weights) at dst.
template <DType T>
inline void unpack_block(const uint8_t* rec, uint8_t* dst) {
  using L = Layout<T>;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  for (int v = 0; v < 4; ++v) {
    const __m512i raw = _mm512_loadu_si512(rec + 64 * v);
    __m512i lo = _mm512_and_si512(raw, low4);
    __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
    if constexpr (L::kQ5) {
      const __m512i sixteen = _mm512_set1_epi8(0x10);
      __mmask64 lo_bits, hi_bits;
      std::memcpy(&lo_bits, rec + L::kQsBytes + 16 * v, 8);
      std::memcpy(&hi_bits, rec + L::kQsBytes + 16 * v + 8, 8);
      lo = _mm512_or_si512(lo, _mm512_maskz_mov_epi8(lo_bits, sixteen));
      hi = _mm512_or_si512(hi, _mm512_maskz_mov_epi8(hi_bits, sixteen));
    }
    _mm512_store_si512(dst + 64 * v, lo);        // elements 4v..4v+3: B row v
    _mm512_store_si512(dst + 64 * (v + 4), hi);  // elements 16+4v..: B row 4+v
  }
}

// The activation scales of one call transposed to [block][row] (MatmulArgs::xd_t ...), so that the
// rows of a tile read block b's scales at constant offsets from one pointer (with [row][block]
// every row needs its own index register, and the 16 accumulators no longer fit in registers).
struct BlockScales {
  const float* xd;       // [nb][m] d of each activation block
  const float* xs;       // [nb][m] d * sum(q)
  const int32_t* xsum;   // [nb][m] sum(q)
  int64_t m;
};

// The canonical float step of block b for rows i0 .. i0+M-1 from their int32 dots c[j][16].
// Every access to y has a constant index (the pack expansion over J) and the function is always
// inlined, so GCC keeps the M accumulators in registers: with a loop over j, even fully unrolled,
// it kept y on the stack and loaded and stored all 16 accumulators on every block.
template <DType T, int M, size_t... J>
[[gnu::always_inline]] inline void float_step(const BlockScales& bs, const uint8_t* rec, int64_t i0, int64_t b,
                                              const int32_t* c, __m512 (&y)[M], std::index_sequence<J...>) {
  using L = Layout<T>;
  const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + L::kScaleAt)));
  __m512 mw;
  if constexpr (L::kMin) mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + L::kScaleAt + 32)));
  const float* xd = bs.xd + b * bs.m + i0;
  const float* xs = bs.xs + b * bs.m + i0;
  const int32_t* xsum = bs.xsum + b * bs.m + i0;
  auto row = [&](__m512& acc, int j) __attribute__((always_inline)) {
    __m512i isum = _mm512_load_si512(c + 16 * j);
    if constexpr (L::kOffset != 0) isum = _mm512_sub_epi32(isum, _mm512_set1_epi32(L::kOffset * xsum[j]));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(xd[j])), acc);
    if constexpr (L::kMin) acc = _mm512_fmadd_ps(mw, _mm512_set1_ps(xs[j]), acc);
  };
  (row(y[J], static_cast<int>(J)), ...);
}

// One block's dots into tile C: C = A (activation rows, block b) x B (block b's tile).
#define TESSERA_AMX_DOT(C, A, B, x_block, b_tile) \
  do {                                            \
    _tile_loadd(A, x_block, a.cols);              \
    _tile_loadd(B, b_tile, kRowBytes);            \
    _tile_zero(C);                                \
    _tile_dpbsud(C, A, B);                        \
  } while (0)

// How many blocks ahead of its multiply a 4- or 5-bit block is unpacked: a tile load of bytes
// that vector stores wrote moments before waits for them (about 20 cycles per block at distance 1).
constexpr int64_t kUnpackAhead = 3;

// Rows i0 .. i0+M-1 of one group (M = 16 on tiles C0/A0/B0 and C1/A1/B1 by block parity, M < 16
// on the tail tiles), software-pipelined three deep: in iteration k the tile unit multiplies
// block k and stores block k-1's dots (whose multiply has had a whole iteration to finish), and
// the vector units do block k-2's float step (the float steps still run in ascending block order).
// The first row tile of a group prefetches its records and, for the 4- and 5-bit types, unpacks
// the B tiles kUnpackAhead blocks ahead of their multiply; later row tiles reuse them.
template <DType T, int M>
void row_tile(const MatmulArgs& a, const BlockScales& bs, const uint8_t* group, uint8_t* b_tiles, size_t b_stride,
              int64_t nb, int64_t i0, float* y_base, __mmask16 store, bool first) {
  const size_t record = packed_record_bytes(T);
  alignas(64) int32_t cbuf[2][M * 16];
  constexpr auto rows = std::make_index_sequence<M>{};
  __m512 y[M];
  [&]<size_t... J>(std::index_sequence<J...>) { ((y[J] = _mm512_setzero_ps()), ...); }(rows);
  const int8_t* x = a.xq + i0 * a.cols;
  const bool unpack = !Layout<T>::kQ8 && first;
  if (unpack) {
    for (int64_t k = 0; k < std::min(kUnpackAhead, nb); ++k) unpack_block<T>(group + k * record, b_tiles + k * b_stride);
  }
  auto store_dots = [&](int64_t k) {  // block k's tile -> cbuf[k & 1]
    if constexpr (M == kTileM) {
      if (k & 1) _tile_stored(kC1, cbuf[1], 64);
      else _tile_stored(kC0, cbuf[0], 64);
    } else {
      _tile_stored(kCTail, cbuf[k & 1], 64);
    }
  };
  for (int64_t k = 0; k < nb; ++k) {
    const uint8_t* rec = group + static_cast<size_t>(k) * record;
    if (first) {  // the weights stream from memory once per call: keep kPrefetchRecords ahead
      for (size_t line = 0; line < record; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(rec + kPrefetchRecords * record + line), _MM_HINT_T0);
      }
    }
    if (unpack && k + kUnpackAhead < nb) {
      unpack_block<T>(rec + kUnpackAhead * record, b_tiles + (k + kUnpackAhead) * b_stride);
    }
    const int8_t* xk = x + k * kQk;
    const uint8_t* bk = b_tiles + k * b_stride;
    if constexpr (M == kTileM) {
      if (k & 1) {
        TESSERA_AMX_DOT(kC1, kA1, kB1, xk, bk);
      } else {
        TESSERA_AMX_DOT(kC0, kA0, kB0, xk, bk);
      }
      if (k > 0) store_dots(k - 1);
    } else {
      if (k > 0) store_dots(k - 1);  // the tail has one C tile: store it before it is reused
      TESSERA_AMX_DOT(kCTail, kATail, kB0, xk, bk);
    }
    if (k > 1) float_step<T, M>(bs, rec - 2 * record, i0, k - 2, cbuf[k & 1], y, rows);
  }
  store_dots(nb - 1);
  if (nb > 1) float_step<T, M>(bs, group + static_cast<size_t>(nb - 2) * record, i0, nb - 2, cbuf[nb & 1], y, rows);
  float_step<T, M>(bs, group + static_cast<size_t>(nb - 1) * record, i0, nb - 1, cbuf[(nb - 1) & 1], y, rows);
  [&]<size_t... J>(std::index_sequence<J...>) {
    (_mm512_mask_storeu_ps(y_base + (i0 + static_cast<int64_t>(J)) * a.rows, store, y[J]), ...);
  }(rows);
}

#undef TESSERA_AMX_DOT

template <DType T, int M = kTileM - 1>
void tail_dispatch(int tail, const MatmulArgs& a, const BlockScales& bs, const uint8_t* group, uint8_t* b_tiles, size_t b_stride,
                   int64_t nb, int64_t i0, float* y_base, __mmask16 store, bool first) {
  if constexpr (M >= 1) {
    if (tail == M) return row_tile<T, M>(a, bs, group, b_tiles, b_stride, nb, i0, y_base, store, first);
    tail_dispatch<T, M - 1>(tail, a, bs, group, b_tiles, b_stride, nb, i0, y_base, store, first);
  }
}

template <DType T>
void packed(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
  using L = Layout<T>;
  const int64_t nb = a.cols / kQk;
  const size_t record = packed_record_bytes(T);
  const size_t group_bytes = static_cast<size_t>(nb) * record;
  const int tail = static_cast<int>(a.m % kTileM);
  configure(tail);
  struct alignas(64) Line {
    uint8_t bytes[64];
  };
  thread_local std::vector<Line> unpacked;  // B tiles of one group (4- and 5-bit types)
  if (!L::kQ8 && unpacked.size() < static_cast<size_t>(nb) * (kBlockBytes / 64)) {
    unpacked.resize(static_cast<size_t>(nb) * (kBlockBytes / 64));
  }
  const BlockScales bs{a.xd_t, a.xs_t, a.xsum_t, a.m};
  for_each_packed_group(a, group_bytes, r_begin, r_end, [&](int64_t, const uint8_t* group, float* y_base, __mmask16 store) {
    // Q8_0: the records themselves are the B tiles (qs first, 64-byte rows).
    uint8_t* b_tiles = L::kQ8 ? const_cast<uint8_t*>(group) : reinterpret_cast<uint8_t*>(unpacked.data());
    const size_t b_stride = L::kQ8 ? record : kBlockBytes;
    bool first = true;  // the first row tile of the group streams (and unpacks) its records
    int64_t i0 = 0;
    for (; i0 + kTileM <= a.m; i0 += kTileM, first = false) {
      row_tile<T, kTileM>(a, bs, group, b_tiles, b_stride, nb, i0, y_base, store, first);
    }
    if (tail > 0) tail_dispatch<T>(tail, a, bs, group, b_tiles, b_stride, nb, i0, y_base, store, first);
  });
}

}  // namespace

bool packed_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
  return a.packed != nullptr &&
         with_packed_type(a.type, [&](auto t) { packed<decltype(t)::value>(a, r_begin, r_end); });
}

}  // namespace tessera::kernels::amx

#undef kC0
#undef kC1
#undef kA0
#undef kA1
#undef kB0
#undef kB1
#undef kATail
#undef kCTail
