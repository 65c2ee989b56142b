// The batched paged forward on the shapes of the llama family's members (scaled-down synthetic
// GGUFs written by the GGUF writer): TinyLlama (GQA 8:1), Llama-2 (MHA), Llama-3 (GQA, rope base
// 500000, tied output), Mistral (its own architecture name, rope base 1e6), Qwen2 (q/k/v biases,
// neox rope, tied), MQA, and quantized weights. Each: config read right, and the fast forward's
// logits (prefill in awkward chunks, then decode) match the fp32 reference forward.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "forward_harness.h"
#include "ref/forward_ref.h"
#include "synthetic_model.h"

namespace tessera {
namespace {

// Max |fast - ref| relative to the largest |ref| logit, per weight type. F32 weights differ only in
// summation order; quantized ones also in the fast path's 8-bit activations.
constexpr float kMaxRelDiffF32 = 1e-4f;
constexpr float kMaxRelDiffQuantized = 0.05f;

std::vector<testing::SyntheticShape> shapes() {
  using S = testing::SyntheticShape;
  std::vector<S> v;
  v.push_back(S{.name = "tinyllama_mqa", .num_heads = 8, .num_kv_heads = 1});  // group of 8, as 32:4
  v.push_back(S{.name = "llama2_mha", .num_heads = 8, .num_kv_heads = 8});
  v.push_back(S{.name = "llama3", .num_heads = 8, .num_kv_heads = 2, .rope_base = 500000.0f, .tied_output = true});
  v.push_back(S{.name = "mistral", .architecture = "mistral", .num_heads = 8, .num_kv_heads = 2, .rope_base = 1e6f});
  v.push_back(S{.name = "qwen2", .architecture = "qwen2", .num_heads = 8, .num_kv_heads = 2, .rope_base = 1e6f,
                .qkv_bias = true, .tied_output = true});
  v.push_back(S{.name = "smollm2_gqa3", .dim = 192, .num_heads = 3 * 2, .num_kv_heads = 2, .ffn_dim = 512});
  v.push_back(S{.name = "q8_0", .num_heads = 8, .num_kv_heads = 2, .weight_type = DType::Q8_0});
  v.push_back(S{.name = "q4_1", .num_heads = 8, .num_kv_heads = 2, .weight_type = DType::Q4_1});
  v.push_back(S{.name = "f16", .num_heads = 8, .num_kv_heads = 2, .weight_type = DType::F16});
  // Layers 0 and 1 local with a window of 8 (the 37 tokens run far past it), layer 2 global.
  v.push_back(S{.name = "gemma3", .architecture = "gemma3", .num_layers = 3, .num_heads = 4, .num_kv_heads = 1,
                .rope_base = 1e6f, .tied_output = true, .head_dim = 48, .qk_norm = true, .post_norms = true,
                .sliding_window = 8, .window_pattern = 3});
  v.push_back(S{.name = "gemma3_q8_0", .architecture = "gemma3", .num_layers = 3, .num_heads = 4, .num_kv_heads = 1,
                .rope_base = 1e6f, .tied_output = true, .weight_type = DType::Q8_0, .head_dim = 64, .qk_norm = true,
                .post_norms = true, .sliding_window = 20, .window_pattern = 3});
  v.push_back(S{.name = "qwen3", .architecture = "qwen3", .num_heads = 8, .num_kv_heads = 2, .rope_base = 1e6f,
                .tied_output = true, .head_dim = 32, .qk_norm = true});
  v.push_back(S{.name = "phi3", .architecture = "phi3", .num_heads = 8, .num_kv_heads = 8, .fused = true});
  v.push_back(S{.name = "phi3_window", .architecture = "phi3", .num_heads = 8, .num_kv_heads = 8,
                .sliding_window = 10, .fused = true});
  v.push_back(S{.name = "llama3_1_rope", .num_heads = 8, .num_kv_heads = 2, .rope_base = 500000.0f, .rope_freqs = true});
  return v;
}

TEST(ModelShapes, FastForwardMatchesReference) {
  for (const testing::SyntheticShape& shape : shapes()) {
    SCOPED_TRACE(shape.name);
    const std::string path = ::testing::TempDir() + "/synthetic_" + shape.name + ".gguf";
    ASSERT_TRUE(testing::write_synthetic_model(path, shape).ok());
    auto fast = LlamaModel::load(path);
    ASSERT_TRUE(fast.ok()) << fast.error().message;
    const ModelConfig& c = (*fast)->config();
    EXPECT_EQ(c.num_kv_heads, shape.num_kv_heads);
    EXPECT_EQ(c.head_dim, shape.head_dim > 0 ? shape.head_dim : shape.dim / shape.num_heads);
    EXPECT_EQ(c.tied_output, shape.tied_output);
    EXPECT_EQ(c.has_qkv_bias, shape.qkv_bias);
    EXPECT_EQ(c.has_qk_norm, shape.qk_norm);
    EXPECT_EQ(c.sliding_window, shape.sliding_window);
    EXPECT_EQ(c.num_local_layers(), shape.window_pattern > 0 ? shape.num_layers - shape.num_layers / shape.window_pattern
                                    : shape.sliding_window > 0 ? shape.num_layers : 0);
    EXPECT_EQ(c.rope_freq_factors.size(), shape.rope_freqs ? static_cast<size_t>(c.head_dim / 2) : 0u);
    const bool neox = shape.architecture != "llama" && shape.architecture != "mistral";
    EXPECT_EQ(c.rope.layout, neox ? kernels::RopeLayout::kNeox : kernels::RopeLayout::kNormal);
    auto slow = ref::RefModel::load(path);
    ASSERT_TRUE(slow.ok()) << slow.error().message;

    std::vector<int32_t> tokens;
    for (int32_t i = 0; i < 37; ++i) tokens.push_back((i * 7919 + 13) % shape.vocab);
    testing::SingleSequence seq(**fast, 64, 16);
    float worst = 0.0f;
    std::vector<float> ref_logits;
    size_t start = 0;
    for (size_t chunk : {5u, 11u, 1u, 16u, 1u, 1u, 1u, 1u}) {
      const size_t end = std::min(tokens.size(), start + chunk);
      const std::vector<float> fast_logits = seq.feed({tokens.begin() + start, tokens.begin() + end});
      for (size_t i = start; i < end; ++i) ref_logits = (*slow)->forward(tokens[i], static_cast<int32_t>(i));
      float max_ref = 0.0f, max_diff = 0.0f;
      for (size_t v = 0; v < ref_logits.size(); ++v) {
        max_ref = std::max(max_ref, std::fabs(ref_logits[v]));
        max_diff = std::max(max_diff, std::fabs(fast_logits[v] - ref_logits[v]));
      }
      worst = std::max(worst, max_diff / max_ref);
      start = end;
    }
    const bool float_weights = shape.weight_type == DType::F32 || shape.weight_type == DType::F16;
    EXPECT_LT(worst, float_weights ? kMaxRelDiffF32 : kMaxRelDiffQuantized);
    std::printf("%-14s worst relative logit difference %.2e\n", shape.name.c_str(), worst);
    std::remove(path.c_str());
  }
}

TEST(ModelShapes, UnsupportedArchitectureIsAClearError) {
  testing::SyntheticShape s{.name = "gptj", .architecture = "gptj"};
  const std::string path = ::testing::TempDir() + "/synthetic_gptj.gguf";
  ASSERT_TRUE(testing::write_synthetic_model(path, s).ok());
  auto m = LlamaModel::load(path);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(m.error().message.find("unsupported architecture 'gptj'"), std::string::npos) << m.error().message;
  std::remove(path.c_str());
}

TEST(ModelShapes, MissingTensorNamesTheTensor) {
  // A file whose writer forgot the FFN of layer 1 (we write it, then load a truncated copy).
  testing::SyntheticShape s{.name = "broken"};
  s.num_layers = 2;
  const std::string path = ::testing::TempDir() + "/synthetic_broken.gguf";
  ASSERT_TRUE(testing::write_synthetic_model(path, s).ok());
  // Claim three layers: blk.2.* does not exist.
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file.ok());
  gguf::GgufWriter w;
  for (const auto& [k, v] : file->metadata()) w.set_value(k, v);
  w.set_uint32("llama.block_count", 3);
  for (const auto& t : file->tensors()) ASSERT_TRUE(w.add_tensor_ref(t.name, t.dims, t.type, {t.data, t.num_bytes}).ok());
  const std::string path3 = path + ".3";
  ASSERT_TRUE(w.write(path3).ok());
  auto m = LlamaModel::load(path3);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("blk.2.attn_norm.weight"), std::string::npos) << m.error().message;
  std::remove(path.c_str());
  std::remove(path3.c_str());
}

