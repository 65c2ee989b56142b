// Internal: the canonical arithmetic of matmul, shared by matmul_ref.cpp and the ISA kernels.
//
// Activation quantization (per row, per block of 32 or 256):
//   amax = max|x|, d = amax / 127, q = round-half-even(x * (127 / amax)) (0 when amax = 0),
//   s = d * sum(q) (32-blocks), bsums = sums of q per 16 (K-quants).
// Reduction of one output element y[i][r] (all paths do exactly these float operations):
//   32-block weights: y = 0; per block b in ascending order, the exact int32 dot
//     isum = sum_{j<32} wq[j]*xq[j] (wq = the weight's integer: q-8, q, q-16, q, q for Q4_0, Q4_1,
//     Q5_0, Q5_1, Q8_0), then y = fma(float(isum), dw*dx, y) and, for Q4_1/Q5_1, y = fma(mw, s_x, y).
//     One float chain per output and no lane structure: a kernel may compute the integer dot in
//     any order and any layout, so the AVX-512 kernels read weights repacked with one output row
//     per vpdpbusd lane (matmul_pack.h) and one fma serves 16 outputs.
//   float weights: acc[c % 16] = fma(w[c], x[c], acc[c % 16]) for c ascending; y = reduce16(acc).
//   K-quants: per super-block exact int32 isum = sum_j scale_j * dot_j and msum = sum_j min_j *
//     xsum_j; y = fma(float(isum), d*dx, y); y = fma(-float(msum), dmin*dx, y), blocks ascending.
//   reduce16(a): v[k] = a[k] + a[k+8]; t[k] = v[k] + v[k+4]; u[k] = t[k] + t[k+2]; u[0] + u[1].
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

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
  const int32_t* xsum = nullptr;    // [m][cols / 32] sum(q) per 32-block (32-block types)
  // xd, xs and xsum transposed to [cols / 32][m] for 32-block types at m >= amx_min_rows(type) (the AMX
  // kernel reads one block's scales for all the rows of a tile from one pointer), else null.
  const float* xd_t = nullptr;
  const float* xs_t = nullptr;
  const int32_t* xsum_t = nullptr;
  // Names this call's quantized activations (one number per prepare, from a process-wide counter;
  // 0: unnamed). A kernel thread runs a call as several row pieces (ThreadPool::for_ranges), so a
  // table it derives from the activations is kept per thread under this id and built once a call.
  uint64_t activations_id = 0;
  // Whether this call's rows run on the AMX tiles (set as the activations are prepared: at least
  // the family's minimum rows, packed weights, AMX usable and enabled).
  bool amx = false;
  // The weights repacked for the AVX-512 kernels (matmul_pack.h), or null: groups of 16 rows.
  const uint8_t* packed = nullptr;
  float* y = nullptr;               // [m][rows]
};

// A table a kernel derives from one call's activations, per thread: build(data) runs when the
// call (a.activations_id) or the variant differs from the last build on this thread, or the id is 0.
struct DerivedTable {
  uint64_t id = 0;
  int64_t variant = 0;
  std::vector<int32_t> data;
  template <typename Build>
  const int32_t* get(const MatmulArgs& a, int64_t variant_key, size_t n, Build&& build) {
    if (a.activations_id == 0 || a.activations_id != id || variant_key != variant || data.size() < n) {
      if (data.size() < n) data.resize(n);
      build(data.data());
      id = a.activations_id, variant = variant_key;
    }
    return data.data();
  }
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

// Quantizes m rows of x for weights of type `type` into xq/xd/xs/xsum/xbsums (shapes as
// MatmulArgs; xs and xsum for 32-blocks, xbsums for 256-blocks).
void quantize_activations(DType type, const float* x, int64_t m, int64_t cols, int8_t* xq,
                          float* xd, float* xs, int32_t* xsum, int32_t* xbsums);

// Q4_K/Q5_K's per-32 activation sums as int16 pairs, [m][cols / 64] dwords (sum_{2k}, sum_{2k+1})
// of each super-block's sub-blocks 2k, 2k + 1 (|sum| <= 32 x 127 fits), from a.xbsums (per 16):
// the operand of the mins' vpmaddwd / vpdpwssd in the AVX2 and AVX-512 K-quant kernels. Built once
// per call and thread (DerivedTable); scalar, so one copy serves every ISA file.
const int32_t* bsum32_pairs(const MatmulArgs& a);

// Computes y[i][r] for all i < m and r in [r_begin, r_end). Scalar, the canonical definition.
void matmul_rows_ref(const MatmulArgs& a, int64_t r_begin, int64_t r_end);

namespace avx2 {
// False when this ISA has no kernel for a.type (the caller then uses matmul_rows_ref).
bool matmul_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end);
// The 32-block types over MatmulArgs::packed (x86/matmul_packed_avx2.cpp); false otherwise.
bool packed_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end);
// The K-quants over MatmulArgs::packed (x86/matmul_packed_kquant_avx2.cpp); false otherwise.
bool packed_kquant_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end);
}
namespace avx512 {
// Float weights (F32/F16/BF16) and, given MatmulArgs::packed, the 32-block types
// (x86/matmul_packed_avx512.cpp); false otherwise.
bool matmul_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end);
bool packed_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end);
// The K-quants over MatmulArgs::packed (x86/matmul_packed_kquant_avx512.cpp); false otherwise.
bool packed_kquant_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end);
}
namespace amx {
// The 32-block types over MatmulArgs::packed with AMX-INT8 tiles (x86/matmul_packed_amx.cpp);
// false otherwise. Only where amx_tiles_usable().
bool packed_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end);
// The K-quants over MatmulArgs::packed with AMX-INT8 tiles (x86/matmul_packed_kquant_amx.cpp);
// false otherwise. Only where amx_tiles_usable().
bool packed_kquant_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end);
}

}  // namespace tessera::kernels
