// AVX2 kernel for the K-quants (Q4_K, Q5_K, Q6_K) over the packed layout of matmul_pack.h, for
// CPUs without AVX-512 VNNI: the twin of x86/matmul_packed_kquant_avx512.cpp, in the manner of
// x86/matmul_packed_avx2.cpp (a 16-row group read as two halves of 8 rows, lane r of a 256-bit
// vector = 4 consecutive weights of row 8h + r).
//
// Per sub-block and activation row: vpmaddubsw of the unsigned weights with the broadcast
// activation dword gives pair sums in 16 bits, added over a run of vectors while they stay exact
// (activations in [-127, 127]; one lane <= 2 x 15 x 127 = 3810 for Q4_K, 8 of them 30480; 2 x 31 x
// 127 = 7874 for Q5_K, 4 of them 31496), then one vpmaddwd by the int16 pair (sc, sc) of each
// row's sub-block scale applies the scale and widens to 32 bits at once: sc * (a + b) <= 128 x
// 64008, exact. Q4_K/Q5_K's mins are one vpmaddwd per pair of sub-blocks: int16 pairs (mn_{2p},
// mn_{2p+1}) of each row against the activation's (sum_{2p}, sum_{2p+1}) over 32 elements.
// Q6_K's -32 offset rides in the 16-bit chains: each lane of a sub-block's one run starts at -32
// times the sum of the 8 activations it will meet (q6_chain_starts), so at every step it holds a sum of 8
// terms (q - 32) x or -32 x, each <= 32 x 127: <= 32512, exact; that saves the separate offset
// pass and half the vpmaddwd (Qwen2.5-1.5B's ffn_down, m = 1: ~76 -> ~58 vector operations per
// 16-element sub-block of 16 rows). The float steps are the canonical ones (matmul_canon.h): same
// bits as matmul_ref.
#include <immintrin.h>

#include <algorithm>

#include "kernels/matmul_canon.h"
#include "kernels/matmul_pack.h"
#include "kernels/quant_blocks.h"
#include "kernels/x86/avx2_helpers.h"
#include "kernels/x86/packed_prefetch.h"

namespace tessera::kernels::avx2 {
namespace {

constexpr int kTileRows = 4;            // activation rows per tile
constexpr size_t kPrefetchRecords = 2;  // software prefetch distance of the weight stream

inline __m256i load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i bcast(const void* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
// 16 bytes at p (one sub-block's scales of rows 0..15) as int16 pairs (s, s): [h] = rows 8h..8h+7.
template <bool kSigned>
inline void dup_pairs(const uint8_t* p, __m256i out[2]) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i lo = _mm_unpacklo_epi8(b, b), hi = _mm_unpackhi_epi8(b, b);
  out[0] = kSigned ? _mm256_cvtepi8_epi16(lo) : _mm256_cvtepu8_epi16(lo);
  out[1] = kSigned ? _mm256_cvtepi8_epi16(hi) : _mm256_cvtepu8_epi16(hi);
}
// Rows 0..15 of two sub-blocks' unsigned bytes (at p and p + 16) as int16 pairs (u_a, u_b).
inline void pair_rows(const uint8_t* p, __m256i out[2]) {
  const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16));
  out[0] = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(a, b));
  out[1] = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(a, b));
}

// Rows 8h..8h+7 of one Q6_K sub-block's 3 packed vectors (matmul_pack.h; q points at half h of the
// first) -> w[v][h], its 4 vectors of 6-bit weights: vectors 0-2 are bits 0-5, vector 3 gathers
// bits 6-7 of each (the 16-bit shifts carry the next byte's low bits in; the masks drop them).
inline void unpack_q6_half(const uint8_t* q, __m256i w[4][2], int h) {
  const __m256i v0 = load(q), v1 = load(q + 64), v2 = load(q + 128);
  const __m256i low6 = _mm256_set1_epi8(0x3F);
  w[0][h] = _mm256_and_si256(v0, low6);
  w[1][h] = _mm256_and_si256(v1, low6);
  w[2][h] = _mm256_and_si256(v2, low6);
  const __m256i b0 = _mm256_and_si256(_mm256_srli_epi16(v0, 6), _mm256_set1_epi8(0x03));
  const __m256i b1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), _mm256_set1_epi8(0x0C));
  const __m256i b2 = _mm256_and_si256(_mm256_srli_epi16(v2, 2), _mm256_set1_epi8(0x30));
  w[3][h] = _mm256_or_si256(_mm256_or_si256(b0, b1), b2);
}

