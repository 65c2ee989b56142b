// AMX-INT8 kernel for Q4_K and Q5_K over the packed layout of matmul_pack.h, for batches of at
// least amx_min_rows(type) activation rows (prefill, wide batched decode): the K-quant twin of
// x86/matmul_packed_amx.cpp. Q6_K has no tile kernel: its 16-element sub-blocks fill half a tile
// row, and a version built for it measured 0.74-0.96x the VNNI kernel at every m (bench/LOG.md).
//
// Why: in the VNNI kernel (x86/matmul_packed_kquant_avx512.cpp) every activation row costs 8
// vpdpbusd per sub-block and 16 weight rows, most of a prefill chunk's ffn_down. Here one tdpbsud
// gives the exact int32 sub-block dots of 16 activation rows x 16 weight rows, and the vector units
// do, per activation row and sub-block, one vpmulld by the sub-block scales and one add. The
// canonical sums of matmul_canon.h are exact integers, so the order changes no bit:
//   isum = sum_j sc_j * dot_j; msum = sum_j mn_j * (bsum_2j + bsum_2j+1), one vpdpwssd per
//   sub-block of the pair (mn_j, mn_j) against the activation's (bsum_2j, bsum_2j+1);
// then y = fma(float(isum), d * dx, y) and y = fma(-float(msum), dmin * dx, y), super-blocks
// ascending, as the scalar twin (matmul_ref.cpp).
//
// Tiles: sub-block j of super-block b is A (activation rows, K = 32 bytes) times B (8 rows of 64
// bytes: row q holds elements 4q..4q+3 of each of the 16 weight rows). The 4- and 5-bit weights are
// unpacked into that layout in a per-thread buffer one super-block ahead of their multiply (by the
// group's first tile of activation rows; the later ones reuse it). Full tiles alternate C0/A0/B0
// and C1/A1/B1 by sub-block parity so a store waits one multiply; a row tail (< 16 rows) has C7/A6
// configured with exactly its rows. A super-block's dots go to a buffer, and its vector step runs
// after the next super-block's multiplies have been issued.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "kernels/matmul_canon.h"
#include "kernels/matmul_pack.h"
#include "kernels/quant_blocks.h"
#include "kernels/x86/amx_tiles.h"
#include "kernels/x86/packed_groups.h"

