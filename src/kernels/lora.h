// LoRA (low-rank adapter) kernels: the delta a fine-tune adds to one weight's matmul,
//   y[t] += scale * B (A x[t])       A: [rank][n_in], B: [n_out][rank], x[t]: [n_in], y[t]: [n_out]
// for a segment of batch rows t that share one adapter. The base matmul y = W x runs once for the
// whole batch (kernels/matmul.h); then each adapter's rows are "shrunk" into rank values
// (u = scale * A x[t]) and "expanded" into the output (y[t] += B u), S-LoRA/Punica's split.
//
// One call applies a list of jobs (every adapter segment of the batch, and every target weight
// that reads the same input, e.g. q, k and v) in two pool dispatches, a shrink phase over
// (job, rank row) items and an expand phase over (job, range of outputs) items: each adapter's A and
// B are read from memory once per step, whatever the number of its rows, and the number of
// dispatches does not grow with the number of adapters.
//
// Weights are f32, or f16 when the adapter file stores them so (half the bytes a step reads; the
// values are the file's, converted exactly to f32 before any arithmetic).
//
// Canonical order (batch invariance, as in matmul_canon.h): row t's delta depends on x[t] and the
// adapter alone. u[j] = scale * dot16(A[j], x[t]), where dot16 keeps 16 lane sums (lane l takes
// elements c with c % 16 == l, ascending, each term fused: s = fma(a, x, s)), folds them pairwise
// (8, 4, 2, 1 apart) and then fuses a tail c >= 16 * floor(n_in / 16) in order;
// y[t][o] = fma(u[j], Bt[j][o], y[t][o]) for j = 0, 1, ... in order. lora_apply (AVX-512 / AVX2
// registers, x86/lora_simd_impl.h, or scalar loops; lanes and outputs are independent, so the width
// changes nothing) and lora_apply_ref (plain loops, std::fma) give the same bits; the unit tests
// also compare with the dense merged weight W + scale * B A (a different rounding, within a tolerance).
#pragma once
#include <cstdint>
#include <span>

#include "util/dtype.h"
#include "util/thread_pool.h"

namespace tessera::kernels {

// One target weight's adapter pair, in the layout the kernels read.
struct LoraPair {
  const void* a = nullptr;    // [rank][n_in] row-major (GGUF lora_a, ggml shape [n_in, rank])
  const void* bt = nullptr;   // [rank][n_out]: B transposed (GGUF lora_b is [n_out][rank])
  DType dtype = DType::F32;   // of a and bt: F32 or F16 (IEEE half bits)
  int32_t rank = 0;
  int64_t n_in = 0, n_out = 0;
  float scale = 0.0f;         // (alpha / rank) * the adapter's scale; alpha 0 -> the scale alone
  bool empty() const { return rank == 0; }
};

// y[rows[i]][*] += scale * B A x[rows[i]][*] for every i. x: [*][n_in], y: [*][n_out]; rows in any
// order (each row's result depends only on that row).
struct LoraJob {
  const LoraPair* pair = nullptr;
  const float* x = nullptr;
  float* y = nullptr;
  std::span<const int32_t> rows;
};

// Runs every job. Jobs may share x; two jobs that write the same y must have disjoint rows, and no
// job's y may be another job's x. Splits the work over the pool when it is large enough to pay for
// the wake-ups (two dispatches for the whole list).
void lora_apply(std::span<const LoraJob> jobs, ThreadPool& pool);

// The scalar twin of one job: the same order as lora_apply, plain loops, one thread.
void lora_apply_ref(const LoraJob& job);

}  // namespace tessera::kernels