// noinline: inlined into one large packed_kquant_rows, GCC kept the 16-bit chains in stack slots
// (a store and a reload per vpmaddubsw: Q4_K m = 1 ran at ~55% of its speed).
template <DType T, int R>
__attribute__((noinline)) void group_tile(const MatmulArgs& a, const int32_t* sums, const uint8_t* group, int64_t nb, int64_t i0,
                float* y_out, const __m256i store[2], bool stream, NextGroup next) {
  using L = PackedKLayout<T>;
  // Weight vectors per 16-bit run (see the top of the file) and per sub-block.
  constexpr int kRun = L::kQ6 ? 4 : L::kQ5 ? 4 : 8;
  constexpr int kVecs = L::kQ6 ? 4 : 8;
  constexpr int kSubBlocks = L::kQ6 ? 16 : 8;
  const int64_t sums_per_row = a.cols / (L::kQ6 ? 16 : 64);  // int16 pairs per row: q6_chain_starts or bsum32_pairs
  __m256 y[2][R];
  for (int j = 0; j < R; ++j) y[0][j] = y[1][j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* rec = group + static_cast<size_t>(b) * L::kBytes;
    // The first tile streams the records from memory, kPrefetchRecords ahead, its prefetches spread
    // over the sub-blocks (a burst of a whole record's 37-53 lines at its start held Q4_K m = 1 from
    // DRAM to 58-76 GOP/s on Zen 3, spread 95-110; bench_matmul 2 0.3 Q4_K,Q6_K 1,4,16 8960->1536
    // cold). Q6_K: every tile also fetches its share of the next group (packed_prefetch.h). Measured
    // one thread from DRAM (4864->896): Q6_K m = 16 124 -> 183, m = 4 60 -> 100, m = 1 22 -> 30 GOP
    // per CPU second; Q4_K m = 16 fell 140-156 -> 108 with it, so Q4_K/Q5_K do without. Both
    // together lift Q6_K m = 1 44-51 -> 57-69 and m = 4 by 40-50% over the far fetch alone.
    if constexpr (L::kQ6) next.fetch(b, L::kBytes);
    __m256i isum[2][R];
    for (int j = 0; j < R; ++j) isum[0][j] = isum[1][j] = _mm256_setzero_si256();
    for (int sb = 0; sb < kSubBlocks; ++sb) {
      if (stream) {
        constexpr int kLines = static_cast<int>(L::kBytes / 64);
        for (int line = kLines * sb / kSubBlocks; line < kLines * (sb + 1) / kSubBlocks; ++line) {
          _mm_prefetch(reinterpret_cast<const char*>(rec + kPrefetchRecords * L::kBytes + 64 * line), _MM_HINT_T0);
        }
      }
      __m256i sc[2];
      dup_pairs<L::kQ6>(rec + L::kScAt + 16 * sb, sc);
      [[maybe_unused]] __m256i q6w[4][2];  // Q6_K: the sub-block's 4 weight vectors, rows 8h.. in [v][h]
      if constexpr (L::kQ6) {
        for (int h = 0; h < 2; ++h) unpack_q6_half(rec + 192 * sb + 32 * h, q6w, h);
      }
      for (int v0 = 0; v0 < kVecs; v0 += kRun) {
        __m256i run[2][R];
        for (int j = 0; j < R; ++j) {
          if constexpr (L::kQ6) {  // the -32 offset (see the top of the file)
            run[0][j] = run[1][j] = _mm256_set1_epi32(sums[(i0 + j) * sums_per_row + b * 16 + sb]);
          } else {
            run[0][j] = run[1][j] = _mm256_setzero_si256();
          }
        }
#pragma GCC unroll 8
        for (int v = v0; v < v0 + kRun; ++v) {
          __m256i w[2];
          for (int h = 0; h < 2; ++h) {
            if constexpr (L::kQ6) {
              w[h] = q6w[v][h];
            } else {
              const __m256i raw = load(rec + 512 * (sb / 2) + 64 * v + 32 * h);
              w[h] = _mm256_and_si256(sb % 2 == 0 ? raw : _mm256_srli_epi16(raw, 4), _mm256_set1_epi8(0x0F));
              if constexpr (L::kQ5) {
                uint32_t bits;  // bit 4r + t: element 4v + t of row 8h + r
                __builtin_memcpy(&bits, rec + L::kQhAt + 64 * sb + 8 * v + 4 * h, 4);
                w[h] = _mm256_or_si256(w[h], fifth_bits(bits));
              }
            }
          }
          for (int j = 0; j < R; ++j) {
            const int64_t e = L::kQ6 ? 16 * sb + 4 * v : 32 * sb + 4 * v;
            const __m256i x = bcast(a.xq + (i0 + j) * a.cols + b * kQkK + e);
            run[0][j] = _mm256_add_epi16(run[0][j], _mm256_maddubs_epi16(w[0], x));
            run[1][j] = _mm256_add_epi16(run[1][j], _mm256_maddubs_epi16(w[1], x));
            asm("" : "+x"(run[0][j]), "+x"(run[1][j]));  // keeps the chains chains (see the 32-block twin)
          }
        }
        for (int h = 0; h < 2; ++h) {
          for (int j = 0; j < R; ++j) isum[h][j] = _mm256_add_epi32(isum[h][j], _mm256_madd_epi16(run[h][j], sc[h]));
        }
      }
    }
    [[maybe_unused]] __m256i msum[2][R];  // Q4_K/Q5_K: sum_j mn_j * (activation sum of sub-block j)
    if constexpr (!L::kQ6) {
      for (int j = 0; j < R; ++j) msum[0][j] = msum[1][j] = _mm256_setzero_si256();
      for (int p = 0; p < 4; ++p) {
        __m256i mn[2];
        pair_rows(rec + L::kMnAt + 32 * p, mn);
        for (int j = 0; j < R; ++j) {
          const __m256i s = _mm256_set1_epi32(sums[(i0 + j) * sums_per_row + b * 4 + p]);
          for (int h = 0; h < 2; ++h) msum[h][j] = _mm256_add_epi32(msum[h][j], _mm256_madd_epi16(mn[h], s));
        }
      }
    }
    for (int h = 0; h < 2; ++h) {
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + L::kDAt + 16 * h)));
      for (int j = 0; j < R; ++j) {
        const __m256 dx = _mm256_set1_ps(a.xd[(i0 + j) * nb + b]);
        y[h][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[h][j]), _mm256_mul_ps(d, dx), y[h][j]);
      }
      if constexpr (!L::kQ6) {
        const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + L::kDminAt + 16 * h)));
        for (int j = 0; j < R; ++j) {
          const __m256 dx = _mm256_set1_ps(a.xd[(i0 + j) * nb + b]);
          y[h][j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum[h][j]), _mm256_mul_ps(dmin, dx), y[h][j]);
        }
      }
    }
  }
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < R; ++j) _mm256_maskstore_ps(y_out + 8 * h + (i0 + j) * a.rows, store[h], y[h][j]);
  }
}

