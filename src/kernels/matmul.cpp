// WeightMatrix and the dispatching matmul: quantize the activations once (into a per-thread
// scratch that only grows), then split the output rows across the pool; each thread runs the best
// ISA kernel for the weight type, or the scalar one (bit-identical by construction).
#include "kernels/matmul.h"

#include <vector>

#include "kernels/matmul_canon.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "util/check.h"
#include "util/cpu_features.h"

#if !defined(TESSERA_FORCE_SCALAR)
#include "kernels/x86/quant_avx2.h"
#endif

namespace tessera::kernels {
namespace {

struct ActivationScratch {
  std::vector<int8_t> xq;       // [m][cols]
  std::vector<float> xd;        // [m][cols / 32] (or / 256)
  std::vector<float> xs;        // [m][cols / 32]
  std::vector<int32_t> xbsums;  // [m][cols / 16]
};

template <typename T>
T* grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

void run_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
#if !defined(TESSERA_FORCE_SCALAR)
  const IsaLevel level = isa_level();
  if (level >= IsaLevel::kAvx512 && cpu_features().avx512vnni &&
      avx512::matmul_rows(a, r_begin, r_end)) {
    return;
  }
  if (level >= IsaLevel::kAvx2 && avx2::matmul_rows(a, r_begin, r_end)) return;
#endif
  matmul_rows_ref(a, r_begin, r_end);
}

}  // namespace

WeightMatrix WeightMatrix::view(DType type, const void* data, int64_t rows, int64_t cols) {
  TESSERA_CHECK(dtype_supported_for_matmul(type), "WeightMatrix: unsupported type {}",
                dtype_name(type));
  TESSERA_CHECK(rows >= 0 && cols > 0 && cols % dtype_block_size(type) == 0,
                "WeightMatrix: {} x {} is not a whole number of {} blocks", rows, cols,
                dtype_name(type));
  WeightMatrix w;
  w.type_ = type;
  w.data_ = static_cast<const uint8_t*>(data);
  w.rows_ = rows;
  w.cols_ = cols;
  w.row_bytes_ = dtype_row_bytes(type, cols);
  return w;
}

void WeightMatrix::dequantize_row(int64_t r, float* dst) const {
  TESSERA_CHECK(r >= 0 && r < rows_, "dequantize_row: row {} of {}", r, rows_);
  kernels::dequantize_row(type_, row(r), dst, cols_);
}

void matmul(const WeightMatrix& w, const float* x, int64_t m, float* y, ThreadPool& pool) {
  if (m <= 0 || w.rows() == 0) return;
  const int64_t cols = w.cols();
  thread_local ActivationScratch scratch;
  MatmulArgs a;
  a.type = w.type();
  a.w = w.data();
  a.row_bytes = w.row_bytes();
  a.rows = w.rows();
  a.cols = cols;
  a.m = m;
  a.x = x;
  a.y = y;
  const WeightFamily family = weight_family(a.type);
  if (family != WeightFamily::kFloat) {
    int8_t* xq = grow(scratch.xq, m * cols);
    float* xd = grow(scratch.xd, m * cols / kQk);
    float* xs = grow(scratch.xs, m * cols / kQk);
    int32_t* xbsums = grow(scratch.xbsums, family == WeightFamily::kSuperBlock256 ? m * cols / 16 : 1);
    const int64_t block = family == WeightFamily::kBlock32 ? kQk : kQkK;
    // Rows of x are independent: quantize them in parallel (the split cannot change any value).
    pool.parallel_for(m, 1, [&](int64_t i0, int64_t i1) {
      const int64_t nb = cols / block;
      int32_t* bsums = family == WeightFamily::kSuperBlock256 ? xbsums + i0 * (cols / 16) : xbsums;
#if !defined(TESSERA_FORCE_SCALAR)
      if (isa_level() >= IsaLevel::kAvx2) {
        avx2::quantize_activations(x + i0 * cols, (i1 - i0) * nb, block, xq + i0 * cols,
                                   xd + i0 * nb, xs + i0 * nb, bsums);
        return;
      }
#endif
      quantize_activations(a.type, x + i0 * cols, i1 - i0, cols, xq + i0 * cols, xd + i0 * nb,
                           xs + i0 * nb, bsums);
    });
    a.xq = xq;
    a.xd = xd;
    a.xs = xs;
    a.xbsums = xbsums;
  }
  // Grain of 16 rows keeps each thread's stores apart; the split never changes a value.
  pool.parallel_for(w.rows(), 16, [&](int64_t r0, int64_t r1) { run_rows(a, r0, r1); });
}

}  // namespace tessera::kernels
