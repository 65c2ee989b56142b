// Loading and checking a llama.cpp-format LoRA adapter GGUF (see lora_adapter.h).
#include "model/lora_adapter.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string_view>

#include "gguf/gguf.h"
#include "kernels/quant.h"
#include "util/dtype.h"
#include "util/fp16.h"

namespace tessera {

const char* lora_target_name(LoraTarget t) {
  static constexpr const char* kNames[] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                           "ffn_gate", "ffn_up", "ffn_down"};
  return kNames[static_cast<int32_t>(t)];
}

namespace {

struct TargetShape {
  int64_t n_in = 0, n_out = 0;
};

TargetShape target_shape(const ModelConfig& c, LoraTarget t) {
  switch (t) {
    case LoraTarget::kQ: return {c.dim, c.q_dim()};
    case LoraTarget::kK: return {c.dim, c.kv_dim()};
    case LoraTarget::kV: return {c.dim, c.kv_dim()};
    case LoraTarget::kO: return {c.q_dim(), c.dim};
    case LoraTarget::kGate: return {c.dim, c.ffn_dim};
    case LoraTarget::kUp: return {c.dim, c.ffn_dim};
    case LoraTarget::kDown: return {c.ffn_dim, c.dim};
    case LoraTarget::kCount: break;
  }
  return {};
}

// "blk.N.<target>.weight" -> (N, target); false when the name is no per-layer target.
bool parse_target(std::string_view base, int32_t num_layers, int32_t* layer, LoraTarget* target) {
  if (!base.starts_with("blk.") || !base.ends_with(".weight")) return false;
  base.remove_prefix(4);
  base.remove_suffix(7);
  const size_t dot = base.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot > 6) return false;
  int32_t n = 0;
  for (char ch : base.substr(0, dot)) {
    if (ch < '0' || ch > '9') return false;
    n = n * 10 + (ch - '0');
  }
  if (n >= num_layers) return false;
  const std::string_view name = base.substr(dot + 1);
  for (int32_t t = 0; t < kNumLoraTargets; ++t) {
    if (name == lora_target_name(static_cast<LoraTarget>(t))) {
      *layer = n;
      *target = static_cast<LoraTarget>(t);
      return true;
    }
  }
  return false;
}

std::string dims_text(const std::vector<int64_t>& d) { return fmt::format("[{}]", fmt::join(d, ", ")); }

// Dequantizes a 2-D tensor [rows][cols] to f32, refusing NaN or Inf (a broken fine-tune must not
// load and poison every request that names it).
Result<std::vector<float>> read_f32(const gguf::TensorInfo& t) {
  const int64_t cols = t.dims[0], rows = t.dims[1];
  std::vector<float> out(static_cast<size_t>(rows * cols));
  const size_t row_bytes = dtype_row_bytes(t.type, cols);
  for (int64_t r = 0; r < rows; ++r) {
    kernels::dequantize_row_ref(t.type, t.data + static_cast<size_t>(r) * row_bytes, out.data() + r * cols, cols);
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) {
      return make_error(ErrorCode::kCorruptFile, "tensor '{}': element {} is {} (the adapter's weights must be finite)",
                        t.name, i, out[i]);
    }
  }
  return out;
}

}  // namespace

