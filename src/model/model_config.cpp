#include "model/model_config.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <span>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tessera {

namespace {

constexpr std::array kSupportedArchitectures = {"llama", "mistral", "qwen2", "qwen3", "gemma3", "phi3"};

Result<int32_t> required_int(const gguf::GgufFile& f, const std::string& key) {
  auto v = f.get_uint(key);
  if (!v) return v.error();
  if (*v == 0 || *v > (1u << 24)) {
    return make_error(ErrorCode::kCorruptFile, "metadata key '{}' has an absurd value {}", key, *v);
  }
  return static_cast<int32_t>(*v);
}

// The position scaling of `<arch>.rope.scaling.*`: linear (or none) is implemented; yarn,
// longrope and the rest are refused by name.
Result<float> linear_rope_scale(const gguf::GgufFile& f, const std::string& a) {
  const std::string scaling = f.get_string_or(a + "rope.scaling.type", "linear");
  if (scaling != "linear" && scaling != "none") {
    return make_error(ErrorCode::kUnsupported, "rope scaling type '{}' is not supported (supported: linear, none)",
                      scaling);
  }
  if (scaling == "none") return 1.0f;
  const double linear = f.get_float_or(a + "rope.scaling.factor", f.get_float_or(a + "rope.scale_linear", 1.0));
  return linear > 0 ? static_cast<float>(1.0 / linear) : 1.0f;
}

// Llama 3.1+: the converter folds the rope_scaling (factor, low/high frequency factors, original
// context) into one divisor per frequency, the tensor `rope_freqs.weight` [head_dim / 2] (F32).
Status read_rope_freqs(const gguf::GgufFile& f, ModelConfig& c) {
  const gguf::TensorInfo* t = f.find_tensor("rope_freqs.weight");
  if (t == nullptr) return ok_status();
  if (t->type != DType::F32 || t->dims.size() != 1 || t->dims[0] != c.head_dim / 2) {
    return make_error(ErrorCode::kUnsupported, "tensor 'rope_freqs.weight' must be F32 [{}]", c.head_dim / 2);
  }
  const auto* data = reinterpret_cast<const float*>(t->data);
  c.rope_freq_factors.assign(data, data + c.head_dim / 2);
  for (float x : c.rope_freq_factors) {
    if (!(x > 0.0f) || !std::isfinite(x)) {
      return make_error(ErrorCode::kCorruptFile, "tensor 'rope_freqs.weight' holds a factor {} (must be > 0)", x);
    }
  }
  return ok_status();
}

// Gemma 3: the file gives the global rope base and scaling; the local layers use base 10000 (the
// model's rope_local_base_freq, which converters do not write) unless the file says otherwise.
// Every `pattern`-th layer is global (Gemma 3: 6, layers 5, 11, 17, ...).
Status read_gemma3(const gguf::GgufFile& f, const std::string& a, ModelConfig& c) {
  c.ffn_activation = ModelConfig::Activation::kGeluTanh;
  c.embedding_scale = std::sqrt(static_cast<float>(c.dim));
  c.has_qk_norm = true;
  c.has_post_norms = true;
  c.rope.layout = kernels::RopeLayout::kNeox;
  // query_pre_attn_scalar: head_dim for every Gemma 3 size but 27B (62 layers), whose
  // dim / num_heads (168) the converters do not write either.
  const double fallback_scalar = c.num_layers == 62 ? static_cast<double>(c.dim / c.num_heads) : c.head_dim;
  const double scalar = f.get_float_or(a + "attention.query_pre_attn_scalar", fallback_scalar);
  c.attn_scale = static_cast<float>(1.0 / std::sqrt(scalar));
  c.rope_local = kernels::RopeParams{kernels::RopeLayout::kNeox,
                                     static_cast<float>(f.get_float_or(a + "rope.freq_base_swa", 10000.0)), 1.0f};
  c.sliding_window = static_cast<int32_t>(f.get_uint_or(a + "attention.sliding_window", 0));
  const auto pattern = static_cast<int32_t>(f.get_uint_or(a + "attention.sliding_window_pattern", 6));
  if (c.sliding_window <= 0 || pattern <= 0) {
    return make_error(ErrorCode::kUnsupported, "gemma3 without '{}attention.sliding_window' is not supported", a);
  }
  c.layer_local.resize(static_cast<size_t>(c.num_layers));
  for (int32_t l = 0; l < c.num_layers; ++l) c.layer_local[static_cast<size_t>(l)] = (l + 1) % pattern != 0;
  return ok_status();
}

// A window on every layer (Mistral v0.1, Phi-3 mini/medium): all layers local, one rope.
void window_on_every_layer(const gguf::GgufFile& f, const std::string& a, ModelConfig& c) {
  c.sliding_window = static_cast<int32_t>(f.get_uint_or(a + "attention.sliding_window", 0));
  if (c.sliding_window > 0 && c.sliding_window < c.context_length) {
    c.layer_local.assign(static_cast<size_t>(c.num_layers), 1);
    c.rope_local = c.rope;
  } else {
    c.sliding_window = 0;
  }
}

// Hyperparameters size buffers (layers, activations, the KV cache), so each one is checked
// against the tensors the file actually holds before anything is sized from it: a hostile
// block_count = 2^24 is refused here, not turned into a 16 Mi-entry layer table.
Status check_against_tensors(const gguf::GgufFile& f, const ModelConfig& c) {
  const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
  if (embd->dims[0] != c.dim) {
    return make_error(ErrorCode::kCorruptFile, "embedding_length {} but 'token_embd.weight' rows are {} wide",
                      c.dim, embd->dims[0]);
  }
  // Every layer has at least its two norms and seven weights (phi3's fused ones: four weights).
  const size_t min_tensors_per_layer = c.fused_qkv ? 6 : 9;
  if (static_cast<size_t>(c.num_layers) > f.tensors().size() / min_tensors_per_layer ||
      f.find_tensor(fmt::format("blk.{}.attn_norm.weight", c.num_layers - 1)) == nullptr) {
    return make_error(ErrorCode::kCorruptFile, "block_count {} but tensor 'blk.{}.attn_norm.weight' is missing ({} tensors in the file)",
                      c.num_layers, c.num_layers - 1, f.tensors().size());
  }
  if (f.find_tensor(fmt::format("blk.{}.attn_norm.weight", c.num_layers)) != nullptr) {
    return make_error(ErrorCode::kCorruptFile, "block_count {} but the file holds tensors for layer {}",
                      c.num_layers, c.num_layers);
  }
  const int64_t head_dim = c.head_dim;
  if (head_dim <= 0 || head_dim > (int64_t{1} << 16)) {
    return make_error(ErrorCode::kCorruptFile, "head dimension {} is absurd", head_dim);
  }
  struct Rows {
    const char* tensor;
    int64_t want;
    const char* from;
  };
  // phi3's fused tensors: attn_qkv holds q, k and v rows, ffn_up the gate rows then the up rows.
  const Rows separate[] = {{"blk.0.attn_q.weight", c.num_heads * head_dim, "head_count x head_dim"},
                           {"blk.0.attn_k.weight", c.num_kv_heads * head_dim, "head_count_kv x head_dim"},
                           {"blk.0.ffn_up.weight", c.ffn_dim, "feed_forward_length"}};
  const Rows fused[] = {{"blk.0.attn_qkv.weight", (c.num_heads + 2 * c.num_kv_heads) * head_dim,
                         "(head_count + 2 head_count_kv) x head_dim"},
                        {"blk.0.ffn_up.weight", 2 * int64_t{c.ffn_dim}, "2 x feed_forward_length"}};
  const std::span<const Rows> rows = c.fused_qkv ? std::span<const Rows>(fused) : std::span<const Rows>(separate);
  for (const Rows& r : rows) {
    const gguf::TensorInfo* t = f.find_tensor(r.tensor);
    if (t == nullptr || t->dims.size() != 2 || t->dims[1] != r.want || t->dims[0] != c.dim) {
      return make_error(ErrorCode::kCorruptFile, "'{}' is {}, but {} and embedding_length ask for [{} x {}]",
                        r.tensor, t == nullptr ? std::string("missing") : fmt::format("{}", fmt::join(t->dims, " x ")),
                        r.from, c.dim, r.want);
    }
  }
  return ok_status();
}

}  // namespace