template <DType T>
void packed(const MatmulArgs& a, const int32_t* sums, int64_t r_begin, int64_t r_end) {
  const int64_t nb = a.cols / kQkK;
  const size_t group_bytes = static_cast<size_t>(nb) * PackedKLayout<T>::kBytes;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t g = r_begin / kPackRows; g * kPackRows < r_end; ++g) {
    const uint8_t* group = a.packed + static_cast<size_t>(g) * group_bytes;
    __m256i store[2];
    for (int half = 0; half < 2; ++half) {
      const int64_t first = g * kPackRows + 8 * half;  // the weight row of lane 0
      const int64_t lo = std::max<int64_t>(r_begin - first, 0), hi = std::min<int64_t>(r_end - first, 8);
      store[half] = _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(hi)), lane),
                                     _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(static_cast<int>(lo) - 1)));
    }
    float* y_out = a.y + g * kPackRows;
    const int tiles = static_cast<int>((a.m + kTileRows - 1) / kTileRows);
    NextGroup next = next_group(group, group_bytes, g, r_end, kPackRows, tiles);
    int64_t i0 = 0;
    bool stream = true;
    for (; i0 + kTileRows <= a.m; i0 += kTileRows, stream = false, ++next.index) {
      group_tile<T, kTileRows>(a, sums, group, nb, i0, y_out, store, stream, next);
    }
    switch (a.m - i0) {  // the tail in one tile of exactly its rows
      case 3: group_tile<T, 3>(a, sums, group, nb, i0, y_out, store, stream, next); break;
      case 2: group_tile<T, 2>(a, sums, group, nb, i0, y_out, store, stream, next); break;
      case 1: group_tile<T, 1>(a, sums, group, nb, i0, y_out, store, stream, next); break;
      default: break;
    }
  }
}

// Q6_K's chain starts: [m][cols / 16] int16 pairs (-32 sum_a, -32 sum_b), sum_a over the elements
// 4v, 4v + 1 and sum_b over 4v + 2, 4v + 3 (v < 4) of each 16-element sub-block: the two int16
// lanes one vpmaddubsw chain of a row meets (|.| <= 32 x 8 x 127 = 32512). Built once per call and
// thread (DerivedTable, as bsum32_pairs for Q4_K/Q5_K's mins).
const int32_t* q6_chain_starts(const MatmulArgs& a) {
  thread_local DerivedTable table;
  const int64_t per_row = a.cols / 16;
  return table.get(a, a.cols, static_cast<size_t>(a.m * per_row), [&](int32_t* t) {
    for (int64_t i = 0; i < a.m; ++i) {
      const int8_t* x = a.xq + i * a.cols;
      for (int64_t k = 0; k < per_row; ++k, x += 16) {
        int32_t sa = 0, sb = 0;
        for (int e = 0; e < 16; e += 4) {
          sa += x[e] + x[e + 1];
          sb += x[e + 2] + x[e + 3];
        }
        t[i * per_row + k] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(-32 * sa)) |
                                                  (static_cast<uint32_t>(static_cast<uint16_t>(-32 * sb)) << 16));
      }
    }
  });
}

}  // namespace

bool packed_kquant_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
  if (a.packed == nullptr || !is_kquant(a.type)) return false;
  const int32_t* sums = a.type == DType::Q6_K ? q6_chain_starts(a) : bsum32_pairs(a);
  switch (a.type) {
    case DType::Q4_K: packed<DType::Q4_K>(a, sums, r_begin, r_end); break;
    case DType::Q5_K: packed<DType::Q5_K>(a, sums, r_begin, r_end); break;
    default: packed<DType::Q6_K>(a, sums, r_begin, r_end); break;
  }
  return true;
}

}  // namespace tessera::kernels::avx2
