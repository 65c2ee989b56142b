// LoRA (low-rank adapter) kernels: the delta a fine-tune adds to one weight's matmul,
//   y[t] += scale * B (A x[t])       A: [rank][n_in], B: [n_out][rank], x[t]: [n_in], y[t]: [n_out]
// for a segment of batch rows t that share one adapter. The base matmul y = W x runs once for the
// whole batch (kernels/matmul.h); then each adapter's rows are "shrunk" into rank values
// (u = scale * A x[t]) and "expanded" into the output (y[t] += B u), S-LoRA/Punica's split.
//
// Canonical order (batch invariance, as in matmul_canon.h): row t's delta depends on x[t] and the
// adapter alone. u[j] = scale * dot16(A[j], x[t]), where dot16 keeps 16 lane sums (lane l takes
// elements c with c % 16 == l, ascending), folds them pairwise (8, 4, 2, 1 apart) and then adds a
// tail c >= 16 * floor(n_in / 16) in order; y[t][o] += u[j] * Bt[j][o] for j = 0, 1, ... in order.
// lora_apply (vectorised: lanes and outputs are independent, so wider registers change nothing)
// and lora_apply_ref (plain loops) give the same bits; the unit tests also compare with the dense
// merged weight W + scale * B A (a different rounding, within a tolerance).
#pragma once
#include <cstdint>
#include <span>

#include "util/thread_pool.h"

namespace tessera::kernels {

// One target weight's adapter pair, f32, in the layout the kernels read.
struct LoraPair {
  const float* a = nullptr;   // [rank][n_in] row-major (GGUF lora_a, ggml shape [n_in, rank])
  const float* bt = nullptr;  // [rank][n_out]: B transposed (GGUF lora_b is [n_out][rank])
  int32_t rank = 0;
  int64_t n_in = 0, n_out = 0;
  float scale = 0.0f;         // (alpha / rank) * the adapter's scale; alpha 0 -> the scale alone
  bool empty() const { return rank == 0; }
};

// y[rows[i]][*] += scale * B A x[rows[i]][*] for every i. x: [*][n_in], y: [*][n_out], rows in any
// order (each row's result depends only on that row). Splits the rows over the pool when the
// segment is large enough to pay for a wake-up.
void lora_apply(const LoraPair& p, const float* x, std::span<const int32_t> rows, float* y, ThreadPool& pool);

// The scalar twin: the same order as lora_apply, plain loops, one thread.
void lora_apply_ref(const LoraPair& p, const float* x, std::span<const int32_t> rows, float* y);

}  // namespace tessera::kernels
