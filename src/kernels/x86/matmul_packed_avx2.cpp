// AVX2 kernel for the 32-block weight types over the packed layout of matmul_pack.h, for CPUs
// without AVX-512 VNNI (AMD Zen 2/3, Intel client parts, VMs that hide AVX-512).
//
// A 16-row group is read as two halves of 8 rows: bytes 32h..32h+31 of each 64-byte qs vector are
// lane-for-lane the AVX-512 layout's rows 8h..8h+7 (lane r: 4 consecutive weights of row r). With
// the activation dword q broadcast, vpmaddubsw (u8 x s8 -> pairs summed into s16) then vpmaddwd
// by ones gives every row's partial dot in its own 32-bit lane, so no horizontal sum is needed,
// and the canonical float step (matmul_canon.h) advances 8 outputs per fma.
//
// Why the 16-bit sums are exact: activations are in [-127, 127], so one vpmaddubsw lane is at most
// 2 x 15 x 127 = 3810 for 4-bit weights (8 of them summed: 30480 < 32767) and 2 x 31 x 127 = 7874
// for 5-bit weights (4 of them: 31496). Q8_0's unsigned bytes (weight + 128) would saturate, so
// they are turned back into signed weights and the sign moved onto the activations
// (|w| <= 128, one vpmaddubsw lane <= 32512), and each one goes to 32 bits at once.
//
// Loop nest: groups of 16 weight rows > tiles of R <= 4 activation rows > blocks > the 8 weight
// vectors of a block, both halves at once (each broadcast activation dword serves 16 outputs;
// against one half per pass: +10-15% at m = 16, +15-20% at m = 1, bench_matmul on an AMD EPYC).
#include <immintrin.h>

#include <algorithm>

#include "kernels/matmul_canon.h"
#include "kernels/matmul_pack.h"
#include "kernels/quant_blocks.h"
#include "kernels/x86/avx2_helpers.h"
#include "util/aligned_vector.h"

namespace tessera::kernels::avx2 {
namespace {

constexpr int kTileRows = 4;            // activation rows per tile
constexpr size_t kPrefetchRecords = 4;  // software prefetch distance of the weight stream

template <DType T>
using Layout = PackedLayout<T>;

// Weight vector q (0..7) of one half of a record: lane r = the 4 weights of row 8h + r that pair
// with activation dword q, as unsigned bytes (Q8_0: signed, the +128 of the layout undone).
template <DType T>
inline __m256i weights(const uint8_t* rec, int half, int q) {
  using L = Layout<T>;
  if constexpr (L::kQ8) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 64 * q + 32 * half));
    return _mm256_xor_si256(raw, _mm256_set1_epi8(static_cast<char>(0x80)));
  } else {
    const int v = q & 3;
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 64 * v + 32 * half));
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256i w = q < 4 ? _mm256_and_si256(raw, low4) : _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
    if constexpr (L::kQ5) {
      uint64_t qh;
      __builtin_memcpy(&qh, rec + L::kQsBytes + 8 * (2 * v + (q >> 2)), 8);
      w = _mm256_or_si256(w, fifth_bits(static_cast<uint32_t>(qh >> (32 * half))));
    }
    return w;
  }
}

// How a tile gets Q5_0/Q5_1's 5-bit weights. Putting each vector's fifth bits back costs ~7
// operations per 16 rows, as much as the vpmaddubsw work of a 4-row tile, and every tile of a
// group repeated it: at m > 4 the first tile now writes the unpacked vectors of the group to a
// per-thread scratch (512 bytes per block: 14 KB at 896 columns, in L1) and the later tiles load
// them (Qwen2.5-0.5B's Q5_0 gate/up at m = 16 on Zen 3: see bench/LOG.md).
enum class Unpacked { kCompute, kComputeAndWrite, kRead };

