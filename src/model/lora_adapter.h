// LoraAdapter: one LoRA fine-tune of the base model, read from a llama.cpp-format adapter GGUF
// (what llama.cpp's convert_lora_to_gguf.py writes) and checked against the base model:
//   general.type = "adapter", adapter.type = "lora", general.architecture = the base model's,
//   adapter.lora.alpha (f32; 0 = no alpha/rank factor, llama.cpp's rule);
//   per target weight `<base tensor>.lora_a` of ggml shape [n_in, rank] (rank rows of n_in) and
//   `<base tensor>.lora_b` of ggml shape [rank, n_out] (n_out rows of rank); F32, F16, BF16, Q8_0.
// Targets: blk.N.{attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down}.weight.
// The delta: y = W x + (alpha / rank) * scale * B (A x), per target (kernels/lora.h).
// Every refusal names the tensor or key and what was expected: wrong architecture or type, a
// tensor the base model does not have, a lora_a without its lora_b, shapes (a transposed pair is
// named as such), rank above the cap, NaN/Inf weights; a truncated file fails in the GGUF reader.
// The weights are copied once at load (A as is, B transposed: the kernels' layout) and the file is
// closed: a pair whose two tensors are F16 in the file stays f16 (exact; a step reads half the
// bytes), any other pair becomes f32 (exact for F32, BF16 and Q8_0 values); LoraLoadOptions::storage
// can round every pair to f16 or widen every pair to f32 instead.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/lora.h"
#include "model/model_config.h"
#include "util/status.h"

namespace tessera {

// The targets of one layer, in LoraLayer::pairs order.
enum class LoraTarget : int32_t { kQ, kK, kV, kO, kGate, kUp, kDown, kCount };
inline constexpr int32_t kNumLoraTargets = static_cast<int32_t>(LoraTarget::kCount);
// The GGUF base tensor name of a target ("attn_q", ...), without "blk.N." and ".weight".
const char* lora_target_name(LoraTarget t);

struct LoraLoadOptions {
  int32_t max_rank = 64;   // --max-lora-rank: a larger rank is refused
  float scale = 1.0f;      // the user's scale (llama.cpp's --lora-scaled), times alpha / rank
  // The pairs' storage: kAuto as the file (both tensors F16: f16, else f32), or every pair f16 / f32.
  enum class Storage { kAuto, kF16, kF32 } storage = Storage::kAuto;
};

class LoraAdapter {
 public:
  static Result<std::shared_ptr<const LoraAdapter>> load(const std::string& path, const ModelConfig& base,
                                                         const LoraLoadOptions& options = {});

  // The pair of layer l's target t (empty() when the adapter leaves that weight alone).
  const kernels::LoraPair& pair(int32_t layer, LoraTarget t) const {
    return layers_[static_cast<size_t>(layer)][static_cast<size_t>(t)];
  }
  int32_t max_rank() const { return max_rank_; }
  float alpha() const { return alpha_; }
  int32_t num_targets() const { return num_targets_; }  // target weights with a pair
  size_t bytes() const { return storage_f32_.size() * sizeof(float) + storage_f16_.size() * sizeof(uint16_t); }
  const std::string& path() const { return path_; }

 private:
  LoraAdapter() = default;
  std::string path_;
  float alpha_ = 0.0f;
  int32_t max_rank_ = 0;
  int32_t num_targets_ = 0;
  std::vector<float> storage_f32_;     // the f32 pairs' A then Bt, back to back
  std::vector<uint16_t> storage_f16_;  // the f16 pairs' A then Bt (IEEE half bits)
  std::vector<std::array<kernels::LoraPair, kNumLoraTargets>> layers_;  // [num_layers]
};

}  // namespace tessera
