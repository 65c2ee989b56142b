// AVX2 matmul kernels on the GGUF layout. 32-block weights: 8 weight rows at a time; per block and
// row the int32 lanes of maddubs + madd (weights as unsigned bytes, the sign moved onto the
// activations for signed types) are summed across lanes into one vector of 8 row dots, and one
// fma per block advances the 8 outputs' canonical float chains (matmul_canon.h). Float weights:
// two 8-lane accumulators (columns c % 16 < 8 and >= 8). K-quants: x86/matmul_kquant_avx2.cpp.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/matmul_canon.h"
#include "kernels/quant_blocks.h"
#include "kernels/x86/avx2_helpers.h"
#include "kernels/x86/matmul_kquant_avx2.h"

namespace tessera::kernels::avx2 {
namespace {

constexpr int kTile = 4;          // activation rows sharing one unpacked weight block
constexpr int64_t kRowChunk = 8;  // weight rows kept hot in L1 while every tile passes
constexpr int64_t kPrefetchRows = 4;  // software prefetch distance, in weight rows

inline float hsum_canonical(__m256 even, __m256 odd) {
  const __m256 v = _mm256_add_ps(even, odd);
  const __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 u = _mm_add_ps(t, _mm_movehl_ps(t, t));
  return _mm_cvtss_f32(_mm_add_ss(u, _mm_movehdup_ps(u)));
}

constexpr bool signed_weights(DType t) {
  return t == DType::Q4_0 || t == DType::Q5_0 || t == DType::Q8_0;
}

inline __m256i nibbles(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
}

template <DType T>
inline __m256i unpack(const uint8_t* w, float* dw, float* mw) {
  if constexpr (T == DType::Q8_0) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(w);
    *dw = _cvtsh_ss(b->d);
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs));
  } else if constexpr (T == DType::Q4_0) {
    const auto* b = reinterpret_cast<const BlockQ4_0*>(w);
    *dw = _cvtsh_ss(b->d);
    return _mm256_sub_epi8(nibbles(b->qs), _mm256_set1_epi8(8));
  } else if constexpr (T == DType::Q4_1) {
    const auto* b = reinterpret_cast<const BlockQ4_1*>(w);
    *dw = _cvtsh_ss(b->d), *mw = _cvtsh_ss(b->m);
    return nibbles(b->qs);
  } else {
    using Block = std::conditional_t<T == DType::Q5_0, BlockQ5_0, BlockQ5_1>;
    const auto* b = reinterpret_cast<const Block*>(w);
    *dw = _cvtsh_ss(b->d);
    if constexpr (T == DType::Q5_1) *mw = _cvtsh_ss(b->m);
    const __m256i q5 = _mm256_or_si256(nibbles(b->qs), fifth_bits(load_qh(b->qh)));
    if constexpr (T == DType::Q5_0) return _mm256_sub_epi8(q5, _mm256_set1_epi8(16));
    return q5;
  }
}

// Lane k = the sum of v[k]'s 8 lanes (exact integer adds, so any order gives the canonical isum).
inline __m256i reduce8x8(const __m256i v[8]) {
  const __m256i h0123 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  const __m256i h4567 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
  // h0123 = [rows 0..3, elements 0..3 | rows 0..3, elements 4..7]; the same for rows 4..7.
  return _mm256_add_epi32(_mm256_permute2x128_si256(h0123, h4567, 0x20),
                          _mm256_permute2x128_si256(h0123, h4567, 0x31));
}

// The fp16 field at byte `offset` of block b of each of 8 rows, as floats (lane k = row k).
inline __m256 load_field8(const uint8_t* const w[8], size_t offset) {
  alignas(16) uint16_t h[8];
  for (int k = 0; k < 8; ++k) __builtin_memcpy(&h[k], w[k] + offset, 2);
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
}

// y[i0 + j][r0 + k] for j < R, k < 8 (rows past r_end are computed from a repeated valid row and
// not stored). Canonical order: per output one float chain over blocks; 8 outputs (lane k = weight
// row k) share each fma.
template <DType T, int R>
void block32_rows(const MatmulArgs& a, int64_t r0, int64_t r_end, int64_t i0) {
  constexpr bool kSigned = signed_weights(T);
  constexpr bool kMin = T == DType::Q4_1 || T == DType::Q5_1;
  const size_t block_bytes = dtype_block_bytes(T);
  const int64_t nb = a.cols / kQk, num_rows = std::min<int64_t>(8, r_end - r0);
  const __m256i ones16 = _mm256_set1_epi16(1);
  const uint8_t* w[8];
  for (int k = 0; k < 8; ++k) w[k] = a.w + static_cast<size_t>(r0 + std::min<int64_t>(k, num_rows - 1)) * a.row_bytes;
  __m256 y[R];
  for (int j = 0; j < R; ++j) y[j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const size_t off = static_cast<size_t>(b) * block_bytes;
    const __m256 dw = load_field8(w, off);
    __m256 mw = _mm256_setzero_ps();
    if constexpr (kMin) mw = load_field8(w, off + 2);
    for (int j = 0; j < R; ++j) {
      const int8_t* xb = a.xq + (i0 + j) * a.cols + b * kQk;
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb));
      __m256i lanes[8];
      for (int k = 0; k < 8; ++k) {
        float unused_d, unused_m;
        __m256i wq = unpack<T>(w[k] + off, &unused_d, &unused_m);
        __m256i x = xv;
        if constexpr (kSigned) {  // maddubs wants unsigned weights: move the sign onto x
          x = _mm256_sign_epi8(xv, wq);
          wq = _mm256_sign_epi8(wq, wq);
        }
        lanes[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(wq, x), ones16);
      }
      const float dx = a.xd[(i0 + j) * nb + b];
      y[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(reduce8x8(lanes)), _mm256_mul_ps(dw, _mm256_set1_ps(dx)), y[j]);
      if constexpr (kMin) y[j] = _mm256_fmadd_ps(mw, _mm256_set1_ps(a.xs[(i0 + j) * nb + b]), y[j]);
    }
  }
  for (int j = 0; j < R; ++j) {
    alignas(32) float out[8];
    _mm256_store_ps(out, y[j]);
    for (int64_t k = 0; k < num_rows; ++k) a.y[(i0 + j) * a.rows + r0 + k] = out[k];
  }
}

