// Internal: the canonical arithmetic of matmul, shared by matmul_ref.cpp and the ISA kernels.
//
// Activation quantization (per row, per block of 32 or 256):
//   amax = max|x|, d = amax / 127, q = round-half-even(x * (127 / amax)) (0 when amax = 0),
//   s = d * sum(q) (32-blocks), bsums = sums of q per 16 (K-quants).
// Reduction of one output element y[i][r] (all paths do exactly these float operations):
//   32-block weights: per block b, 8 exact int32 lane sums isum[k] = sum_{j=4k..4k+3} wq[j]*xq[j]
//     (wq = the weight's integer: q-8, q, q-16, q, q for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0);
//     acc[8*(b&1) + k] = fma(float(isum[k]), dw*dx, acc[...]); for Q4_1/Q5_1 also
//     msum[b&1] = fma(mw, s_x, msum[b&1]). y = reduce16(acc) + (msum[0] + msum[1]).
//   float weights: acc[c % 16] = fma(w[c], x[c], acc[c % 16]) for c ascending; y = reduce16(acc).
//   K-quants: per super-block exact int32 isum = sum_j scale_j * dot_j and msum = sum_j min_j *
//     xsum_j; y = fma(float(isum), d*dx, y); y = fma(-float(msum), dmin*dx, y), blocks ascending.
//   reduce16(a): v[k] = a[k] + a[k+8]; t[k] = v[k] + v[k+4]; u[k] = t[k] + t[k+2]; u[0] + u[1].
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "util/dtype.h"

namespace tessera::kernels {

// Everything one matmul call's kernels read and write.
struct MatmulArgs {
  DType type = DType::F32;
  const uint8_t* w = nullptr;       // [rows][row_bytes]
  size_t row_bytes = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t m = 0;                    // activation rows
  const float* x = nullptr;         // [m][cols] f32 (float weight types)
  const int8_t* xq = nullptr;       // [m][cols] quantized activations
  const float* xd = nullptr;        // [m][cols / act_block] activation scales
  const float* xs = nullptr;        // [m][cols / 32] d * sum(q) (32-block types)
  const int32_t* xbsums = nullptr;  // [m][cols / 16] sums of q per 16 (K-quants)
  // Layouts for the register-blocked m > 1 kernel (32-block weights, AVX-512), else null:
  const float* xdv = nullptr;       // [m][cols / 32][8] xd, each repeated 8 times
  const float* xs_t = nullptr;      // [cols / 32][ld_xs_t] xs transposed; lanes m..m+15 zero
  int64_t ld_xs_t = 0;              // m + 16
  float* y = nullptr;               // [m][rows]
};

enum class WeightFamily { kFloat, kBlock32, kSuperBlock256 };
inline WeightFamily weight_family(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: return WeightFamily::kFloat;
    case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: return WeightFamily::kSuperBlock256;
    default: return WeightFamily::kBlock32;
  }
}
inline bool weight_has_min(DType t) { return t == DType::Q4_1 || t == DType::Q5_1; }

inline float reduce16(const float a[16]) {
  float v[8], t[4], u[2];
  for (int k = 0; k < 8; ++k) v[k] = a[k] + a[k + 8];
  for (int k = 0; k < 4; ++k) t[k] = v[k] + v[k + 4];
  for (int k = 0; k < 2; ++k) u[k] = t[k] + t[k + 2];
  return u[0] + u[1];
}

// Quantizes m rows of x for weights of type `type` into xq/xd/xs/xbsums (shapes as MatmulArgs).
void quantize_activations(DType type, const float* x, int64_t m, int64_t cols, int8_t* xq,
                          float* xd, float* xs, int32_t* xbsums);

// Computes y[i][r] for all i < m and r in [r_begin, r_end). Scalar, the canonical definition.
void matmul_rows_ref(const MatmulArgs& a, int64_t r_begin, int64_t r_end);

namespace avx2 {
// False when this ISA has no kernel for a.type (the caller then uses matmul_rows_ref).
bool matmul_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end);
}
namespace avx512 {
bool matmul_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end);
// The register-blocked m > 1 kernel (x86/matmul_gemm_avx512.cpp); false unless a is 32-block
// weights with cols <= kGemmMaxCols and xdv and xs_t set.
bool gemm_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end);
// Wider rows do not fit a 16-row activation tile (2 x cols bytes per row) in L1; with 8-row tiles
// the kernel measured 0.95-0.99x of the tiled one at cols 1536 (bench_matmul, 1 thread, CPU time)
// and 0.76-0.96x at cols 5632 (1.1B shape), so wider rows keep the tiled kernel.
inline constexpr int64_t kGemmMaxCols = 1024;
}

}  // namespace tessera::kernels
