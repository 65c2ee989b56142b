// The oracle: a readable fp32 scalar forward for one sequence with a contiguous KV cache, in the
// style of llama2.c's run.c. Every weight is dequantized to f32 up front (kernels' *_ref
// dequantizers); nothing here is optimized. Tests compare the fast batched forward with it.
// Covers every family ModelConfig accepts: QK-norm, post norms, GELU-tanh, embedding scale,
// sliding-window layers with their own rope, rope_freqs, fused QKV / gate-up (split at load).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/model_config.h"

namespace tessera::ref {

class RefModel {
 public:
  static Result<std::unique_ptr<RefModel>> load(const std::string& path);

  const ModelConfig& config() const { return config_; }
  // Runs one token at position `pos` (positions must come in order 0, 1, 2, ...) and returns the
  // logits [vocab]. The cache holds every earlier position.
  const std::vector<float>& forward(int32_t token, int32_t pos);
  void reset() { num_cached_ = 0; }

 private:
  struct Layer {
    std::vector<float> attn_norm, wq, wk, wv, wo, bq, bk, bv, ffn_norm, w_gate, w_up, w_down;
    std::vector<float> q_norm, k_norm, post_attn_norm, post_ffn_norm;  // empty where the family has none
  };
  ModelConfig config_;
  std::vector<float> token_embd_, output_norm_, output_;   // [vocab][dim], [dim], [vocab][dim]
  std::vector<Layer> layers_;
  std::vector<float> key_cache_, value_cache_;  // [layer][context][kv_dim]
  int32_t num_cached_ = 0;
  // Activations: x, xb [dim]; q [q_dim]; k, v [kv_dim]; att [context]; hb, hb2 [ffn]; logits.
  std::vector<float> x_, xb_, xb2_, q_, k_, v_, att_, hb_, hb2_, logits_;
};

}  // namespace tessera::ref