namespace tessera::kernels::amx {
namespace {

// a.xbsums (int32 per 16 activations) as int16 pairs, bsum16[i][b * 8 + k] = (bsum_{2k},
// bsum_{2k+1}) of super-block b of row i (|bsum| <= 16 * 127 fits), the operand of the mins'
// vpdpwssd against (mn_k, mn_k). [m][cols / 32] dwords, built once per call and thread (the row
// pieces of one call share it).
const int32_t* bsum16_pairs(const MatmulArgs& a) {
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

constexpr int kTileM = 16;  // activation rows per full tile
constexpr int kRowBytes = 64;

// Tile numbers: macros that expand to literals (GCC pastes them into the assembly text).
#define kC0 0
#define kC1 1
#define kA0 2
#define kA1 3
#define kB0 4
#define kB1 5
#define kATail 6
#define kCTail 7

// Per super-block: 8 sub-blocks of 32 elements (the A tile's bytes per row); one sub-block's B tile
// is K / 4 = 8 rows x 64 bytes.
constexpr int kSubBlocks = 8;
constexpr int kK = 32;
constexpr int kBTileBytes = kK * 16;
// Records the group's first tile prefetches ahead into L1 (~7 KB of weights).
constexpr size_t kPrefetchRecords = 3;

void configure(int tail) {
  TileConfig cfg;
  cfg.set(kC0, kTileM, 64), cfg.set(kC1, kTileM, 64);
  cfg.set(kA0, kTileM, kK), cfg.set(kA1, kTileM, kK);
  cfg.set(kB0, kK / 4, kRowBytes), cfg.set(kB1, kK / 4, kRowBytes);
  if (tail > 0) cfg.set(kATail, tail, kK), cfg.set(kCTail, tail, 64);
  load_tile_config(cfg);
}

// Super-block record rec of a Q4_K/Q5_K group -> the B tiles of its 8 sub-blocks at dst
// ([8][8][64] unsigned weights: sub-block 2c is the low nibbles of chunk c, 2c + 1 the high ones).
template <DType T>
inline void unpack_superblock(const uint8_t* rec, uint8_t* dst) {
  using L = PackedKLayout<T>;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  for (int c = 0; c < 4; ++c) {
    for (int v = 0; v < 8; ++v) {
      const __m512i raw = _mm512_loadu_si512(rec + 512 * c + 64 * v);
      __m512i lo = _mm512_and_si512(raw, low4);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
      if constexpr (L::kQ5) {
        const __m512i sixteen = _mm512_set1_epi8(0x10);
        __mmask64 lo_bits, hi_bits;
        __builtin_memcpy(&lo_bits, rec + L::kQhAt + 64 * (2 * c) + 8 * v, 8);
        __builtin_memcpy(&hi_bits, rec + L::kQhAt + 64 * (2 * c + 1) + 8 * v, 8);
        lo = _mm512_or_si512(lo, _mm512_maskz_mov_epi8(lo_bits, sixteen));
        hi = _mm512_or_si512(hi, _mm512_maskz_mov_epi8(hi_bits, sixteen));
      }
      _mm512_store_si512(dst + 512 * (2 * c) + 64 * v, lo);
      _mm512_store_si512(dst + 512 * (2 * c + 1) + 64 * v, hi);
    }
  }
}

inline __m512i bcast(const int32_t* p) { return _mm512_set1_epi32(*p); }

// One tile of `rows` activation rows (i0 ..) of one group of 16 weight rows.
template <DType T>
class RowTile {
 public:
  using L = PackedKLayout<T>;

  RowTile(const MatmulArgs& a, const int32_t* bsum16, const uint8_t* group, uint8_t* b_tiles, int64_t i0, int rows)
      : a_(a), bsum16_(bsum16), group_(group), b_tiles_(b_tiles), nb_(a.cols / kQkK), i0_(i0), rows_(rows) {}

  // y[i0 + i][group's rows selected by `store`] for i < rows. first: this is the group's first
  // tile, which streams the records (and unpacks the 4- and 5-bit ones).
  void run(float* y_base, __mmask16 store, bool first) {
    alignas(64) float acc[kTileM][16] = {};
    alignas(64) int32_t dots[2][kSubBlocks][kTileM * 16];  // [super-block parity][sub-block][row][lane]
    const bool unpack = first;
    if (unpack) unpack_superblock<T>(group_, b_tiles_);
    for (int64_t b = 0; b < nb_; ++b) {
      const uint8_t* rec = record(b);
      if (first) {
        for (size_t line = 0; line < L::kBytes; line += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(rec + kPrefetchRecords * L::kBytes + line), _MM_HINT_T0);
        }
      }
      if (unpack && b + 1 < nb_) unpack_superblock<T>(record(b + 1), b_tiles_ + (b + 1) * 8 * kBTileBytes);
      if (rows_ == kTileM) multiply_full(b, dots[b & 1]);
      else multiply_tail(b, dots[b & 1]);
      if (b > 0) vector_step(b - 1, dots[(b - 1) & 1], acc);
    }
    vector_step(nb_ - 1, dots[(nb_ - 1) & 1], acc);
    for (int i = 0; i < rows_; ++i) _mm512_mask_storeu_ps(y_base + (i0_ + i) * a_.rows, store, _mm512_load_ps(acc[i]));
  }

 private:
  const uint8_t* record(int64_t b) const { return group_ + static_cast<size_t>(b) * L::kBytes; }
  // Sub-block j's B tile of super-block b.
  const uint8_t* b_tile(int64_t b, int j) const {
    return b_tiles_ + (b * 8 + j) * kBTileBytes;
  }
  const int8_t* a_tile(int64_t b, int j) const { return a_.xq + i0_ * a_.cols + b * kQkK + j * kK; }

  // The sub-block dots of super-block b for 16 rows into out[j], two C tiles by parity.
  void multiply_full(int64_t b, int32_t (*out)[kTileM * 16]) const {
    const auto stride = static_cast<size_t>(a_.cols);
    for (int j = 0; j < kSubBlocks; j += 2) {
      _tile_loadd(kA0, a_tile(b, j), stride);
      _tile_loadd(kB0, b_tile(b, j), kRowBytes);
      _tile_zero(kC0);
      _tile_dpbsud(kC0, kA0, kB0);
      if (j > 0) _tile_stored(kC1, out[j - 1], 64);
      _tile_loadd(kA1, a_tile(b, j + 1), stride);
      _tile_loadd(kB1, b_tile(b, j + 1), kRowBytes);
      _tile_zero(kC1);
      _tile_dpbsud(kC1, kA1, kB1);
      _tile_stored(kC0, out[j], 64);
    }
    _tile_stored(kC1, out[kSubBlocks - 1], 64);
  }
  // The same for a tail of rows_ < 16 rows, on the one pair of tail tiles.
  void multiply_tail(int64_t b, int32_t (*out)[kTileM * 16]) const {
    const auto stride = static_cast<size_t>(a_.cols);
    for (int j = 0; j < kSubBlocks; ++j) {
      _tile_loadd(kATail, a_tile(b, j), stride);
      _tile_loadd(kB0, b_tile(b, j), kRowBytes);
      _tile_zero(kCTail);
      _tile_dpbsud(kCTail, kATail, kB0);
      _tile_stored(kCTail, out[j], 64);
    }
  }

  // Super-block b's canonical step for every row from its sub-block dots.
  void vector_step(int64_t b, const int32_t (*dots)[kTileM * 16], float (*acc)[16]) const {
    const uint8_t* rec = record(b);
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + L::kDAt)));
    __m512i sc[kSubBlocks];
    for (int j = 0; j < kSubBlocks; ++j) {
      sc[j] = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + L::kScAt + 16 * j)));
    }
    // The vpdpwssd operands, int16 pairs (mn_k, mn_k) per lane.
    __m512i pair[8];
    for (int k = 0; k < 8; ++k) {
      const __m512i mn = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + L::kMnAt + 16 * k)));
      pair[k] = _mm512_or_si512(mn, _mm512_slli_epi32(mn, 16));
    }
    const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + L::kDminAt)));
    for (int i = 0; i < rows_; ++i) {
      const int64_t row = i0_ + i;
      const int32_t* bs = bsum16_ + row * (a_.cols / 32) + b * 8;
      __m512i isum = _mm512_mullo_epi32(sc[0], _mm512_load_si512(dots[0] + 16 * i));
      for (int j = 1; j < kSubBlocks; ++j) {
        isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(sc[j], _mm512_load_si512(dots[j] + 16 * i)));
      }
      __m512i msum = _mm512_setzero_si512();
      for (int k = 0; k < 8; ++k) msum = _mm512_dpwssd_epi32(msum, pair[k], bcast(bs + k));
      const __m512 dx = _mm512_set1_ps(a_.xd[row * nb_ + b]);
      __m512 y = _mm512_load_ps(acc[i]);
      y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, dx), y);
      y = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, dx), y);
      _mm512_store_ps(acc[i], y);
    }
  }

  const MatmulArgs& a_;
  const int32_t* bsum16_;
  const uint8_t* group_;
  uint8_t* b_tiles_;
  int64_t nb_, i0_;
  int rows_;
};

