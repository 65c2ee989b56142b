// LlamaModel: the llama-family forward over a ragged batch of many sequences, reading and writing
// the paged KV cache through the block tables in AttnMetadata. Weights are views into the mapped
// GGUF (repacked by kernels::WeightMatrix where that pays); norms and biases are copied to f32.
//
//   x[T][dim] = embed(tokens) · embedding_scale
//   per layer:  h = rmsnorm(x)·attn_norm;  q,k,v = h·Wq,Wk,Wv (+bias);  [q,k = rmsnorm per head]
//               rope(q,k, positions; the local or global rope of the layer)
//               write_kv(k,v → slots);  a = paged_attention(q; the layer's window);
//               x += [rmsnorm](a·Wo)·post_attention_norm
//               h = rmsnorm(x)·ffn_norm;  x += [rmsnorm]((act(h·Wgate) ⊙ h·Wup)·Wdown)·post_ffw_norm
//   logits[R][vocab] = rmsnorm(x[rows])·output_norm · Wout   (only the R rows that need them)
// [..] only where the family has it (ModelConfig: gemma3, qwen3); act is silu or gelu-tanh. Fused
// tensors (phi3's attn_qkv and gate-up) are loaded as views of their row ranges.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "model/kv_storage.h"
#include "model/model_config.h"
#include "util/aligned_vector.h"
#include "util/thread_pool.h"

namespace tessera {

struct LayerWeights {
  std::vector<float> attn_norm;             // [dim]
  kernels::WeightMatrix wq, wk, wv, wo;     // [q_dim][dim], [kv_dim][dim] x2, [dim][q_dim]
  std::vector<float> bq, bk, bv;            // [q_dim], [kv_dim], [kv_dim]; empty without bias
  std::vector<float> ffn_norm;              // [dim]
  kernels::WeightMatrix w_gate, w_up, w_down;  // [ffn][dim] x2, [dim][ffn]
  std::vector<float> q_norm, k_norm;        // [head_dim] each (QK-norm); empty without
  std::vector<float> post_attn_norm, post_ffn_norm;  // [dim] each (gemma3); empty without
};

// One forward step's inputs (plain data, built by the runner).
class LoraAdapter;

// Rows lora_rows[begin, end) of a ForwardBatch run through `adapter` (model/lora_adapter.h).
struct LoraSegment {
  const LoraAdapter* adapter = nullptr;
  int32_t begin = 0, end = 0;
};

struct ForwardBatch {
  std::span<const int32_t> tokens;          // [num_tokens]
  std::span<const int32_t> positions;       // [num_tokens]
  kernels::AttnMetadata attn;               // CSR over the sequences; slot_mapping per token (group 0)
  // [num_groups] the same rows addressed through each KV-cache group's block tables and slots
  // (kv/kv_cache_layout.h); empty = every layer reads `attn`. KvStorage::group_of(layer) picks one.
  std::span<const kernels::AttnMetadata> group_attn;
  std::span<const int32_t> logits_rows;     // rows (token indices) whose logits are wanted, ascending
  // LoRA: the rows of adapted sequences grouped by adapter (ForwardBatchBuilder), one segment per
  // adapter; rows in no segment use the base weights alone. Empty = no adapter in this step.
  std::span<const int32_t> lora_rows;
  std::span<const LoraSegment> lora_segments;

  const kernels::AttnMetadata& attn_of_group(int32_t group) const {
    return group_attn.empty() ? attn : group_attn[static_cast<size_t>(group)];
  }
};

// Preallocated activations for up to max_tokens tokens per step: no allocation in a step.
class ForwardWorkspace {
 public:
  ForwardWorkspace(const ModelConfig& config, int32_t max_tokens, int32_t max_seqs,
                   int32_t max_context, int32_t num_threads);
  int32_t max_tokens() const { return max_tokens_; }

 private:
  friend class LlamaModel;
  int32_t max_tokens_;
  // Cache-line aligned: the matmuls store whole lines of their output rows (util/aligned_vector.h).
  AlignedVector<float> x, h, q, k, v, attn, gate, up;  // [max_tokens][width]
  AlignedVector<float> final_rows;                     // [max_tokens][dim]
  std::vector<float> rope_cs;                          // [max_tokens][head_dim / 2][2] (cos, sin)
  std::vector<float> rope_cs_local;                    // the same for local layers (empty without)
  kernels::AttnWorkspace attn_ws;
};

using LoadProgress = std::function<void(double fraction)>;

class LlamaModel {
 public:
  static Result<std::unique_ptr<LlamaModel>> load(const std::string& path,
                                                  const LoadProgress& progress = nullptr);
  static Result<std::unique_ptr<LlamaModel>> from_gguf(gguf::GgufFile file,
                                                       const LoadProgress& progress = nullptr);

  const ModelConfig& config() const { return config_; }
  const gguf::GgufFile& file() const { return file_; }
  // Bytes of weights one forward pass streams (all matrices once, one embedding row ignored).
  size_t weight_bytes_per_pass() const { return weight_bytes_; }
  // The instruction-set path forward()'s kernels take on this machine: "scalar", "avx2" or
  // "avx512" (kernels::active_isa(); the engine's start-up line).
  static std::string_view kernels_isa();

  // Writes logits [logits_rows.size()][vocab] to `logits`.
  void forward(const ForwardBatch& batch, KvStorage& kv, ForwardWorkspace& ws, ThreadPool& pool,
               float* logits) const;

 private:
  LlamaModel() = default;

  gguf::GgufFile file_;
  ModelConfig config_;
  kernels::WeightMatrix token_embd_;  // [vocab][dim]
  kernels::WeightMatrix output_;      // [vocab][dim] (a second view of token_embd when tied)
  std::vector<float> output_norm_;    // [dim]
  std::vector<LayerWeights> layers_;
  size_t weight_bytes_ = 0;
};

}  // namespace tessera