// Rewrites a synthetic file with extra metadata / tensors and returns the load error.
std::string load_error_with(const testing::SyntheticShape& s, const std::string& key, const std::string& value,
                            const std::string& extra_tensor) {
  const std::string path = ::testing::TempDir() + "/synthetic_variant_" + s.name + ".gguf";
  EXPECT_TRUE(testing::write_synthetic_model(path, s).ok());
  auto file = gguf::GgufFile::open(path);
  EXPECT_TRUE(file.ok());
  gguf::GgufWriter w;
  for (const auto& [k, v] : file->metadata()) w.set_value(k, v);
  if (!key.empty()) w.set_string(key, value);
  for (const auto& t : file->tensors()) EXPECT_TRUE(w.add_tensor_ref(t.name, t.dims, t.type, {t.data, t.num_bytes}).ok());
  const std::vector<uint8_t> zeros(16 * sizeof(float), 0);
  if (!extra_tensor.empty()) {
    EXPECT_TRUE(w.add_tensor_ref(extra_tensor, {16}, DType::F32, zeros).ok());
  }
  const std::string variant = path + ".variant";
  EXPECT_TRUE(w.write(variant).ok());
  auto m = LlamaModel::load(variant);
  std::remove(path.c_str());
  std::remove(variant.c_str());
  if (m.ok()) return "";
  EXPECT_EQ(m.error().code, ErrorCode::kUnsupported);
  return m.error().message;
}

TEST(ModelShapes, UnsupportedVariantsAreRefusedByName) {
  const std::string yarn = load_error_with(testing::SyntheticShape{.name = "yarn", .architecture = "qwen3",
                                                                   .qk_norm = true},
                                           "qwen3.rope.scaling.type", "yarn", "");
  EXPECT_NE(yarn.find("rope scaling type 'yarn'"), std::string::npos) << yarn;
  const std::string longrope = load_error_with(testing::SyntheticShape{.name = "longrope", .architecture = "phi3",
                                                                       .num_kv_heads = 8, .fused = true},
                                               "", "", "rope_factors_long.weight");
  EXPECT_NE(longrope.find("LongRoPE"), std::string::npos) << longrope;
  const std::string no_window = load_error_with(
      testing::SyntheticShape{.name = "gemma_nowin", .architecture = "gemma3", .qk_norm = true, .post_norms = true},
      "", "", "");
  EXPECT_NE(no_window.find("sliding_window"), std::string::npos) << no_window;
}

}  // namespace
}  // namespace tessera