Result<std::shared_ptr<const LoraAdapter>> LoraAdapter::load(const std::string& path, const ModelConfig& base,
                                                             const LoraLoadOptions& options) {
  auto opened = gguf::GgufFile::open(path);
  if (!opened) return opened.error().with_context("LoRA adapter '" + path + "'");
  const gguf::GgufFile& f = *opened;
  auto fail = [&](ErrorCode code, std::string message) -> Error {
    return Error{code, "LoRA adapter '" + path + "': " + message};
  };
  const std::string type = f.get_string_or("general.type", "");
  if (type != "adapter") {
    return fail(ErrorCode::kInvalidArgument,
                fmt::format("general.type is '{}', expected 'adapter' (is this a model file?)", type));
  }
  const std::string adapter_type = f.get_string_or("adapter.type", "");
  if (adapter_type != "lora") {
    return fail(ErrorCode::kUnsupported, fmt::format("adapter.type is '{}', expected 'lora'", adapter_type));
  }
  const std::string arch = f.get_string_or("general.architecture", "");
  if (arch != base.architecture) {
    return fail(ErrorCode::kInvalidArgument,
                fmt::format("architecture '{}' does not match the base model's '{}'", arch, base.architecture));
  }
  auto alpha = f.get_float("adapter.lora.alpha");
  if (!alpha) return fail(ErrorCode::kCorruptFile, "adapter.lora.alpha is missing or not a number");
  if (!std::isfinite(*alpha) || *alpha < 0) {
    return fail(ErrorCode::kInvalidArgument, fmt::format("adapter.lora.alpha is {}, expected >= 0", *alpha));
  }
  if (base.fused_qkv || base.fused_gate_up) {
    return fail(ErrorCode::kUnsupported,
                fmt::format("the base model ({}) has fused attn_qkv / gate-up tensors; LoRA on them is not supported",
                            base.architecture));
  }

  // Pair the tensors: name -> (lora_a, lora_b).
  struct Pair {
    const gguf::TensorInfo* a = nullptr;
    const gguf::TensorInfo* b = nullptr;
  };
  std::map<std::string, Pair> pairs;
  for (const gguf::TensorInfo& t : f.tensors()) {
    std::string_view name = t.name;
    const bool is_a = name.ends_with(".lora_a"), is_b = name.ends_with(".lora_b");
    if (!is_a && !is_b) {
      return fail(ErrorCode::kUnsupported,
                  fmt::format("tensor '{}' is not a .lora_a/.lora_b pair member (only LoRA pairs are supported)", t.name));
    }
    name.remove_suffix(7);
    Pair& p = pairs[std::string(name)];
    (is_a ? p.a : p.b) = &t;
  }
  if (pairs.empty()) return fail(ErrorCode::kCorruptFile, "no .lora_a/.lora_b tensors");

  std::unique_ptr<LoraAdapter> adapter(new LoraAdapter());
  adapter->path_ = path;
  adapter->alpha_ = static_cast<float>(*alpha);
  adapter->layers_.resize(static_cast<size_t>(base.num_layers));
  struct Loaded {
    int32_t layer;
    LoraTarget target;
    int32_t rank;
    std::vector<float> a, b;  // [rank][n_in], [n_out][rank]
    bool half;                // both tensors F16 in the file: kept as f16 (exact, half the bytes)
  };
  std::vector<Loaded> loaded;
  size_t total32 = 0, total16 = 0;
  for (const auto& [name, p] : pairs) {
    int32_t layer = 0;
    LoraTarget target = LoraTarget::kQ;
    if (!parse_target(name, base.num_layers, &layer, &target)) {
      return fail(ErrorCode::kInvalidArgument,
                  fmt::format("targets '{}', which is not a weight of the base model this server can adapt "
                              "(blk.0..{}.{{attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down}}.weight)",
                              name, base.num_layers - 1));
    }
    if (!p.a || !p.b) {
      return fail(ErrorCode::kCorruptFile, fmt::format("'{}' has {} but no {}", name, p.a ? "lora_a" : "lora_b",
                                                       p.a ? "lora_b" : "lora_a"));
    }
    for (const gguf::TensorInfo* t : {p.a, p.b}) {
      if (t->type != DType::F32 && t->type != DType::F16 && t->type != DType::BF16 && t->type != DType::Q8_0) {
        return fail(ErrorCode::kUnsupported,
                    fmt::format("tensor '{}': type {} (supported: F32, F16, BF16, Q8_0)", t->name, dtype_name(t->type)));
      }
      if (t->dims.size() != 2) {
        return fail(ErrorCode::kInvalidArgument, fmt::format("tensor '{}': shape {} is not 2-D", t->name, dims_text(t->dims)));
      }
    }
    const TargetShape s = target_shape(base, target);
    const int64_t rank = p.a->dims[1];
    const std::vector<int64_t> want_a = {s.n_in, rank}, want_b = {rank, s.n_out};
    if (p.a->dims != want_a || p.b->dims != std::vector<int64_t>{p.a->dims[1], s.n_out}) {
      // Transposed: the base weight's widths on the wrong axes (a pair written without the
      // converter's transpose).
      const bool transposed = p.a->dims[1] == s.n_in || p.b->dims[0] == s.n_out;
      return fail(ErrorCode::kInvalidArgument,
                  fmt::format("'{}': lora_a {} and lora_b {} do not fit the base weight (n_in {}, n_out {}): expected "
                              "lora_a [{}, rank] and lora_b [rank, {}]{}",
                              name, dims_text(p.a->dims), dims_text(p.b->dims), s.n_in, s.n_out, s.n_in, s.n_out,
                              transposed ? " (the pair looks transposed)" : ""));
    }
    if (rank < 1 || rank > options.max_rank) {
      return fail(ErrorCode::kInvalidArgument,
                  fmt::format("'{}': rank {} is above --max-lora-rank {}", name, rank, options.max_rank));
    }
    auto a = read_f32(*p.a);
    if (!a) return fail(a.error().code, a.error().message);
    auto b = read_f32(*p.b);
    if (!b) return fail(b.error().code, b.error().message);
    const bool half = options.storage == LoraLoadOptions::Storage::kAuto
                          ? p.a->type == DType::F16 && p.b->type == DType::F16
                          : options.storage == LoraLoadOptions::Storage::kF16;
    (half ? total16 : total32) += a->size() + b->size();
    loaded.push_back({layer, target, static_cast<int32_t>(rank), std::move(*a), std::move(*b), half});
  }

  // Two buffers (f32 pairs, f16 pairs): A as read, B transposed to [rank][n_out] (the expand reads
  // rows of it). An f16 value read to f32 goes back to the same f16 bits.
  adapter->storage_f32_.resize(total32);
  adapter->storage_f16_.resize(total16);
  float* next32 = adapter->storage_f32_.data();
  uint16_t* next16 = adapter->storage_f16_.data();
  for (Loaded& l : loaded) {
    const TargetShape s = target_shape(base, l.target);
    kernels::LoraPair& pair = adapter->layers_[static_cast<size_t>(l.layer)][static_cast<size_t>(l.target)];
    pair.rank = l.rank;
    pair.n_in = s.n_in;
    pair.n_out = s.n_out;
    pair.scale = (*alpha > 0 ? static_cast<float>(*alpha) / static_cast<float>(l.rank) : 1.0f) * options.scale;
    pair.dtype = l.half ? DType::F16 : DType::F32;
    std::vector<float> bt(l.b.size());
    for (int64_t o = 0; o < s.n_out; ++o) {
      for (int32_t j = 0; j < l.rank; ++j) bt[static_cast<size_t>(j * s.n_out + o)] = l.b[static_cast<size_t>(o * l.rank + j)];
    }
    if (l.half) {
      pair.a = next16;
      next16 = std::transform(l.a.begin(), l.a.end(), next16, fp32_to_fp16);
      pair.bt = next16;
      next16 = std::transform(bt.begin(), bt.end(), next16, fp32_to_fp16);
    } else {
      pair.a = next32;
      next32 = std::copy(l.a.begin(), l.a.end(), next32);
      pair.bt = next32;
      next32 = std::copy(bt.begin(), bt.end(), next32);
    }
    adapter->max_rank_ = std::max(adapter->max_rank_, l.rank);
    adapter->num_targets_ += 1;
  }
  return std::shared_ptr<const LoraAdapter>(std::move(adapter));
}

}  // namespace tessera
