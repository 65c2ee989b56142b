#include "model/model_config.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tessera {

namespace {

constexpr std::array kSupportedArchitectures = {"llama", "mistral", "qwen2"};

Result<int32_t> required_int(const gguf::GgufFile& f, const std::string& key) {
  auto v = f.get_uint(key);
  if (!v) return v.error();
  if (*v == 0 || *v > (1u << 24)) {
    return make_error(ErrorCode::kCorruptFile, "metadata key '{}' has an absurd value {}", key, *v);
  }
  return static_cast<int32_t>(*v);
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
  // Every layer has at least its two norms and seven weights.
  constexpr size_t kMinTensorsPerLayer = 9;
  if (static_cast<size_t>(c.num_layers) > f.tensors().size() / kMinTensorsPerLayer ||
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
  const Rows rows[] = {{"blk.0.attn_q.weight", c.num_heads * head_dim, "head_count x head_dim"},
                       {"blk.0.attn_k.weight", c.num_kv_heads * head_dim, "head_count_kv x head_dim"},
                       {"blk.0.ffn_up.weight", c.ffn_dim, "feed_forward_length"}};
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

Result<ModelConfig> ModelConfig::from_gguf(const gguf::GgufFile& f) {
  ModelConfig c;
  auto arch = f.get_string("general.architecture");
  if (!arch) return arch.error();
  c.architecture = *arch;
  bool supported = false;
  for (const char* a : kSupportedArchitectures) supported |= c.architecture == a;
  if (!supported) {
    return make_error(ErrorCode::kUnsupported,
                      "unsupported architecture '{}' (supported: llama, mistral, qwen2)", c.architecture);
  }
  c.name = f.get_string_or("general.name", c.architecture);
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
  const double linear = f.get_float_or(a + "rope.scaling.factor", f.get_float_or(a + "rope.scale_linear", 1.0));
  const std::string scaling = f.get_string_or(a + "rope.scaling.type", "linear");
  if (scaling != "linear" && scaling != "none") {
    return make_error(ErrorCode::kUnsupported, "rope scaling type '{}' is not supported", scaling);
  }
  c.rope.freq_scale = linear > 0 ? static_cast<float>(1.0 / linear) : 1.0f;
  c.rope.layout = c.architecture == "qwen2" ? kernels::RopeLayout::kNeox : kernels::RopeLayout::kNormal;
  c.has_qkv_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;

  if (c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0) {
    return make_error(ErrorCode::kCorruptFile, "{} query heads cannot be grouped over {} KV heads",
                      c.num_heads, c.num_kv_heads);
  }
  if (c.head_dim % 2 != 0 || c.rope_dim != c.head_dim) {
    return make_error(ErrorCode::kUnsupported, "head_dim {} with rope dimension {} is not supported",
                      c.head_dim, c.rope_dim);
  }
  const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd || embd->dims.size() != 2) {
    return make_error(ErrorCode::kCorruptFile, "tensor 'token_embd.weight' is missing or not 2-D");
  }
  c.vocab_size = static_cast<int32_t>(embd->dims[1]);
  c.tied_output = f.find_tensor("output.weight") == nullptr;
  if (auto s = check_against_tensors(f, c); !s) return s.error();
  return c;
}

}  // namespace tessera