template <DType T>
void packed(const MatmulArgs& a, const int32_t* bsum16, int64_t r_begin, int64_t r_end) {
  using L = PackedKLayout<T>;
  const int64_t nb = a.cols / kQkK;
  const size_t group_bytes = static_cast<size_t>(nb) * L::kBytes;
  configure(static_cast<int>(a.m % kTileM));
  struct alignas(64) Line {
    uint8_t bytes[64];
  };
  thread_local std::vector<Line> unpacked;  // one group's B tiles (Q4_K, Q5_K): [nb][8][512 bytes]
  if (unpacked.size() < static_cast<size_t>(nb) * 64) unpacked.resize(static_cast<size_t>(nb) * 64);
  auto* b_tiles = reinterpret_cast<uint8_t*>(unpacked.data());
  for_each_packed_group(a, group_bytes, r_begin, r_end, [&](int64_t, const uint8_t* group, float* y_base, __mmask16 store) {
    for (int64_t i0 = 0; i0 < a.m; i0 += kTileM) {
      const int rows = static_cast<int>(std::min<int64_t>(kTileM, a.m - i0));
      RowTile<T>(a, bsum16, group, b_tiles, i0, rows).run(y_base, store, i0 == 0);
    }
  });
}

}  // namespace

bool packed_kquant_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
  if (a.packed == nullptr || (a.type != DType::Q4_K && a.type != DType::Q5_K)) return false;
  const int32_t* bsum16 = bsum16_pairs(a);
  if (a.type == DType::Q4_K) packed<DType::Q4_K>(a, bsum16, r_begin, r_end);
  else packed<DType::Q5_K>(a, bsum16, r_begin, r_end);
  return true;
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
