// ModelConfig: the hyperparameters of a llama-family model, read from GGUF metadata
// (`<arch>.block_count`, `<arch>.attention.head_count`, ...). Architectures:
//   llama    Llama 1-3.x, TinyLlama, SmolLM2; Llama 3.1+ RoPE scaling from `rope_freqs.weight`
//   mistral  as llama, plus `attention.sliding_window` on every layer when set (Llama 3.1+ too)
//   qwen2    q/k/v biases, neox rope
//   qwen3    QK-norm (per-head rmsnorm of q and k before rope), neox rope, head_dim from key_length
//   gemma3   embeddings x sqrt(dim), GELU-tanh gated FFN, post-attention and post-FFN norms,
//            QK-norm, query scale 1/sqrt(query_pre_attn_scalar), every 6th layer global and the
//            others local (sliding window, rope base 10000), the global layers' linear rope scaling
//   phi3     fused attn_qkv and gate-up tensors, neox rope, sliding window on every layer when set
// Anything else, or a variant this code does not implement (a rope scaling type, LongRoPE
// factors, partial rotary dims), is refused here with a message that names it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/ops.h"
#include "util/status.h"

namespace tessera {

// The sampling a model's authors recommend, as current converters write it (general.sampling.temp,
// .top_k, .top_p, .min_p, .penalty_repeat; llama.cpp's key names). Each is absent when the file
// does not carry it or carries a value outside the sampler's range (ignored, named in `ignored`:
// a bad recommendation must not stop the model from loading).
struct RecommendedSampling {
  std::optional<float> temperature;         // >= 0
  std::optional<int32_t> top_k;             // >= 0 (0 = all)
  std::optional<float> top_p;               // (0, 1]
  std::optional<float> min_p;               // [0, 1]
  std::optional<float> repetition_penalty;  // > 0
  std::vector<std::string> ignored;         // keys present but unusable
  bool any() const { return temperature || top_k || top_p || min_p || repetition_penalty; }
  static RecommendedSampling from_gguf(const gguf::GgufFile& file);
};

struct ModelConfig {
  std::string architecture;   // general.architecture
  std::string name;           // general.name
  int32_t num_layers = 0;
  int32_t dim = 0;            // embedding width
  int32_t ffn_dim = 0;        // SwiGLU hidden width
  int32_t num_heads = 0;      // query heads
  int32_t num_kv_heads = 0;   // key/value heads (GQA when < num_heads, MQA when 1)
  int32_t head_dim = 0;       // per head; usually dim / num_heads
  int32_t rope_dim = 0;       // rotated dims per head (== head_dim for every supported model)
  int32_t vocab_size = 0;
  int32_t context_length = 0; // trained context (max positions)
  float rms_eps = 1e-5f;
  kernels::RopeParams rope;   // layout (normal for llama, neox for qwen2), base, linear scale
  bool has_qkv_bias = false;  // qwen2
  bool tied_output = false;   // no output.weight: logits use token_embd
  std::vector<float> rope_freq_factors;  // [head_dim / 2] Llama 3.1+ `rope_freqs`; empty: none

  enum class Activation { kSilu, kGeluTanh };
  Activation ffn_activation = Activation::kSilu;  // gated FFN: act(x Wgate) * (x Wup)
  float embedding_scale = 1.0f;  // gemma3: sqrt(dim), applied to each embedding row
  float attn_scale = 0.0f;       // query scale in attention (1/sqrt(head_dim) unless the family says)
  bool has_qk_norm = false;      // gemma3, qwen3: attn_q_norm / attn_k_norm [head_dim] per head
  bool has_post_norms = false;   // gemma3: post_attention_norm, post_ffw_norm before each residual add
  bool fused_qkv = false;        // phi3: attn_qkv [q_dim + 2 kv_dim][dim]
  bool fused_gate_up = false;    // phi3: ffn_up [2 ffn_dim][dim], gate rows first

  // Sliding-window layers: a local layer's query at p sees keys (p - sliding_window, p] and
  // rotates with rope_local; global layers see all keys and rotate with `rope`.
  int32_t sliding_window = 0;        // 0: no local layers
  std::vector<uint8_t> layer_local;  // [num_layers]: 1 = local (sliding-window) layer
  kernels::RopeParams rope_local;    // gemma3: base 10000, no scaling
  bool is_local(int32_t layer) const {
    return !layer_local.empty() && layer_local[static_cast<size_t>(layer)] != 0;
  }
  int32_t window_of(int32_t layer) const { return is_local(layer) ? sliding_window : 0; }
  int32_t num_local_layers() const;
  // "gemma3, 18 layers (15 local with a 512-token window + 3 global), 1 KV head x 256"
  std::string describe() const;

  int32_t q_dim() const { return num_heads * head_dim; }
  int32_t kv_dim() const { return num_kv_heads * head_dim; }
  int32_t group_size() const { return num_heads / num_kv_heads; }

  RecommendedSampling sampling;  // general.sampling.*

  static Result<ModelConfig> from_gguf(const gguf::GgufFile& file);
};

}  // namespace tessera