int32_t ModelConfig::num_local_layers() const {
  int32_t n = 0;
  for (uint8_t x : layer_local) n += x;
  return n;
}

std::string ModelConfig::describe() const {
  const int32_t local = num_local_layers();
  std::string layers = local == 0 ? fmt::format("{} layers", num_layers)
                                  : fmt::format("{} layers ({} local with a {}-token window + {} global)", num_layers,
                                                local, sliding_window, num_layers - local);
  return fmt::format("{}, {}, {} KV head{} x {}", architecture, layers, num_kv_heads, num_kv_heads == 1 ? "" : "s",
                     head_dim);
}

RecommendedSampling RecommendedSampling::from_gguf(const gguf::GgufFile& f) {
  RecommendedSampling r;
  // One key: its value when present, numeric, finite and inside [lo, hi]; else noted as ignored.
  auto read = [&](const char* key, double lo, double hi, bool lo_open) -> std::optional<double> {
    if (!f.has(key)) return std::nullopt;
    auto v = f.get_float(key);
    if (!v || !std::isfinite(*v) || *v < lo || *v > hi || (lo_open && *v == lo)) {
      r.ignored.emplace_back(key);
      return std::nullopt;
    }
    return *v;
  };
  if (auto v = read("general.sampling.temp", 0.0, 100.0, false)) r.temperature = static_cast<float>(*v);
  if (auto v = read("general.sampling.top_k", 0.0, 1 << 20, false)) r.top_k = static_cast<int32_t>(*v);
  if (auto v = read("general.sampling.top_p", 0.0, 1.0, true)) r.top_p = static_cast<float>(*v);
  if (auto v = read("general.sampling.min_p", 0.0, 1.0, false)) r.min_p = static_cast<float>(*v);
  if (auto v = read("general.sampling.penalty_repeat", 0.0, 100.0, true)) r.repetition_penalty = static_cast<float>(*v);
  return r;
}

