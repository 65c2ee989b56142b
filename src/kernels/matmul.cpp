// WeightMatrix and the dispatching matmul: quantize the activations once (into a per-thread
// scratch that only grows), then split the output rows across the pool; each thread runs the best
// ISA kernel for the weight type, or the scalar one (bit-identical by construction).
#include "kernels/matmul.h"

#include "util/aligned_vector.h"
#include "util/huge_buffer.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <vector>

#include "kernels/matmul_canon.h"
#include "kernels/matmul_pack.h"
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
  // Cache-line aligned: the AMX kernel loads xq rows as tiles and the transposed scales 16 at a time.
  AlignedVector<int8_t> xq;       // [m][cols]
  AlignedVector<float> xd;        // [m][cols / 32] (or / 256)
  AlignedVector<float> xs;        // [m][cols / 32]
  AlignedVector<int32_t> xsum;    // [m][cols / 32]
  AlignedVector<int32_t> xbsums;  // [m][cols / 16]
  AlignedVector<float> xd_t, xs_t;   // [cols / 32][m] (AMX batches)
  AlignedVector<int32_t> xsum_t;     // [cols / 32][m]
};

template <typename T>
T* grow(AlignedVector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

std::atomic<bool> g_packed_enabled{true};
std::atomic<bool> g_amx_enabled{std::getenv("TESSERA_NO_AMX") == nullptr};

// Whether this thread's ISA level runs the AVX-512 kernels (they need VNNI): the packed one over
// packed weights, the float one otherwise.
bool avx512_kernels_available() {
#if !defined(TESSERA_FORCE_SCALAR)
  return isa_level() >= IsaLevel::kAvx512 && cpu_features().avx512vnni;
#else
  return false;
#endif
}

// Whether a packed copy of the 32-block weights would be read: by the AVX-512 kernels or, on CPUs
// without them, by the AVX2 packed kernel.
bool packed_kernels_available() {
#if !defined(TESSERA_FORCE_SCALAR)
  return isa_level() >= IsaLevel::kAvx2;
#else
  return false;
#endif
}

// Whether this call's rows run on the AMX tiles (which read the activation scales transposed).
bool amx_will_run([[maybe_unused]] const MatmulArgs& a) {
#if !defined(TESSERA_FORCE_SCALAR)
  const int64_t min_rows = amx_min_rows(a.type);
  return min_rows > 0 && a.m >= min_rows && a.packed != nullptr &&
         avx512_kernels_available() && g_packed_enabled.load(std::memory_order_relaxed) &&
         g_amx_enabled.load(std::memory_order_relaxed) && amx_tiles_usable();
#else
  return false;
#endif
}

void run_rows(const MatmulArgs& a, int64_t r_begin, int64_t r_end) {
#if !defined(TESSERA_FORCE_SCALAR)
  const IsaLevel level = isa_level();
  if (avx512_kernels_available()) {
    if (a.packed && g_packed_enabled.load(std::memory_order_relaxed)) {
      if (a.amx && (amx::packed_rows(a, r_begin, r_end) || amx::packed_kquant_rows(a, r_begin, r_end))) return;
      if (avx512::packed_rows(a, r_begin, r_end) || avx512::packed_kquant_rows(a, r_begin, r_end)) return;
    }
    if (avx512::matmul_rows(a, r_begin, r_end)) return;
  }
  if (level >= IsaLevel::kAvx2) {
    if (a.packed && g_packed_enabled.load(std::memory_order_relaxed) &&
        (avx2::packed_rows(a, r_begin, r_end) || avx2::packed_kquant_rows(a, r_begin, r_end))) {
      return;
    }
    if (avx2::matmul_rows(a, r_begin, r_end)) return;
  }
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

void WeightMatrix::pack() {
  if (!packable(type_) || packed_ || rows_ == 0) return;
  const size_t bytes = packed_bytes(type_, rows_, cols_);
  auto* buffer = static_cast<uint8_t*>(::operator new(bytes, std::align_val_t{64}));
  pack_weights(type_, data_, rows_, cols_, buffer);
  packed_ = std::shared_ptr<const uint8_t>(buffer, [](const uint8_t* p) {
    ::operator delete(const_cast<uint8_t*>(p), std::align_val_t{64});
  });
}

namespace {

// Whether this CPU runs a packed kernel for `type` (every packable type, at AVX2 and above).
bool packed_kernel_for(DType type) { return packable(type) && packed_kernels_available(); }

}  // namespace

void WeightMatrix::pack_if_useful() {
  if (packed_kernel_for(type_)) pack();
}

void WeightMatrix::pack_all_if_useful(std::span<WeightMatrix* const> matrices) {
  auto needs_packing = [](const WeightMatrix* w) { return packed_kernel_for(w->type_) && !w->packed_ && w->rows_ > 0; };
  constexpr size_t kAlign = 64;
  size_t total = 0;
  for (const WeightMatrix* w : matrices) {
    if (needs_packing(w)) total += (packed_bytes(w->type_, w->rows_, w->cols_) + kAlign - 1) / kAlign * kAlign;
  }
  if (total == 0) return;
  auto arena = std::make_shared<HugeBuffer>(total);
  size_t offset = 0;
  for (WeightMatrix* w : matrices) {
    if (!needs_packing(w)) continue;
    uint8_t* dst = arena->data() + offset;
    pack_weights(w->type_, w->data_, w->rows_, w->cols_, dst);
    w->packed_ = std::shared_ptr<const uint8_t>(arena, dst);  // shares the arena's ownership
    offset += (packed_bytes(w->type_, w->rows_, w->cols_) + kAlign - 1) / kAlign * kAlign;
  }
}

namespace {

// Activation batches of at most this many elements are quantized on the calling thread.
constexpr int64_t kInlineQuantizeElems = int64_t{1} << 15;

// Quantizes x into the calling thread's scratch (rows in parallel when m > 1) and points a's
// activation fields at it. Float weights read x directly.
void prepare_activations(MatmulArgs& a, ThreadPool& pool) {
  const WeightFamily family = weight_family(a.type);
  if (family == WeightFamily::kFloat) return;
  thread_local ActivationScratch scratch;
  const int64_t m = a.m, cols = a.cols;
  const float* x = a.x;
  int8_t* xq = grow(scratch.xq, m * cols);
  float* xd = grow(scratch.xd, m * cols / kQk);
  float* xs = grow(scratch.xs, m * cols / kQk);
  int32_t* xsum = grow(scratch.xsum, m * cols / kQk);
  int32_t* xbsums = grow(scratch.xbsums, family == WeightFamily::kSuperBlock256 ? m * cols / 16 : 1);
  const int64_t block = family == WeightFamily::kBlock32 ? kQk : kQkK;
  const DType type = a.type;
  a.amx = amx_will_run(a);
  const bool transposed = a.amx && family == WeightFamily::kBlock32;  // the 32-block AMX kernel's scales
  float* xd_t = transposed ? grow(scratch.xd_t, m * cols / kQk) : nullptr;
  float* xs_t = transposed ? grow(scratch.xs_t, m * cols / kQk) : nullptr;
  int32_t* xsum_t = transposed ? grow(scratch.xsum_t, m * cols / kQk) : nullptr;
  // Rows [i0, i1) of the scales into their [block][row] copies.
  auto transpose_rows = [&](int64_t i0, int64_t i1) {
    if (!transposed) return;
    const int64_t nb = cols / kQk;
    for (int64_t i = i0; i < i1; ++i) {
      for (int64_t b = 0; b < nb; ++b) {
        xd_t[b * m + i] = xd[i * nb + b];
        xs_t[b * m + i] = xs[i * nb + b];
        xsum_t[b * m + i] = xsum[i * nb + b];
      }
    }
  };
  // Rows of x are independent: quantize them in parallel (the split cannot change any value),
  // except small batches (batched decode: 16 rows of 576), which one thread quantizes faster than
  // a dispatch costs, leaving the rows in the cache of the thread that runs the first matmul chunk.
  const int64_t chunk = m * cols <= kInlineQuantizeElems ? m : std::max<int64_t>(1, m / (4 * pool.num_threads()));
  pool.for_chunks(m, chunk, [&](int64_t i0, int64_t i1) {
    const int64_t nb = cols / block;
    int32_t* bsums = family == WeightFamily::kSuperBlock256 ? xbsums + i0 * (cols / 16) : xbsums;
#if !defined(TESSERA_FORCE_SCALAR)
    if (isa_level() >= IsaLevel::kAvx2) {
      avx2::quantize_activations(x + i0 * cols, (i1 - i0) * nb, block, xq + i0 * cols,
                                 xd + i0 * nb, xs + i0 * nb, xsum + i0 * nb, bsums);
      transpose_rows(i0, i1);
      return;
    }
#endif
    quantize_activations(type, x + i0 * cols, i1 - i0, cols, xq + i0 * cols, xd + i0 * nb,
                         xs + i0 * nb, xsum + i0 * nb, bsums);
    transpose_rows(i0, i1);
  });
  a.xq = xq;
  a.xd = xd;
  a.xs = xs;
  a.xsum = xsum;
  a.xbsums = xbsums;
  a.xd_t = xd_t;
  a.xs_t = xs_t;
  a.xsum_t = xsum_t;
  static std::atomic<uint64_t> next_activations_id{1};
  a.activations_id = next_activations_id.fetch_add(1, std::memory_order_relaxed);
}

MatmulArgs make_args(const WeightMatrix& w, const float* x, int64_t m, float* y) {
  MatmulArgs a;
  a.type = w.type();
  a.w = w.data();
  a.row_bytes = w.row_bytes();
  a.rows = w.rows();
  a.cols = w.cols();
  a.m = m;
  a.x = x;
  a.y = y;
  a.packed = w.packed();
  return a;
}

// The inline threshold, overridable with TESSERA_MATMUL_INLINE_BYTES (for tuning benches).
int64_t inline_bytes() {
  static const int64_t v = [] {
    const char* env = std::getenv("TESSERA_MATMUL_INLINE_BYTES");
    return env ? std::atoll(env) : kMatmulInlineBytes;
  }();
  return v;
}

// Output rows are split into one contiguous range per thread, in pieces of whole 16-row groups
// (stores of two threads stay on separate cache lines), and a thread that finishes its range
// first takes groups from the back of the other's (ThreadPool::for_ranges): each thread streams
// one contiguous run of weights (eight chunks per thread handed out as threads came cost SmolLM2
// 12-15% of a decode step: bench/LOG.md), and neither waits long for the other. Which thread
// runs a group never changes a value.
constexpr int64_t kRowGrain = 16;

}  // namespace

const int32_t* bsum32_pairs(const MatmulArgs& a) {
  thread_local DerivedTable table;
  const int64_t per_row = a.cols / 64;
  return table.get(a, a.cols, static_cast<size_t>(a.m * per_row), [&](int32_t* t) {
    for (int64_t i = 0; i < a.m; ++i) {
      const int32_t* s16 = a.xbsums + i * (a.cols / 16);
      for (int64_t k2 = 0; k2 < per_row; ++k2) {
        const int32_t lo = s16[4 * k2] + s16[4 * k2 + 1], hi = s16[4 * k2 + 2] + s16[4 * k2 + 3];
        t[i * per_row + k2] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(lo)) |
                                                   (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
      }
    }
  });
}

void set_matmul_packed_enabled(bool enabled) { g_packed_enabled.store(enabled, std::memory_order_relaxed); }
void set_matmul_amx_enabled(bool enabled) { g_amx_enabled.store(enabled, std::memory_order_relaxed); }
int64_t amx_min_rows(DType type) {
  switch (weight_family(type)) {
    case WeightFamily::kBlock32: return 12;
    case WeightFamily::kSuperBlock256: return type == DType::Q6_K ? 0 : 32;
    default: return 0;
  }
}

bool matmul_amx_available() { return avx512_kernels_available() && amx_tiles_usable(); }

void matmul(const WeightMatrix& w, const float* x, int64_t m, float* y, ThreadPool& pool) {
  if (m <= 0 || w.rows() == 0) return;
  MatmulArgs a = make_args(w, x, m, y);
  prepare_activations(a, pool);
  if (static_cast<int64_t>(w.bytes()) * m < inline_bytes()) {
    run_rows(a, 0, w.rows());
    return;
  }
  pool.for_ranges(w.rows(), kRowGrain, [&](int64_t r0, int64_t r1) { run_rows(a, r0, r1); });
}

void matmul_group(std::span<const MatmulOut> outs, const float* x, int64_t m, ThreadPool& pool) {
  if (m <= 0 || outs.empty()) return;
  constexpr size_t kMaxOuts = 4;
  const WeightMatrix& w0 = *outs[0].w;
  bool shared = outs.size() <= kMaxOuts;
  for (const MatmulOut& o : outs) {
    shared = shared && o.w->cols() == w0.cols() && weight_family(o.w->type()) == weight_family(w0.type());
  }
  if (!shared) {
    for (const MatmulOut& o : outs) matmul(*o.w, x, m, o.y, pool);
    return;
  }
  MatmulArgs args[kMaxOuts];
  int64_t first_row[kMaxOuts + 1] = {0};  // prefix sums of rows: output k owns [first_row[k], first_row[k+1])
  int64_t bytes = 0;
  for (size_t k = 0; k < outs.size(); ++k) {
    args[k] = make_args(*outs[k].w, x, m, outs[k].y);
    first_row[k + 1] = first_row[k] + outs[k].w->rows();
    bytes += static_cast<int64_t>(outs[k].w->bytes());
  }
  prepare_activations(args[0], pool);
  for (size_t k = 1; k < outs.size(); ++k) {
    args[k].xq = args[0].xq, args[k].xd = args[0].xd, args[k].xs = args[0].xs, args[k].xbsums = args[0].xbsums;
    args[k].xsum = args[0].xsum, args[k].xd_t = args[0].xd_t, args[k].xs_t = args[0].xs_t;
    args[k].xsum_t = args[0].xsum_t, args[k].activations_id = args[0].activations_id;
    // The 32-block tile kernel reads the transposed scales, prepared only when args[0] runs on
    // the tiles; the K-quant one reads the row-major activations every kernel reads.
    args[k].amx = amx_will_run(args[k]) && (args[0].amx || weight_family(args[k].type) != WeightFamily::kBlock32);
  }
  const size_t n = outs.size();
  auto rows = [&](int64_t r0, int64_t r1) {
    for (size_t k = 0; k < n; ++k) {
      const int64_t lo = std::max(r0, first_row[k]), hi = std::min(r1, first_row[k + 1]);
      if (lo < hi) run_rows(args[k], lo - first_row[k], hi - first_row[k]);
    }
  };
  if (bytes * m < inline_bytes()) {
    rows(0, first_row[n]);
    return;
  }
  pool.for_ranges(first_row[n], kRowGrain, rows);
}

}  // namespace tessera::kernels
