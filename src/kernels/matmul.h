// The one matmul of the engine: y = x · Wᵀ for a GGUF weight tensor W of any supported type.
//
// Fast path (matmul): activations are quantized on the fly to 8-bit blocks (per 32 for the
// Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 weights, per 256 with per-16 sums for the K-quants), then dotted with
// integer instructions (AVX-512 VNNI, AVX2 maddubs, or scalar); F32/F16/BF16 weights use float
// FMAs. Output rows are split across the pool's threads.
//
// Invariant (batch invariance, see kernels/README.md): y[i][r] is a fixed function of x[i] and
// W[r] alone: the same bits whatever m, whatever the other rows of x, whatever the thread count and
// whatever the ISA. Each output element is reduced in one canonical order (matmul_canon.h) that the
// scalar twin matmul_ref follows too, so fast and ref agree bit for bit.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "util/dtype.h"
#include "util/thread_pool.h"

namespace tessera::kernels {

// One GGUF weight tensor [rows][cols] (GGUF ne0 = cols), read-only, a view of memory the caller
// keeps alive (usually the model's mmap).
class WeightMatrix {
 public:
  WeightMatrix() = default;
  // cols must be a multiple of the type's block size and the type supported (checked).
  static WeightMatrix view(DType type, const void* data, int64_t rows, int64_t cols);

  DType type() const { return type_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  size_t row_bytes() const { return row_bytes_; }
  const uint8_t* data() const { return data_; }
  const uint8_t* row(int64_t r) const { return data_ + static_cast<size_t>(r) * row_bytes_; }
  // Bytes one full pass streams (for GB/s).
  size_t bytes() const { return row_bytes_ * static_cast<size_t>(rows_); }
  // dst: [cols] (embedding lookup).
  void dequantize_row(int64_t r, float* dst) const;

  // The row-interleaved copy the packed kernels read (matmul_pack.h), or null. pack() makes it
  // (32-block types and K-quants; one more copy of the weights in memory, the GGUF view stays for
  // the embedding lookup and the other paths); copies of this WeightMatrix share it.
  // pack_if_useful() packs only where this CPU runs the packed kernels (AVX2 and up): what the
  // model loader calls.
  void pack();
  void pack_if_useful();
  // pack_if_useful() for several matrices at once, into one shared arena of huge pages (every
  // decode step streams them all; 2 MiB pages need 1/512 the page walks of 4 KiB ones).
  static void pack_all_if_useful(std::span<WeightMatrix* const> matrices);
  const uint8_t* packed() const { return packed_.get(); }

 private:
  DType type_ = DType::F32;
  const uint8_t* data_ = nullptr;  // rows x row_bytes_
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  size_t row_bytes_ = 0;           // dtype_row_bytes(type_, cols_)
  std::shared_ptr<const uint8_t> packed_;  // packed_bytes(type_, rows_, cols_), 64-byte aligned
};

// y[i][r] = sum_c x[i][c] * W[r][c];  x: [m][cols] f32 row-major; y: [m][rows] f32.
// Scratch for the quantized activations is a per-calling-thread buffer that only grows: no
// allocation per call in steady state.
void matmul(const WeightMatrix& w, const float* x, int64_t m, float* y, ThreadPool& pool);

// One output of matmul_group: y[i][r] = sum_c x[i][c] * w[r][c], y: [m][w.rows()].
struct MatmulOut {
  const WeightMatrix* w = nullptr;  // weight [rows][cols]
  float* y = nullptr;               // [m][w->rows()]
};
// Several weights read by the same x (q, k, v; gate, up): when they share cols and activation
// format, x is quantized once and every output's rows share one split over the pool (one wake-up
// instead of one per weight). The same bits as one matmul() per output.
void matmul_group(std::span<const MatmulOut> outs, const float* x, int64_t m, ThreadPool& pool);

// Weight bytes x activation rows below which a matmul runs on the calling thread alone: waking a
// worker (microseconds when it spins, a scheduler slice when the machine is loaded) costs more than
// it saves. Which thread computes a row never changes its bits.
inline constexpr int64_t kMatmulInlineBytes = int64_t{96} << 10;

// Whether packed weights are read by the packed AVX-512 kernel (default on) or ignored (the AVX2
// kernel on the GGUF layout runs instead). The same bits either way; for the before/after columns
// of bench_matmul. Process-wide (a relaxed atomic), like set_isa_level.
void set_matmul_packed_enabled(bool enabled);

// Batches of at least amx_min_rows(type) activation rows over packed weights run on AMX-INT8
// tiles where the CPU and OS allow them (matmul_amx_available()); fewer rows, a type with no tile
// kernel, or no AMX, run the VNNI kernel. The same bits either way. set_matmul_amx_enabled(false),
// or TESSERA_NO_AMX=1 in the environment, forces VNNI (tests, bench columns). The thresholds are
// measured (bench_matmul, one thread, weights cold; bench/LOG.md), AMX/VNNI:
//   32-element blocks (Q4_0, Q4_1, Q5_0, Q8_0), SmolLM2 shapes: 0.81-0.88x at m = 8, 1.04-1.18x at
//     m = 12 and 1.19-1.31x at m = 16: from 12 rows;
//   Q4_K/Q5_K, 4864->896: 0.77-0.99x at m = 24 (one full tile and a tail), 1.12-1.22x at m = 32,
//     1.16-1.34x at m = 64: from 32 rows;
//   Q6_K: 0.74-0.96x at every m from 16 to 512 (16-element sub-blocks fill half a tile row): never.
// Returns 0 for a type that never runs on the tiles.
int64_t amx_min_rows(DType type);
bool matmul_amx_available();
void set_matmul_amx_enabled(bool enabled);

// The scalar twin: same activation quantization, same reduction order, one thread.
void matmul_ref(const WeightMatrix& w, const float* x, int64_t m, float* y);

}  // namespace tessera::kernels
