// AVX2 K-quant matmul (Q4_K, Q5_K, Q6_K), used at the avx2 and avx512 levels. Per super-block the
// exact integer sums isum = sum_j scale_j * dot_j and msum = sum_j min_j * xsum_j of
// matmul_canon.h are computed with maddubs/madd (int16 products scaled by madd with the sub-block
// scale), then the same two fmas as the scalar kernel: the result is bit-identical to it.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/matmul_canon.h"
#include "kernels/quant_blocks.h"
#include "kernels/x86/matmul_kquant_avx2.h"

namespace tessera::kernels::avx2 {
namespace {

constexpr int64_t kRowChunk = 8;  // weight rows kept hot in L1 while every activation row passes
constexpr int64_t kPrefetchRows = 4;  // software prefetch distance, in weight rows

inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Q4_K / Q5_K super-block against 256 activations: returns isum, writes msum.
template <bool kQ5>
inline int32_t dot_q45k(const uint8_t* scales, const uint8_t* qs, const uint8_t* qh,
                        const int8_t* xq, const int32_t* bsums, int32_t* msum) {
  int sc[8], mn[8];
  for (int j = 0; j < 8; ++j) scale_min_k4(j, scales, &sc[j], &mn[j]);
  int32_t m = 0;
  for (int j = 0; j < 8; ++j) m += mn[j] * (bsums[2 * j] + bsums[2 * j + 1]);
  *msum = m;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256i acc = _mm256_setzero_si256();
  const __m256i hbits = kQ5 ? load32(qh) : _mm256_setzero_si256();
  for (int c = 0; c < 4; ++c) {
    const __m256i q = load32(qs + 32 * c);
    __m256i lo = _mm256_and_si256(q, low4);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
    if constexpr (kQ5) {
      const __m256i one = _mm256_set1_epi8(1);
      lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c), one), 4));
      hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c + 1), one), 4));
    }
    const __m256i p_lo = _mm256_maddubs_epi16(lo, load32(xq + 64 * c));
    const __m256i p_hi = _mm256_maddubs_epi16(hi, load32(xq + 64 * c + 32));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p_lo, _mm256_set1_epi16(static_cast<int16_t>(sc[2 * c]))));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p_hi, _mm256_set1_epi16(static_cast<int16_t>(sc[2 * c + 1]))));
  }
  return hsum_i32(acc);
}

// Q6_K super-block: sum_j scale_j * sum_l (q - 32) * x = sum_j scale_j * (dot_j - 32 * xsum_j).
inline int32_t dot_q6k(const BlockQ6_K* b, const int8_t* xq, const int32_t* bsums) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), three = _mm256_set1_epi8(3);
  __m256i acc = _mm256_setzero_si256();
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = b->ql + 64 * half;
    const __m256i qh = load32(b->qh + 32 * half);
    const __m256i l0 = load32(ql), l1 = load32(ql + 32);
    for (int quarter = 0; quarter < 4; ++quarter) {
      const __m256i lbytes = (quarter & 1) ? l1 : l0;
      const __m256i lo4 = quarter < 2 ? _mm256_and_si256(lbytes, low4)
                                      : _mm256_and_si256(_mm256_srli_epi16(lbytes, 4), low4);
      const __m256i hi2 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * quarter), three);
      const __m256i q = _mm256_or_si256(lo4, _mm256_slli_epi16(hi2, 4));  // 0..63
      const int e0 = 128 * half + 32 * quarter;
      const __m256i p = _mm256_maddubs_epi16(q, load32(xq + e0));
      const __m256i s = _mm256_set_m128i(_mm_set1_epi16(b->scales[e0 / 16 + 1]),
                                         _mm_set1_epi16(b->scales[e0 / 16]));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, s));
    }
  }
  int32_t correction = 0;
  for (int j = 0; j < 16; ++j) correction += int32_t{b->scales[j]} * bsums[j];
  return hsum_i32(acc) - 32 * correction;
}

float dot_row(const MatmulArgs& a, const uint8_t* wrow, int64_t i) {
  const int64_t nb = a.cols / kQkK;
  const int8_t* xq = a.xq + i * a.cols;
  const float* xd = a.xd + i * nb;
  const int32_t* bsums = a.xbsums + i * (a.cols / 16);
  float y = 0.0f;
  const size_t block_bytes = dtype_block_bytes(a.type);
  for (int64_t b = 0; b < nb; ++b) {
    // Stream the row kPrefetchRows ahead into L2 (m = 1 over a large matrix is a DRAM read).
    for (size_t off = 0; off < block_bytes; off += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(wrow + kPrefetchRows * a.row_bytes + b * block_bytes + off), _MM_HINT_T1);
    }
    int32_t isum = 0, msum = 0;
    float d = 0.0f, dmin = 0.0f;
    if (a.type == DType::Q4_K) {
      const auto* blk = reinterpret_cast<const BlockQ4_K*>(wrow) + b;
      d = _cvtsh_ss(blk->d), dmin = _cvtsh_ss(blk->dmin);
      isum = dot_q45k<false>(blk->scales, blk->qs, nullptr, xq + b * kQkK, bsums + b * 16, &msum);
    } else if (a.type == DType::Q5_K) {
      const auto* blk = reinterpret_cast<const BlockQ5_K*>(wrow) + b;
      d = _cvtsh_ss(blk->d), dmin = _cvtsh_ss(blk->dmin);
      isum = dot_q45k<true>(blk->scales, blk->qs, blk->qh, xq + b * kQkK, bsums + b * 16, &msum);
    } else {
      const auto* blk = reinterpret_cast<const BlockQ6_K*>(wrow) + b;
      d = _cvtsh_ss(blk->d);
      isum = dot_q6k(blk, xq + b * kQkK, bsums + b * 16);
    }
    y = std::fma(static_cast<float>(isum), d * xd[b], y);
    y = std::fma(-static_cast<float>(msum), dmin * xd[b], y);
  }
  return y;
}

}  // namespace

bool matmul_rows_kquant(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
  if (a.type != DType::Q4_K && a.type != DType::Q5_K && a.type != DType::Q6_K) return false;
  for (int64_t r0 = r_begin; r0 < r_end; r0 += kRowChunk) {
    const int64_t r1 = std::min(r_end, r0 + kRowChunk);
    for (int64_t i = 0; i < a.m; ++i) {
      for (int64_t r = r0; r < r1; ++r) {
        a.y[i * a.rows + r] = dot_row(a, a.w + static_cast<size_t>(r) * a.row_bytes, i);
      }
    }
  }
  return true;
}

}  // namespace tessera::kernels::avx2
