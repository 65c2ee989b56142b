// AVX2 kernel for the K-quants (Q4_K, Q5_K, Q6_K) over the packed layout of matmul_pack.h, for
// CPUs without AVX-512 VNNI: the twin of x86/matmul_packed_kquant_avx512.cpp, in the manner of
// x86/matmul_packed_avx2.cpp (a 16-row group read as two halves of 8 rows, lane r of a 256-bit
// vector = 4 consecutive weights of row 8h + r).
//
// Per sub-block and activation row: vpmaddubsw of the unsigned weights with the broadcast
// activation dword gives pair sums in 16 bits, added over a run of vectors while they stay exact
// (activations in [-127, 127]; one lane <= 2 x 15 x 127 = 3810 for Q4_K, 8 of them 30480; 2 x 31 x
// 127 = 7874 for Q5_K, 4 of them 31496; 2 x 63 x 127 = 16002 for Q6_K, 2 of them 32004), then one
// vpmaddwd by the int16 pair (sc, sc) of each row's sub-block scale applies the scale and widens
// to 32 bits at once: sc * (a + b) <= 128 x 64008, exact. Mins (Q4_K/Q5_K) and Q6_K's -32 offset
// are one vpmaddwd of int16 pairs against the activation's per-16 sums, as the AVX-512 kernel's
// vpdpwssd. The float steps are the canonical ones (matmul_canon.h): same bits as matmul_ref.
#include <immintrin.h>

#include <algorithm>
#include <vector>

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
// 8 bytes at p (rows 8h..8h+7 of one sub-block's scales or mins) as int16 pairs (s, s).
template <bool kSigned>
inline __m256i dup_pairs(const uint8_t* p) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m256i s = kSigned ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
  return _mm256_or_si256(_mm256_and_si256(s, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(s, 16));
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

template <DType T, int R>
void group_tile(const MatmulArgs& a, const int32_t* bsum16, const uint8_t* group, int64_t nb, int64_t i0,
                float* y_out, const __m256i store[2], bool stream, NextGroup next) {
  using L = PackedKLayout<T>;
  // Weight vectors per 16-bit run (see the top of the file) and per sub-block.
  constexpr int kRun = L::kQ6 ? 2 : L::kQ5 ? 4 : 8;
  constexpr int kVecs = L::kQ6 ? 4 : 8;
  constexpr int kSubBlocks = L::kQ6 ? 16 : 8;
  const int64_t pairs_per_row = a.cols / 32;
  __m256 y[2][R];
  for (int j = 0; j < R; ++j) y[0][j] = y[1][j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* rec = group + static_cast<size_t>(b) * L::kBytes;
    // Q4_K/Q5_K: the first tile streams the records from memory, kPrefetchRecords ahead; Q6_K: every
    // tile fetches its share of the next group (packed_prefetch.h) instead. Measured one thread from
    // DRAM (bench_matmul cold, 4864->896): Q6_K m = 16 124 -> 183, m = 4 60 -> 100, m = 1 22 -> 30
    // GOP per CPU second; Q4_K m = 16 fell 140-156 -> 108 with it (with or without the near
    // prefetch), so Q4_K/Q5_K keep the near one alone.
    if constexpr (L::kQ6) {
      next.fetch(b, L::kBytes);
    } else if (stream) {
      for (size_t line = 0; line < L::kBytes; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(rec + kPrefetchRecords * L::kBytes + line), _MM_HINT_T0);
      }
    }
    __m256i isum[2][R];
    for (int j = 0; j < R; ++j) isum[0][j] = isum[1][j] = _mm256_setzero_si256();
    for (int sb = 0; sb < kSubBlocks; ++sb) {
      const __m256i sc[2] = {dup_pairs<L::kQ6>(rec + L::kScAt + 16 * sb), dup_pairs<L::kQ6>(rec + L::kScAt + 16 * sb + 8)};
      [[maybe_unused]] __m256i q6w[4][2];  // Q6_K: the sub-block's 4 weight vectors, rows 8h.. in [v][h]
      if constexpr (L::kQ6) {
        for (int h = 0; h < 2; ++h) unpack_q6_half(rec + 192 * sb + 32 * h, q6w, h);
      }
      for (int v0 = 0; v0 < kVecs; v0 += kRun) {
        __m256i run[2][R];
        for (int j = 0; j < R; ++j) run[0][j] = run[1][j] = _mm256_setzero_si256();
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
    if constexpr (L::kQ6) {  // the -32 offset: int16 pairs (-32 sc_{2p}, -32 sc_{2p+1})
      for (int p = 0; p < 8; ++p) {
        for (int h = 0; h < 2; ++h) {
          const auto load8 = [&](size_t at) {
            return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(rec + at)));
          };
          const __m256i lo = _mm256_slli_epi32(load8(L::kScAt + 32 * p + 8 * h), 5);
          const __m256i hi = _mm256_slli_epi32(load8(L::kScAt + 32 * p + 16 + 8 * h), 21);
          const __m256i neg = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_blend_epi16(lo, hi, 0xAA));
          for (int j = 0; j < R; ++j) {
            const __m256i bs = _mm256_set1_epi32(bsum16[(i0 + j) * pairs_per_row + b * 8 + p]);
            isum[h][j] = _mm256_add_epi32(isum[h][j], _mm256_madd_epi16(neg, bs));
          }
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
          __m256i msum = _mm256_setzero_si256();
          for (int sb = 0; sb < 8; ++sb) {
            const __m256i bs = _mm256_set1_epi32(bsum16[(i0 + j) * pairs_per_row + b * 8 + sb]);
            msum = _mm256_add_epi32(msum, _mm256_madd_epi16(dup_pairs<false>(rec + L::kMnAt + 16 * sb + 8 * h), bs));
          }
          const __m256 dx = _mm256_set1_ps(a.xd[(i0 + j) * nb + b]);
          y[h][j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dmin, dx), y[h][j]);
        }
      }
    }
  }
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < R; ++j) _mm256_maskstore_ps(y_out + 8 * h + (i0 + j) * a.rows, store[h], y[h][j]);
  }
}

