// Scalar reference versions of kernels/ops.h: plain loops, the readable definition of each op.
#include <cmath>
#include <limits>

#include "kernels/ops.h"
#include "kernels/ops_rope_table.h"
#include "util/check.h"
#include "util/fp16.h"

namespace tessera::kernels {

void rmsnorm_ref(const float* x, const float* weight, float eps, float* out, int64_t n,
                 int64_t num_rows) {
  for (int64_t r = 0; r < num_rows; ++r) {
    const float* xr = x + r * n;
    float* yr = out + r * n;
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(xr[i]) * xr[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + eps));
    for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * inv * weight[i];
  }
}

void rope_ref(float* x, int64_t num_tokens, int64_t num_heads, int64_t head_dim,
              const int32_t* positions, const RopeParams& params) {
  TESSERA_CHECK(head_dim % 2 == 0, "rope: head_dim {} is odd", head_dim);
  const int64_t half = head_dim / 2;
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t h = 0; h < num_heads; ++h) {
      float* v = x + (t * num_heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        float c = 0.0f, s = 0.0f;
        rope_cos_sin(positions[t], i, head_dim, params, &c, &s);
        const int64_t a = params.layout == RopeLayout::kNormal ? 2 * i : i;
        const int64_t b = params.layout == RopeLayout::kNormal ? 2 * i + 1 : i + half;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
      }
    }
  }
}

void swiglu_ref(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void geglu_ref(const float* gate, const float* up, float* out, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * up[i];
  }
}

void fp32_to_fp16_row_ref(const float* x, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = fp32_to_fp16(x[i]);
}

void add_inplace_ref(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void scale_ref(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void softmax_ref(float* x, int64_t n) {
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = std::fmax(max, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

LogitsScan scan_logits_ref(const float* row, int64_t n) {
  LogitsScan out;
  bool any_finite = false;
  for (int64_t i = 0; i < n; ++i) {
    const float x = row[i];
    if (std::isnan(x) || x == std::numeric_limits<float>::infinity()) return LogitsScan{};
    any_finite |= std::isfinite(x);
    if (x > row[out.argmax]) out.argmax = i;  // strictly larger: the first of equal maxima stays
  }
  out.usable = any_finite;
  return out;
}

}  // namespace tessera::kernels
