// Dispatch for kernels/ops.h: the ISA is read from util isa_level() at each call (a relaxed atomic
// load), so tests can switch paths with set_isa_level(). rope has no ISA file: its cost is its
// cos/sin, which the fast path computes once per token instead of once per head.

#include "kernels/ops.h"
#include "kernels/ops_rope_table.h"
#include "util/check.h"
#include "util/cpu_features.h"

#if !defined(TESSERA_FORCE_SCALAR)
#include "kernels/x86/ops_avx2.h"
#include "kernels/x86/ops_avx512.h"
#endif

namespace tessera::kernels {
#if !defined(TESSERA_FORCE_SCALAR)
namespace {

bool use_avx2() { return isa_level() >= IsaLevel::kAvx2; }

}  // namespace
#endif

void rmsnorm(const float* x, const float* weight, float eps, float* out, int64_t n,
             int64_t num_rows) {
#if !defined(TESSERA_FORCE_SCALAR)
  if (use_avx2()) return avx2::rmsnorm(x, weight, eps, out, n, num_rows);
#endif
  rmsnorm_ref(x, weight, eps, out, n, num_rows);
}

namespace {

// Rotates the num_heads vectors of one token by cs = [head_dim / 2][2] (cos, sin).
void rotate_token(float* x, int64_t num_heads, int64_t head_dim, RopeLayout layout, const float* cs) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < num_heads; ++h) {
    float* v = x + h * head_dim;
    if (layout == RopeLayout::kNormal) {
      for (int64_t i = 0; i < half; ++i) {
        const float x0 = v[2 * i], x1 = v[2 * i + 1], c = cs[2 * i], s = cs[2 * i + 1];
        v[2 * i] = x0 * c - x1 * s;
        v[2 * i + 1] = x0 * s + x1 * c;
      }
    } else {
      for (int64_t i = 0; i < half; ++i) {
        const float x0 = v[i], x1 = v[i + half], c = cs[2 * i], s = cs[2 * i + 1];
        v[i] = x0 * c - x1 * s;
        v[i + half] = x0 * s + x1 * c;
      }
    }
  }
}

}  // namespace

void rope_table(const int32_t* positions, int64_t num_tokens, int64_t head_dim, const RopeParams& params,
                float* table) {
  TESSERA_CHECK(head_dim % 2 == 0, "rope: head_dim {} is odd", head_dim);
  const int64_t half = head_dim / 2;
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      float* cs = table + (t * half + i) * 2;
      rope_cos_sin(positions[t], i, head_dim, params, &cs[0], &cs[1]);
    }
  }
}

void rope_with_table(float* x, int64_t num_tokens, int64_t num_heads, int64_t head_dim, RopeLayout layout,
                     const float* table) {
  TESSERA_CHECK(head_dim % 2 == 0, "rope: head_dim {} is odd", head_dim);
  for (int64_t t = 0; t < num_tokens; ++t) {
    rotate_token(x + t * num_heads * head_dim, num_heads, head_dim, layout, table + t * head_dim);
  }
}

void rope(float* x, int64_t num_tokens, int64_t num_heads, int64_t head_dim,
          const int32_t* positions, const RopeParams& params) {
  TESSERA_CHECK(head_dim % 2 == 0, "rope: head_dim {} is odd", head_dim);
  constexpr int64_t kMaxHalf = 512;
  if (head_dim / 2 > kMaxHalf) return rope_ref(x, num_tokens, num_heads, head_dim, positions, params);
  float cs[2 * kMaxHalf];  // the current token's (cos, sin) pairs
  for (int64_t t = 0; t < num_tokens; ++t) {
    rope_table(positions + t, 1, head_dim, params, cs);
    rotate_token(x + t * num_heads * head_dim, num_heads, head_dim, params.layout, cs);
  }
}

// Scalar only: Gemma's FFN activation is a small share of its step (the matmuls dominate).
void geglu(const float* gate, const float* up, float* out, int64_t n) { geglu_ref(gate, up, out, n); }

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
#if !defined(TESSERA_FORCE_SCALAR)
  if (isa_level() >= IsaLevel::kAvx512) return avx512::swiglu(gate, up, out, n);
  if (use_avx2()) return avx2::swiglu(gate, up, out, n);
#endif
  swiglu_ref(gate, up, out, n);
}

void fp32_to_fp16_row(const float* x, uint16_t* out, int64_t n) {
#if !defined(TESSERA_FORCE_SCALAR)
  if (use_avx2()) return avx2::fp32_to_fp16_row(x, out, n);
#endif
  fp32_to_fp16_row_ref(x, out, n);
}

void add_inplace(float* x, const float* y, int64_t n) {
#if !defined(TESSERA_FORCE_SCALAR)
  if (use_avx2()) return avx2::add_inplace(x, y, n);
#endif
  add_inplace_ref(x, y, n);
}

void scale(float* x, float s, int64_t n) {
#if !defined(TESSERA_FORCE_SCALAR)
  if (use_avx2()) return avx2::scale(x, s, n);
#endif
  scale_ref(x, s, n);
}

void softmax(float* x, int64_t n) {
#if !defined(TESSERA_FORCE_SCALAR)
  if (use_avx2()) return avx2::softmax(x, n);
#endif
  softmax_ref(x, n);
}

LogitsScan scan_logits(const float* row, int64_t n) {
  TESSERA_CHECK(n >= 1 && n < (int64_t{1} << 31), "scan_logits over {} entries", n);
#if !defined(TESSERA_FORCE_SCALAR)
  if (isa_level() >= IsaLevel::kAvx512) return avx512::scan_logits(row, n);
  if (use_avx2()) return avx2::scan_logits(row, n);
#endif
  return scan_logits_ref(row, n);
}

}  // namespace tessera::kernels