template <DType T>
inline __m256 load8(const uint8_t* wrow, int64_t c) {
  if constexpr (T == DType::F32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(wrow) + c);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(wrow) + c));
    if constexpr (T == DType::F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

template <DType T, int R>
void float_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end, int64_t i0) {
  for (int64_t r = r_begin; r < r_end; ++r) {
    const uint8_t* wrow = a.w + static_cast<size_t>(r) * a.row_bytes;
    __m256 acc[R][2];
    for (int j = 0; j < R; ++j) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
    const size_t esize = T == DType::F32 ? 4 : 2;
    for (int64_t c = 0; c < a.cols; c += 16) {
      if ((c * esize) % 64 == 0) {
        _mm_prefetch(reinterpret_cast<const char*>(wrow + kPrefetchRows * a.row_bytes + c * esize), _MM_HINT_T1);
      }
      const __m256 w0 = load8<T>(wrow, c), w1 = load8<T>(wrow, c + 8);
      for (int j = 0; j < R; ++j) {
        const float* x = a.x + (i0 + j) * a.cols + c;
        acc[j][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x), acc[j][0]);
        acc[j][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + 8), acc[j][1]);
      }
    }
    for (int j = 0; j < R; ++j) a.y[(i0 + j) * a.rows + r] = hsum_canonical(acc[j][0], acc[j][1]);
  }
}

// Calls tile.template operator()<R>(i0) over the activation rows: tiles of kTile rows, then one
// tail tile of 3, 2 or 1 rows.
template <typename Tile>
void over_activation_tiles(int64_t m, Tile&& tile) {
  int64_t i0 = 0;
  for (; i0 + kTile <= m; i0 += kTile) tile.template operator()<kTile>(i0);
  switch (m - i0) {
    case 3: tile.template operator()<3>(i0); break;
    case 2: tile.template operator()<2>(i0); break;
    case 1: tile.template operator()<1>(i0); break;
    default: break;
  }
}

// Float weights: chunks of kRowChunk weight rows (they stay in L1) against every tile of activation
// rows.
template <DType T>
void float_tiles(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
  for (int64_t r0 = r_begin; r0 < r_end; r0 += kRowChunk) {
    const int64_t r1 = std::min(r_end, r0 + kRowChunk);
    over_activation_tiles(a.m, [&]<int R>(int64_t i0) { float_rows<T, R>(a, r0, r1, i0); });
  }
}

// 32-block weights: groups of 8 weight rows against every tile of activation rows.
template <DType T>
void block32_tiles(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
  for (int64_t r0 = r_begin; r0 < r_end; r0 += 8) {
    over_activation_tiles(a.m, [&]<int R>(int64_t i0) { block32_rows<T, R>(a, r0, r_end, i0); });
  }
}

}  // namespace

bool matmul_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
  const bool cols16 = a.cols % 16 == 0;
  switch (a.type) {
    case DType::Q4_0: block32_tiles<DType::Q4_0>(a, r_begin, r_end); return true;
    case DType::Q4_1: block32_tiles<DType::Q4_1>(a, r_begin, r_end); return true;
    case DType::Q5_0: block32_tiles<DType::Q5_0>(a, r_begin, r_end); return true;
    case DType::Q5_1: block32_tiles<DType::Q5_1>(a, r_begin, r_end); return true;
    case DType::Q8_0: block32_tiles<DType::Q8_0>(a, r_begin, r_end); return true;
    case DType::F32: if (!cols16) return false; float_tiles<DType::F32>(a, r_begin, r_end); return true;
    case DType::F16: if (!cols16) return false; float_tiles<DType::F16>(a, r_begin, r_end); return true;
    case DType::BF16: if (!cols16) return false; float_tiles<DType::BF16>(a, r_begin, r_end); return true;
    default: return matmul_rows_kquant(a, r_begin, r_end);
  }
}

}  // namespace tessera::kernels::avx2
