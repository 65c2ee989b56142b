// ModelConfig: the hyperparameters of a llama-family model, read from GGUF metadata
// (`<arch>.block_count`, `<arch>.attention.head_count`, ...). Architectures: llama (also Mistral,
// TinyLlama, SmolLM2, Llama-2/3 GGUFs), mistral, qwen2 (q/k/v biases, neox rope).
#pragma once
#include <cstdint>
#include <string>

#include "gguf/gguf.h"
#include "kernels/ops.h"
#include "util/status.h"

namespace tessera {

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

  int32_t q_dim() const { return num_heads * head_dim; }
  int32_t kv_dim() const { return num_kv_heads * head_dim; }
  int32_t group_size() const { return num_heads / num_kv_heads; }

  static Result<ModelConfig> from_gguf(const gguf::GgufFile& file);
};

}  // namespace tessera