// y[i0 + j][16 outputs of the group] for j < R; lanes outside store[h] (half h) are not written.
template <DType T, int R, Unpacked kU = Unpacked::kCompute>
void group_tile(const MatmulArgs& a, const uint8_t* group, int64_t nb, int64_t i0, float* y_out,
                const __m256i store[2], bool stream, uint8_t* scratch = nullptr) {
  using L = Layout<T>;
  // 16-bit partial sums of this many weight vectors stay exact (see the top of the file).
  constexpr int kRun = L::kQ8 ? 1 : L::kQ5 ? 4 : 8;
  const size_t record = packed_record_bytes(T);
  const __m256i ones16 = _mm256_set1_epi16(1);
  __m256 y[2][R];
  for (int j = 0; j < R; ++j) y[0][j] = y[1][j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* rec = group + static_cast<size_t>(b) * record;
    // The first tile of a group streams its records from memory (the weights are read once per
    // call); later tiles re-read them from L1.
    if (stream) {
      for (size_t line = 0; line < record; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(rec + kPrefetchRecords * record + line), _MM_HINT_T0);
      }
    }
    __m256i isum[2][R];
    for (int j = 0; j < R; ++j) isum[0][j] = isum[1][j] = _mm256_setzero_si256();
    for (int q0 = 0; q0 < 8; q0 += kRun) {
      __m256i run[2][R];
      for (int j = 0; j < R; ++j) run[0][j] = run[1][j] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int q = q0; q < q0 + kRun; ++q) {
        __m256i w0, w1;
        if constexpr (kU == Unpacked::kRead) {
          const uint8_t* unpacked = scratch + static_cast<size_t>(b) * 512 + 64 * q;
          w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(unpacked));
          w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(unpacked + 32));
        } else {
          w0 = weights<T>(rec, 0, q);
          w1 = weights<T>(rec, 1, q);
          if constexpr (kU == Unpacked::kComputeAndWrite) {
            uint8_t* unpacked = scratch + static_cast<size_t>(b) * 512 + 64 * q;
            _mm256_store_si256(reinterpret_cast<__m256i*>(unpacked), w0);
            _mm256_store_si256(reinterpret_cast<__m256i*>(unpacked + 32), w1);
          }
        }
        const __m256i wu0 = L::kQ8 ? _mm256_sign_epi8(w0, w0) : w0;
        const __m256i wu1 = L::kQ8 ? _mm256_sign_epi8(w1, w1) : w1;
        for (int j = 0; j < R; ++j) {
          int32_t x4;
          __builtin_memcpy(&x4, a.xq + (i0 + j) * a.cols + b * kQk + 4 * q, 4);
          const __m256i x = _mm256_set1_epi32(x4);
          const __m256i x0 = L::kQ8 ? _mm256_sign_epi8(x, w0) : x;
          const __m256i x1 = L::kQ8 ? _mm256_sign_epi8(x, w1) : x;
          run[0][j] = _mm256_add_epi16(run[0][j], _mm256_maddubs_epi16(wu0, x0));
          run[1][j] = _mm256_add_epi16(run[1][j], _mm256_maddubs_epi16(wu1, x1));
          // Keeps the chains chains: GCC otherwise reassociates the integer adds into a tree that
          // holds all the products at once and spills them to the stack.
          asm("" : "+x"(run[0][j]), "+x"(run[1][j]));
        }
      }
      for (int h = 0; h < 2; ++h) {
        for (int j = 0; j < R; ++j) isum[h][j] = _mm256_add_epi32(isum[h][j], _mm256_madd_epi16(run[h][j], ones16));
      }
    }
    for (int h = 0; h < 2; ++h) {
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + L::kScaleAt + 16 * h)));
      __m256 mw = _mm256_setzero_ps();
      if constexpr (L::kMin) {
        mw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + L::kScaleAt + 32 + 16 * h)));
      }
      for (int j = 0; j < R; ++j) {
        const int64_t blk = (i0 + j) * nb + b;
        // Q8_0 already has its signed dot; Q4_0 and Q5_0 take their offset back off as an integer.
        if constexpr (L::kOffset != 0 && !L::kQ8) {
          isum[h][j] = _mm256_sub_epi32(isum[h][j], _mm256_set1_epi32(L::kOffset * a.xsum[blk]));
        }
        y[h][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[h][j]), _mm256_mul_ps(dw, _mm256_set1_ps(a.xd[blk])), y[h][j]);
        if constexpr (L::kMin) y[h][j] = _mm256_fmadd_ps(mw, _mm256_set1_ps(a.xs[blk]), y[h][j]);
      }
    }
  }
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < R; ++j) _mm256_maskstore_ps(y_out + 8 * h + (i0 + j) * a.rows, store[h], y[h][j]);
  }
}