Result<ModelConfig> ModelConfig::from_gguf(const gguf::GgufFile& f) {
  ModelConfig c;
  auto arch = f.get_string("general.architecture");
  if (!arch) return arch.error();
  c.architecture = *arch;
  bool supported = false;
  for (const char* a : kSupportedArchitectures) supported |= c.architecture == a;
  if (!supported) {
    return make_error(ErrorCode::kUnsupported,
                      "unsupported architecture '{}' (supported: llama, mistral, qwen2, qwen3, gemma3, phi3)",
                      c.architecture);
  }
  c.name = f.get_string_or("general.name", c.architecture);
  c.sampling = RecommendedSampling::from_gguf(f);
  const std::string a = c.architecture + ".";

  auto layers = required_int(f, a + "block_count");
  if (!layers) return layers.error();
  auto dim = required_int(f, a + "embedding_length");
  if (!dim) return dim.error();
  auto ffn = required_int(f, a + "feed_forward_length");
  if (!ffn) return ffn.error();
  auto heads = required_int(f, a + "attention.head_count");
  if (!heads) return heads.error();
  c.num_layers = *layers;
  c.dim = *dim;
  c.ffn_dim = *ffn;
  c.num_heads = *heads;
  c.num_kv_heads = static_cast<int32_t>(f.get_uint_or(a + "attention.head_count_kv", c.num_heads));
  c.head_dim = static_cast<int32_t>(f.get_uint_or(a + "attention.key_length", c.dim / c.num_heads));
  c.rope_dim = static_cast<int32_t>(f.get_uint_or(a + "rope.dimension_count", c.head_dim));
  const uint64_t context_length = f.get_uint_or(a + "context_length", 2048);
  if (context_length == 0 || context_length > (uint64_t{1} << 24)) {
    return make_error(ErrorCode::kCorruptFile, "context_length {} is absurd (at most 2^24)", context_length);
  }
  c.context_length = static_cast<int32_t>(context_length);
  c.rms_eps = static_cast<float>(f.get_float_or(a + "attention.layer_norm_rms_epsilon", 1e-5));
  c.rope.freq_base = static_cast<float>(f.get_float_or(a + "rope.freq_base", 10000.0));
  auto freq_scale = linear_rope_scale(f, a);
  if (!freq_scale) return freq_scale.error();
  c.rope.freq_scale = *freq_scale;
  const bool neox = c.architecture == "qwen2" || c.architecture == "qwen3" || c.architecture == "phi3";
  c.rope.layout = neox ? kernels::RopeLayout::kNeox : kernels::RopeLayout::kNormal;
  c.has_qkv_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  const uint64_t value_length = f.get_uint_or(a + "attention.value_length", static_cast<uint64_t>(c.head_dim));
  if (value_length != static_cast<uint64_t>(c.head_dim)) {
    return make_error(ErrorCode::kUnsupported, "key length {} != value length {} is not supported", c.head_dim,
                      value_length);
  }

  if (c.architecture == "gemma3") {
    TESSERA_TRY(read_gemma3(f, a, c));
  } else if (c.architecture == "qwen3") {
    c.has_qk_norm = true;
  } else if (c.architecture == "phi3") {
    c.fused_qkv = f.find_tensor("blk.0.attn_qkv.weight") != nullptr;
    c.fused_gate_up = f.find_tensor("blk.0.ffn_gate.weight") == nullptr;
    if (f.find_tensor("rope_factors_long.weight") != nullptr || f.find_tensor("rope_factors_short.weight") != nullptr) {
      return make_error(ErrorCode::kUnsupported,
                        "phi3 with LongRoPE factors (rope_factors_long/short, the 128k variants) is not supported");
    }
    window_on_every_layer(f, a, c);
  } else if (c.architecture == "mistral") {
    window_on_every_layer(f, a, c);
  }
  if (c.architecture == "llama" || c.architecture == "mistral") TESSERA_TRY(read_rope_freqs(f, c));
  if (c.attn_scale == 0.0f) c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));

  if (c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0) {
    return make_error(ErrorCode::kCorruptFile, "{} query heads cannot be grouped over {} KV heads",
                      c.num_heads, c.num_kv_heads);
  }
  if (c.head_dim % 2 != 0 || c.rope_dim != c.head_dim) {
    return make_error(ErrorCode::kUnsupported,
                      "head_dim {} with rope dimension {} is not supported (partial rotary embedding)", c.head_dim,
                      c.rope_dim);
  }
  const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd || embd->dims.size() != 2) {
    return make_error(ErrorCode::kCorruptFile, "tensor 'token_embd.weight' is missing or not 2-D");
  }
  c.vocab_size = static_cast<int32_t>(embd->dims[1]);
  c.tied_output = f.find_tensor("output.weight") == nullptr;
  if (c.fused_qkv != c.fused_gate_up) {
    return make_error(ErrorCode::kUnsupported, "a fused attn_qkv with separate gate/up tensors (or the reverse) "
                      "is not supported");
  }
  if (auto s = check_against_tensors(f, c); !s) return s.error();
  return c;
}

}  // namespace tessera
