// Element-wise and row-wise ops of the llama-family forward: rmsnorm, rope (normal and neox
// layouts), swiglu, geglu, add, scale, softmax, and the sampler's scan of a logits row.
//
// Every op has a scalar `_ref` twin (ops_ref.cpp) that the tests compare with; the plain name
// dispatches once on util isa_level() to the fastest path this build and CPU allow.
// Invariant (batch invariance, see kernels/README.md): the result for one row depends only on that
// row's inputs, never on how many rows are processed together or on the thread count.
#pragma once
#include <cstdint>

namespace tessera::kernels {

// out[r][i] = x[r][i] / sqrt(mean_i(x[r][i]^2) + eps) * weight[i], for each of num_rows rows of n.
// x and out may alias (in place).
void rmsnorm(const float* x, const float* weight, float eps, float* out, int64_t n,
             int64_t num_rows = 1);
void rmsnorm_ref(const float* x, const float* weight, float eps, float* out, int64_t n,
                 int64_t num_rows = 1);

// How a head's dimensions are paired for rotation.
enum class RopeLayout {
  kNormal,  // GGUF llama arch: rotate (x[2i], x[2i+1])
  kNeox,    // qwen2 / gpt-neox: rotate (x[i], x[i + head_dim/2])
};

struct RopeParams {
  RopeLayout layout = RopeLayout::kNormal;
  float freq_base = 10000.0f;  // theta_i = pos * freq_scale * freq_base^(-2i/head_dim)
  float freq_scale = 1.0f;     // linear position scaling (1 = none)
  // Per-frequency divisors [head_dim / 2] (Llama 3.1+ `rope_freqs`: theta_i /= freq_factors[i]),
  // or null for none. Not owned.
  const float* freq_factors = nullptr;
};

// In place over x: [num_tokens][num_heads][head_dim]; positions: [num_tokens]. head_dim is even.
// The angle is computed in double and rounded once to float, so every path gets the same cos/sin.
void rope(float* x, int64_t num_tokens, int64_t num_heads, int64_t head_dim,
          const int32_t* positions, const RopeParams& params);
void rope_ref(float* x, int64_t num_tokens, int64_t num_heads, int64_t head_dim,
              const int32_t* positions, const RopeParams& params);
// The cos/sin factors of a batch's positions, computed once and reused by every layer's rope
// (they depend on the position only): table [num_tokens][head_dim / 2][2] = (cos, sin).
void rope_table(const int32_t* positions, int64_t num_tokens, int64_t head_dim, const RopeParams& params,
                float* table);
// rope() with a table from rope_table(): the same bits.
void rope_with_table(float* x, int64_t num_tokens, int64_t num_heads, int64_t head_dim, RopeLayout layout,
                     const float* table);

// out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)). out may alias gate or up.
void swiglu(const float* gate, const float* up, float* out, int64_t n);
void swiglu_ref(const float* gate, const float* up, float* out, int64_t n);

// out[i] = gelu_tanh(gate[i]) * up[i] (Gemma's gated feed-forward), with
// gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))). out may alias gate or up.
void geglu(const float* gate, const float* up, float* out, int64_t n);
void geglu_ref(const float* gate, const float* up, float* out, int64_t n);

// out[i] = fp32_to_fp16(x[i]) (util/fp16.h: round to nearest even, NaN -> quiet NaN without its
// payload): the KV cache's f16 writes. The fast path converts 8 at a time with F16C.
void fp32_to_fp16_row(const float* x, uint16_t* out, int64_t n);
void fp32_to_fp16_row_ref(const float* x, uint16_t* out, int64_t n);

// x[i] += y[i].
void add_inplace(float* x, const float* y, int64_t n);
void add_inplace_ref(float* x, const float* y, int64_t n);

// x[i] *= s.
void scale(float* x, float s, int64_t n);
void scale_ref(float* x, float s, int64_t n);

// In place: x[i] = exp(x[i] - max) / sum_j exp(x[j] - max). n >= 1.
void softmax(float* x, int64_t n);
void softmax_ref(float* x, int64_t n);

// One read of a logits row [n] for the runner's sampling step, n in [1, 2^31): whether a token can
// be drawn from it and, if so, its greedy token. usable: no NaN (either sign), no +Inf, and at
// least one finite entry (-Inf is a masked token, allowed). argmax: the lowest index whose entry
// equals the largest entry (+0 and -0 compare equal), the token sample::argmax_lowest_id picks;
// meaningless when !usable. Why one pass: a B = 16 decode step over a 152k vocabulary used to
// check the rows, then find the max, then its first position, 2.5 reads of 9.7 MB (1.3 ms of a
// 37 ms step on Qwen2.5-0.5B).
struct LogitsScan {
  bool usable = false;
  int64_t argmax = 0;
};
LogitsScan scan_logits(const float* row, int64_t n);
LogitsScan scan_logits_ref(const float* row, int64_t n);

}  // namespace tessera::kernels
