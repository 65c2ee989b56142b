// Writes LoRA adapter GGUFs in llama.cpp's format (general.type = adapter, adapter.type = lora,
// adapter.lora.alpha, `<base>.lora_a` [n_in, rank] and `<base>.lora_b` [rank, n_out]) for a
// SyntheticShape base, with seeded random A and B, and the damage the loader must refuse.
// Also the dense twin: a copy of a base GGUF whose target weights are W + scale * B A in f32.
#pragma once
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "kernels/quant.h"
#include "synthetic_model.h"

namespace tessera::testing {

struct SyntheticLora {
  int32_t rank = 4;
  float alpha = 8.0f;
  DType type = DType::F32;
  std::vector<std::string> targets = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
  float b_scale = 0.2f;  // B's spread (PEFT starts B at 0; a trained one is not)
  // Damage: the file's metadata and tensors are edited by this before writing.
  std::function<void(gguf::GgufWriter&)> edit_metadata;
  bool transpose_a = false;     // lora_a written [rank, n_in]
  bool drop_first_b = false;    // first target's lora_b left out
  bool nan_in_first_a = false;  // one NaN in the first lora_a
  std::string extra_tensor;     // one more pair for a base tensor name, e.g. "blk.9.attn_q.weight"
};

// The values written, per base tensor name: A [rank][n_in] and B [n_out][rank], as f32 after the
// round trip through the file's type (what the loader reads).
struct LoraValues {
  std::map<std::string, std::pair<std::vector<float>, std::vector<float>>> ab;
};

inline std::pair<int64_t, int64_t> synthetic_target_shape(const SyntheticShape& s, const std::string& t) {
  const int32_t hd = s.head_dim > 0 ? s.head_dim : s.dim / s.num_heads, q = s.num_heads * hd, kv = s.num_kv_heads * hd;
  if (t == "attn_q") return {s.dim, q};
  if (t == "attn_k" || t == "attn_v") return {s.dim, kv};
  if (t == "attn_output") return {q, s.dim};
  if (t == "ffn_gate" || t == "ffn_up") return {s.dim, s.ffn_dim};
  return {s.ffn_dim, s.dim};  // ffn_down
}

inline Status write_synthetic_lora(const std::string& path, const SyntheticShape& s, const SyntheticLora& l,
                                   uint64_t seed = 99, LoraValues* values = nullptr) {
  gguf::GgufWriter w;
  w.set_string("general.architecture", s.architecture);
  w.set_string("general.type", "adapter");
  w.set_string("general.name", "synthetic lora");
  w.set_string("adapter.type", "lora");
  w.set_float32("adapter.lora.alpha", l.alpha);
  if (l.edit_metadata) l.edit_metadata(w);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<uint8_t>> keep;
  // rows x cols f32 -> the file's type; returns the values as read back.
  auto add = [&](const std::string& name, int64_t rows, int64_t cols, float spread, bool nan) -> Result<std::vector<float>> {
    std::vector<float> v(static_cast<size_t>(rows * cols));
    for (float& x : v) x = spread * normal(rng);
    if (nan) v[1] = std::nanf("");
    const size_t rb = dtype_row_bytes(l.type, cols);
    std::vector<uint8_t>& bytes = keep.emplace_back(rb * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      kernels::quantize_row_ref(l.type, v.data() + r * cols, bytes.data() + static_cast<size_t>(r) * rb, cols);
      kernels::dequantize_row_ref(l.type, bytes.data() + static_cast<size_t>(r) * rb, v.data() + r * cols, cols);
    }
    TESSERA_TRY(w.add_tensor_ref(name, {cols, rows}, l.type, bytes));
    return v;
  };
  bool first = true;
  auto add_pair = [&](const std::string& base, int64_t n_in, int64_t n_out) -> Status {
    auto a = l.transpose_a ? add(base + ".lora_a", n_in, l.rank, 0.1f, first && l.nan_in_first_a)
                           : add(base + ".lora_a", l.rank, n_in, 0.1f, first && l.nan_in_first_a);
    if (!a) return a.error();
    std::vector<float> b;
    if (!(first && l.drop_first_b)) {
      auto bb = add(base + ".lora_b", n_out, l.rank, l.b_scale, false);
      if (!bb) return bb.error();
      b = std::move(*bb);
    }
    if (values) values->ab[base] = {std::move(*a), std::move(b)};
    first = false;
    return ok_status();
  };
  for (int32_t layer = 0; layer < s.num_layers; ++layer) {
    for (const std::string& t : l.targets) {
      const auto [n_in, n_out] = synthetic_target_shape(s, t);
      TESSERA_TRY(add_pair("blk." + std::to_string(layer) + "." + t + ".weight", n_in, n_out));
    }
  }
  if (!l.extra_tensor.empty()) TESSERA_TRY(add_pair(l.extra_tensor, s.dim, s.dim));
  return w.write(path);
}

// The dense twin of base + adapter: every metadata entry and tensor of `base_path` copied, the
// adapter's targets replaced by W + scale * B A (f32; the base's weights must be f32).
inline Status write_merged_model(const std::string& base_path, const LoraValues& v, int32_t rank, float alpha,
                                 const std::string& out_path) {
  auto f = gguf::GgufFile::open(base_path);
  if (!f) return f.error();
  gguf::GgufWriter w;
  for (const auto& [key, value] : f->metadata()) w.set_value(key, value);
  const float scale = alpha / static_cast<float>(rank);
  std::vector<std::vector<float>> keep;
  for (const gguf::TensorInfo& t : f->tensors()) {
    auto it = v.ab.find(t.name);
    if (it == v.ab.end()) {
      TESSERA_TRY(w.add_tensor(t.name, t.dims, t.type, {t.data, t.num_bytes}));
      continue;
    }
    const int64_t n_in = t.dims[0], n_out = t.dims[1];
    std::vector<float>& m = keep.emplace_back(static_cast<size_t>(n_in * n_out));
    std::memcpy(m.data(), t.data, m.size() * sizeof(float));
    const auto& [a, b] = it->second;
    for (int64_t o = 0; o < n_out; ++o) {
      for (int64_t c = 0; c < n_in; ++c) {
        double s = 0.0;
        for (int32_t j = 0; j < rank; ++j) s += double{b[static_cast<size_t>(o * rank + j)]} * a[static_cast<size_t>(j * n_in + c)];
        m[static_cast<size_t>(o * n_in + c)] += static_cast<float>(scale * s);
      }
    }
    TESSERA_TRY(w.add_tensor_f32(t.name, t.dims, m));
  }
  return w.write(out_path);
}

}  // namespace tessera::testing