template <DType T>
void packed(const MatmulArgs& a, const int32_t* bsum16, int64_t r_begin, int64_t r_end) {
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
      group_tile<T, kTileRows>(a, bsum16, group, nb, i0, y_out, store, stream, next);
    }
    switch (a.m - i0) {  // the tail in one tile of exactly its rows
      case 3: group_tile<T, 3>(a, bsum16, group, nb, i0, y_out, store, stream, next); break;
      case 2: group_tile<T, 2>(a, bsum16, group, nb, i0, y_out, store, stream, next); break;
      case 1: group_tile<T, 1>(a, bsum16, group, nb, i0, y_out, store, stream, next); break;
      default: break;
    }
  }
}

// a.xbsums as int16 pairs (bsum_{2k}, bsum_{2k+1}) in a per-thread buffer that only grows.
const int32_t* bsum16_pairs(const MatmulArgs& a) {
  thread_local std::vector<int16_t> buf;
  const size_t n = static_cast<size_t>(a.m * (a.cols / 16));
  if (buf.size() < n) buf.resize(n);
  for (size_t i = 0; i < n; ++i) buf[i] = static_cast<int16_t>(a.xbsums[i]);
  return reinterpret_cast<const int32_t*>(buf.data());
}

}  // namespace

bool packed_kquant_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
  if (a.packed == nullptr || !is_kquant(a.type)) return false;
  const int32_t* bsum16 = bsum16_pairs(a);
  switch (a.type) {
    case DType::Q4_K: packed<DType::Q4_K>(a, bsum16, r_begin, r_end); break;
    case DType::Q5_K: packed<DType::Q5_K>(a, bsum16, r_begin, r_end); break;
    default: packed<DType::Q6_K>(a, bsum16, r_begin, r_end); break;
  }
  return true;
}

}  // namespace tessera::kernels::avx2
