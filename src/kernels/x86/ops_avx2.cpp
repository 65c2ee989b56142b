// AVX2+FMA element-wise ops. exp is x86/ops_exp.h's polynomial on 8 lanes.
#include "kernels/x86/ops_avx2.h"

#include <immintrin.h>

#include <cmath>

#include "kernels/x86/avx2_helpers.h"
#include "kernels/x86/ops_exp.h"
#include "util/fp16.h"

namespace tessera::kernels::avx2 {
namespace {

// exp_poly's operations on 8 lanes (x86/ops_exp.h).
struct Ops8 {
  using V = __m256;
  static V set1(float v) { return _mm256_set1_ps(v); }
  static V min(V a, V b) { return _mm256_min_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V round(V a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V fnmadd(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
  static V pow2(V n) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
  }
};

inline __m256 exp256(__m256 x) { return x86::exp_poly<Ops8>(x); }

}  // namespace

void rmsnorm(const float* x, const float* weight, float eps, float* out, int64_t n,
             int64_t num_rows) {
  for (int64_t r = 0; r < num_rows; ++r) {
    const float* xr = x + r * n;
    float* yr = out + r * n;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m256 a = _mm256_loadu_ps(xr + i), b = _mm256_loadu_ps(xr + i + 8);
      acc0 = _mm256_fmadd_ps(a, a, acc0);
      acc1 = _mm256_fmadd_ps(b, b, acc1);
    }
    float sum = hsum(_mm256_add_ps(acc0, acc1));
    for (; i < n; ++i) sum += xr[i] * xr[i];
    const float inv = 1.0f / std::sqrt(sum / static_cast<float>(n) + eps);
    const __m256 vinv = _mm256_set1_ps(inv);
    i = 0;
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_ps(yr + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + i), vinv),
                                             _mm256_loadu_ps(weight + i)));
    }
    for (; i < n; ++i) yr[i] = xr[i] * inv * weight[i];
  }
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), g));
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void add_inplace(float* x, const float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) x[i] += y[i];
}

// vcvtps2ph rounds to nearest even like fp32_to_fp16 for every finite input and infinity; only a
// NaN's payload bits differ, so a vector holding a NaN goes through the scalar conversion.
void fp32_to_fp16_row(const float* x, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0) {
      for (int64_t j = i; j < i + 8; ++j) out[j] = fp32_to_fp16(x[j]);
      continue;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i) out[i] = fp32_to_fp16(x[i]);
}

void scale(float* x, float s, int64_t n) {
  int64_t i = 0;
  const __m256 vs = _mm256_set1_ps(s);
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
  for (; i < n; ++i) x[i] *= s;
}

void softmax(float* x, int64_t n) {
  int64_t i = 0;
  __m256 vmax = _mm256_set1_ps(-INFINITY);
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
  float max = hmax(vmax);
  for (; i < n; ++i) max = std::fmax(max, x[i]);
  const __m256 vm = _mm256_set1_ps(max);
  __m256 acc = _mm256_setzero_ps();
  i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  float sum = hsum(acc);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  scale(x, 1.0f / sum, n);
}

// Two accumulators of 8 lanes, each lane holding the largest entry it has seen and that entry's
// index (as int32 bits in a float register, for blendv); a lane takes an entry only if strictly
// larger, so it keeps the first of its equal maxima, and the lowest index among the lanes that
// hold the row's max is the first position of that max. A NaN never compares larger (ordered
// compare), and any NaN or +Inf makes the row unusable, whatever the lanes hold.
LogitsScan scan_logits(const float* row, int64_t n) {
  const __m256 pos_inf = _mm256_set1_ps(INFINITY);
  __m256 best[2] = {_mm256_set1_ps(-INFINITY), _mm256_set1_ps(-INFINITY)};
  __m256 at[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  __m256i idx[2] = {_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15)};
  const __m256i step = _mm256_set1_epi32(16);
  __m256 bad = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int a = 0; a < 2; ++a) {
      const __m256 x = _mm256_loadu_ps(row + i + 8 * a);
      bad = _mm256_or_ps(bad, _mm256_or_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q), _mm256_cmp_ps(x, pos_inf, _CMP_EQ_OQ)));
      const __m256 larger = _mm256_cmp_ps(x, best[a], _CMP_GT_OQ);
      best[a] = _mm256_blendv_ps(best[a], x, larger);
      at[a] = _mm256_blendv_ps(at[a], _mm256_castsi256_ps(idx[a]), larger);
      idx[a] = _mm256_add_epi32(idx[a], step);
    }
  }
  if (_mm256_movemask_ps(bad) != 0) return LogitsScan{};
  alignas(32) float lane_best[16];
  alignas(32) int32_t lane_at[16];
  for (int a = 0; a < 2; ++a) {
    _mm256_store_ps(lane_best + 8 * a, best[a]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(lane_at + 8 * a), _mm256_castps_si256(at[a]));
  }
  float top = -INFINITY;
  for (float v : lane_best) top = v > top ? v : top;
  int64_t top_at = 0;
  bool found = false;
  for (int l = 0; l < 16; ++l) {
    if (lane_best[l] == top && (!found || lane_at[l] < top_at)) top_at = lane_at[l], found = true;
  }
  for (; i < n; ++i) {  // the tail: later positions, so only a strictly larger entry moves the argmax
    const float x = row[i];
    if (std::isnan(x) || x == INFINITY) return LogitsScan{};
    if (x > top) top = x, top_at = i;
  }
  return LogitsScan{top > -INFINITY, top_at};
}

}  // namespace tessera::kernels::avx2
