// Writes small synthetic llama-family GGUFs (random weights, fixed seed) in the tensor layout and
// metadata of real families — TinyLlama, Llama-2, Llama-3(.1), Mistral, Qwen2/3, Gemma 3, Phi-3 — scaled down, so the
// forward can be tested on their shapes without the real files.
#pragma once
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "kernels/quant.h"

namespace tessera::testing {

struct SyntheticShape {
  std::string name;                // test label
  std::string architecture = "llama";
  int32_t num_layers = 2, dim = 128, num_heads = 8, num_kv_heads = 2, ffn_dim = 352, vocab = 320;
  float rope_base = 10000.0f;
  bool qkv_bias = false;           // qwen2
  bool tied_output = false;        // no output.weight
  DType weight_type = DType::F32;  // of the 2-D matrices (norms stay F32)
  int32_t head_dim = 0;            // attention.key_length when set (qwen3, gemma3: q_dim != dim)
  bool qk_norm = false;            // attn_q_norm / attn_k_norm (qwen3, gemma3)
  bool post_norms = false;         // post_attention_norm / post_ffw_norm (gemma3)
  int32_t sliding_window = 0;      // attention.sliding_window
  int32_t window_pattern = 0;      // gemma3 attention.sliding_window_pattern (every n-th layer global)
  bool fused = false;              // phi3: attn_qkv and gate-up ffn_up
  bool rope_freqs = false;         // Llama 3.1: rope_freqs.weight
};

inline Status write_synthetic_model(const std::string& path, const SyntheticShape& s, uint64_t seed = 7) {
  gguf::GgufWriter w;
  const std::string a = s.architecture + ".";
  w.set_string("general.architecture", s.architecture);
  w.set_string("general.name", "synthetic " + s.name);
  w.set_uint32(a + "block_count", static_cast<uint32_t>(s.num_layers));
  w.set_uint32(a + "context_length", 256);
  w.set_uint32(a + "embedding_length", static_cast<uint32_t>(s.dim));
  w.set_uint32(a + "feed_forward_length", static_cast<uint32_t>(s.ffn_dim));
  w.set_uint32(a + "attention.head_count", static_cast<uint32_t>(s.num_heads));
  w.set_uint32(a + "attention.head_count_kv", static_cast<uint32_t>(s.num_kv_heads));
  w.set_float32(a + "rope.freq_base", s.rope_base);
  w.set_float32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  if (s.head_dim > 0) {
    w.set_uint32(a + "attention.key_length", static_cast<uint32_t>(s.head_dim));
    w.set_uint32(a + "attention.value_length", static_cast<uint32_t>(s.head_dim));
  }
  if (s.sliding_window > 0) w.set_uint32(a + "attention.sliding_window", static_cast<uint32_t>(s.sliding_window));
  if (s.window_pattern > 0) w.set_uint32(a + "attention.sliding_window_pattern", static_cast<uint32_t>(s.window_pattern));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<uint8_t>> keep;
  auto add = [&](const std::string& name, int64_t rows, int64_t cols, float scale, float offset, bool matrix) -> Status {
    std::vector<float> v(static_cast<size_t>(rows * cols));
    for (float& x : v) x = offset + scale * normal(rng);
    const DType t = matrix ? s.weight_type : DType::F32;
    std::vector<uint8_t>& bytes = keep.emplace_back(dtype_row_bytes(t, cols) * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      kernels::quantize_row_ref(t, v.data() + r * cols, bytes.data() + static_cast<size_t>(r) * dtype_row_bytes(t, cols), cols);
    }
    std::vector<int64_t> dims = matrix ? std::vector<int64_t>{cols, rows} : std::vector<int64_t>{cols};
    return w.add_tensor_ref(name, dims, t, bytes);
  };
  const int32_t hd = s.head_dim > 0 ? s.head_dim : s.dim / s.num_heads, q = s.num_heads * hd, kv = s.num_kv_heads * hd;
  if (s.rope_freqs) {  // Llama-3.1-like divisors: 1 for high frequencies, up to 8 for the lowest
    std::vector<float> f(static_cast<size_t>(hd / 2));
    for (int32_t i = 0; i < hd / 2; ++i) f[static_cast<size_t>(i)] = 1.0f + 7.0f * static_cast<float>(i) / (hd / 2 - 1);
    std::vector<uint8_t>& bytes = keep.emplace_back(f.size() * sizeof(float));
    std::memcpy(bytes.data(), f.data(), bytes.size());
    TESSERA_TRY(w.add_tensor_ref("rope_freqs.weight", {hd / 2}, DType::F32, bytes));
  }
  const float ws = 1.0f / std::sqrt(static_cast<float>(s.dim));
  TESSERA_TRY(add("token_embd.weight", s.vocab, s.dim, 1.0f, 0.0f, true));
  TESSERA_TRY(add("output_norm.weight", 1, s.dim, 0.1f, 1.0f, false));
  if (!s.tied_output) TESSERA_TRY(add("output.weight", s.vocab, s.dim, ws, 0.0f, true));
  for (int32_t l = 0; l < s.num_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    TESSERA_TRY(add(p + "attn_norm.weight", 1, s.dim, 0.1f, 1.0f, false));
    if (s.fused) {
      TESSERA_TRY(add(p + "attn_qkv.weight", q + 2 * kv, s.dim, ws, 0.0f, true));
    } else {
      TESSERA_TRY(add(p + "attn_q.weight", q, s.dim, ws, 0.0f, true));
      TESSERA_TRY(add(p + "attn_k.weight", kv, s.dim, ws, 0.0f, true));
      TESSERA_TRY(add(p + "attn_v.weight", kv, s.dim, ws, 0.0f, true));
    }
    if (s.qk_norm) {
      TESSERA_TRY(add(p + "attn_q_norm.weight", 1, hd, 0.1f, 1.0f, false));
      TESSERA_TRY(add(p + "attn_k_norm.weight", 1, hd, 0.1f, 1.0f, false));
    }
    if (s.post_norms) {
      TESSERA_TRY(add(p + "post_attention_norm.weight", 1, s.dim, 0.1f, 1.0f, false));
      TESSERA_TRY(add(p + "post_ffw_norm.weight", 1, s.dim, 0.1f, 1.0f, false));
    }
    if (s.qkv_bias) {
      TESSERA_TRY(add(p + "attn_q.bias", 1, q, 0.1f, 0.0f, false));
      TESSERA_TRY(add(p + "attn_k.bias", 1, kv, 0.1f, 0.0f, false));
      TESSERA_TRY(add(p + "attn_v.bias", 1, kv, 0.1f, 0.0f, false));
    }
    TESSERA_TRY(add(p + "attn_output.weight", s.dim, q, ws, 0.0f, true));
    TESSERA_TRY(add(p + "ffn_norm.weight", 1, s.dim, 0.1f, 1.0f, false));
    if (s.fused) {
      TESSERA_TRY(add(p + "ffn_up.weight", 2 * s.ffn_dim, s.dim, ws, 0.0f, true));
    } else {
      TESSERA_TRY(add(p + "ffn_gate.weight", s.ffn_dim, s.dim, ws, 0.0f, true));
      TESSERA_TRY(add(p + "ffn_up.weight", s.ffn_dim, s.dim, ws, 0.0f, true));
    }
    TESSERA_TRY(add(p + "ffn_down.weight", s.dim, s.ffn_dim, 1.0f / std::sqrt(static_cast<float>(s.ffn_dim)), 0.0f, true));
  }
  return w.write(path);
}

}  // namespace tessera::testing