// All tiles of one group at m > 4 (Q5_0, Q5_1): see Unpacked. Out of line: inlined into packed(),
// GCC kept the other tiles' 16-bit chains in stack slots (Q5_0 m = 1 fell ~25%).
template <DType T>
__attribute__((noinline)) void group_via_scratch(const MatmulArgs& a, const uint8_t* group, int64_t nb, float* y_out,
                                                 const __m256i store[2]) {
  thread_local AlignedVector<uint8_t> scratch;
  if (scratch.size() < static_cast<size_t>(nb) * 512) scratch.resize(static_cast<size_t>(nb) * 512);
  uint8_t* s = scratch.data();
  group_tile<T, kTileRows, Unpacked::kComputeAndWrite>(a, group, nb, 0, y_out, store, true, s);
  int64_t i0 = kTileRows;
  for (; i0 + kTileRows <= a.m; i0 += kTileRows) group_tile<T, kTileRows, Unpacked::kRead>(a, group, nb, i0, y_out, store, false, s);
  switch (a.m - i0) {  // the tail in one tile of exactly its rows
    case 3: group_tile<T, 3, Unpacked::kRead>(a, group, nb, i0, y_out, store, false, s); break;
    case 2: group_tile<T, 2, Unpacked::kRead>(a, group, nb, i0, y_out, store, false, s); break;
    case 1: group_tile<T, 1, Unpacked::kRead>(a, group, nb, i0, y_out, store, false, s); break;
    default: break;
  }
}

template <DType T>
void packed(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
  const int64_t nb = a.cols / kQk;
  const size_t group_bytes = static_cast<size_t>(nb) * packed_record_bytes(T);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t g = r_begin / kPackRows; g * kPackRows < r_end; ++g) {
    const uint8_t* group = a.packed + static_cast<size_t>(g) * group_bytes;
    __m256i store[2];
    for (int half = 0; half < 2; ++half) {
      // Lanes [lo, hi) of half h are this call's rows: all bits set there (maskstore reads the sign).
      const int64_t first = g * kPackRows + 8 * half;  // the weight row of lane 0
      const int64_t lo = std::max<int64_t>(r_begin - first, 0), hi = std::min<int64_t>(r_end - first, 8);
      store[half] = _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(hi)), lane),
                                     _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(static_cast<int>(lo) - 1)));
    }
    float* y_out = a.y + g * kPackRows;
    if constexpr (Layout<T>::kQ5) {
      if (a.m > kTileRows) {
        group_via_scratch<T>(a, group, nb, y_out, store);
        continue;
      }
    }
    int64_t i0 = 0;
    bool stream = true;
    for (; i0 + kTileRows <= a.m; i0 += kTileRows, stream = false) {
      group_tile<T, kTileRows>(a, group, nb, i0, y_out, store, stream);
    }
    switch (a.m - i0) {  // the tail in one tile of exactly its rows
      case 3: group_tile<T, 3>(a, group, nb, i0, y_out, store, stream); break;
      case 2: group_tile<T, 2>(a, group, nb, i0, y_out, store, stream); break;
      case 1: group_tile<T, 1>(a, group, nb, i0, y_out, store, stream); break;
      default: break;
    }
  }
}

}  // namespace

bool packed_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
  return a.packed != nullptr &&
         with_packed_type(a.type, [&](auto t) { packed<decltype(t)::value>(a, r_begin, r_end); });
}

}  // namespace tessera::kernels::avx2
