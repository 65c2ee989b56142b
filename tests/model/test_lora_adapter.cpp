// model/lora_adapter.h: llama.cpp-format LoRA GGUFs loaded and checked against the base model,
// every hostile file refused with an error that names the problem, and the forward with an
// adapter against the dense twin (the base with W + scale * B A merged in, f32) on the shapes of
// several families; an adapter with B = 0 leaves every logit's bits as the base gives them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "forward_harness.h"
#include "model/lora_adapter.h"
#include "synthetic_lora.h"
#include "synthetic_model.h"
#include "util/fp16.h"

namespace tessera {
namespace {

using testing::SyntheticLora;
using testing::SyntheticShape;

std::string tmp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tessera_lora_" + std::to_string(::getpid()) + "_" + name)).string();
}

const SyntheticShape kBase{.name = "lora_base", .num_layers = 2, .dim = 64, .num_heads = 4, .num_kv_heads = 2,
                           .ffn_dim = 96, .vocab = 100};

ModelConfig base_config() {
  static const ModelConfig config = [] {
    const std::string path = tmp("base_cfg.gguf");
    EXPECT_TRUE(testing::write_synthetic_model(path, kBase).ok());
    auto m = LlamaModel::load(path);
    std::remove(path.c_str());
    return m.value()->config();
  }();
  return config;
}

// Loads an adapter written with `l`; the error text when it is refused, "" when it loads.
std::string load_error(const SyntheticLora& l, const LoraLoadOptions& o = {}) {
  const std::string path = tmp("bad.gguf");
  EXPECT_TRUE(testing::write_synthetic_lora(path, kBase, l).ok());
  auto a = LoraAdapter::load(path, base_config(), o);
  std::remove(path.c_str());
  return a ? "" : a.error().message;
}

TEST(LoraAdapter, LoadsEveryTypeWithAlphaOverRank) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    SyntheticLora l;
    l.type = t;
    l.rank = t == DType::Q8_0 ? 32 : 4;  // Q8_0 rows are 32-blocks: lora_b's rows are rank long
    l.alpha = 16.0f;
    const std::string path = tmp("ok.gguf");
    testing::LoraValues v;
    ASSERT_TRUE(testing::write_synthetic_lora(path, kBase, l, 5, &v).ok());
    auto a = LoraAdapter::load(path, base_config());
    std::remove(path.c_str());
    ASSERT_TRUE(a.ok()) << a.error().message;
    const LoraAdapter& ad = **a;
    EXPECT_EQ(ad.num_targets(), 2 * 7);
    EXPECT_EQ(ad.max_rank(), l.rank);
    const kernels::LoraPair& p = ad.pair(1, LoraTarget::kDown);
    EXPECT_EQ(p.rank, l.rank);
    EXPECT_EQ(p.n_in, 96);
    EXPECT_EQ(p.n_out, 64);
    EXPECT_FLOAT_EQ(p.scale, 16.0f / static_cast<float>(l.rank));
    const auto& [va, vb] = v.ab.at("blk.1.ffn_down.weight");
    // F16 files stay f16 (half the bytes a step reads); the other types become f32. Either way the
    // values are the file's: A as written (after the type's rounding), B transposed.
    EXPECT_EQ(p.dtype, t == DType::F16 ? DType::F16 : DType::F32);
    auto at = [&](const void* m, size_t i) {
      return p.dtype == DType::F16 ? fp16_to_fp32(static_cast<const uint16_t*>(m)[i]) : static_cast<const float*>(m)[i];
    };
    EXPECT_EQ(at(p.a, 5), va[5]);
    EXPECT_EQ(at(p.bt, 3 * 64 + 7), vb[static_cast<size_t>(7 * l.rank + 3)]);
    size_t want_bytes = 0;  // every pair's A and Bt at 2 (f16) or 4 bytes an element
    for (int32_t layer = 0; layer < 2; ++layer) {
      for (int32_t k = 0; k < kNumLoraTargets; ++k) {
        const kernels::LoraPair& q = ad.pair(layer, static_cast<LoraTarget>(k));
        want_bytes += static_cast<size_t>(q.rank * (q.n_in + q.n_out)) * (t == DType::F16 ? 2 : 4);
      }
    }
    EXPECT_EQ(ad.bytes(), want_bytes);
  }
}

// --lora-dtype: f16 rounds an F32 file's pairs to f16 (the nearest half of each value), f32 widens an
// F16 file's pairs (the same values); auto keeps each as the file has it (above).
TEST(LoraAdapter, StorageOptionRoundsOrWidensEveryPair) {
  for (const DType file_type : {DType::F32, DType::F16}) {
    SyntheticLora l;
    l.type = file_type;
    l.rank = 4;
    l.alpha = 8.0f;
    const std::string path = tmp("storage.gguf");
    testing::LoraValues v;
    ASSERT_TRUE(testing::write_synthetic_lora(path, kBase, l, 9, &v).ok());
    const auto want = file_type == DType::F32 ? LoraLoadOptions::Storage::kF16 : LoraLoadOptions::Storage::kF32;
    LoraLoadOptions o;
    o.storage = want;
    auto a = LoraAdapter::load(path, base_config(), o);
    std::remove(path.c_str());
    ASSERT_TRUE(a.ok()) << a.error().message;
    const kernels::LoraPair& p = (*a)->pair(0, LoraTarget::kUp);
    const auto& [va, vb] = v.ab.at("blk.0.ffn_up.weight");
    if (file_type == DType::F32) {
      ASSERT_EQ(p.dtype, DType::F16);
      EXPECT_EQ(static_cast<const uint16_t*>(p.a)[5], fp32_to_fp16(va[5]));
      EXPECT_EQ(static_cast<const uint16_t*>(p.bt)[2 * p.n_out + 7], fp32_to_fp16(vb[static_cast<size_t>(7 * l.rank + 2)]));
    } else {
      ASSERT_EQ(p.dtype, DType::F32);
      EXPECT_EQ(static_cast<const float*>(p.a)[5], va[5]);
      EXPECT_EQ(static_cast<const float*>(p.bt)[2 * p.n_out + 7], vb[static_cast<size_t>(7 * l.rank + 2)]);
    }
  }
}

TEST(LoraAdapter, AlphaZeroMeansScaleOne) {
  SyntheticLora l;
  l.alpha = 0.0f;
  l.targets = {"attn_q"};
  const std::string path = tmp("a0.gguf");
  ASSERT_TRUE(testing::write_synthetic_lora(path, kBase, l).ok());
  auto a = LoraAdapter::load(path, base_config(), {.max_rank = 64, .scale = 0.5f});
  std::remove(path.c_str());
  ASSERT_TRUE(a.ok());
  EXPECT_FLOAT_EQ((*a)->pair(0, LoraTarget::kQ).scale, 0.5f);
  EXPECT_TRUE((*a)->pair(0, LoraTarget::kK).empty());
}

TEST(LoraAdapter, HostileFilesAreRefusedByName) {
  auto expect = [](const std::string& err, const std::string& part) {
    EXPECT_NE(err.find(part), std::string::npos) << "error: '" << err << "', expected to contain '" << part << "'";
  };
  {
    SyntheticLora l;
    l.edit_metadata = [](gguf::GgufWriter& w) { w.set_string("general.architecture", "qwen2"); };
    expect(load_error(l), "architecture 'qwen2' does not match the base model's 'llama'");
  }
  {
    SyntheticLora l;
    l.edit_metadata = [](gguf::GgufWriter& w) { w.set_string("general.type", "model"); };
    expect(load_error(l), "general.type is 'model', expected 'adapter'");
  }
  {
    SyntheticLora l;
    l.edit_metadata = [](gguf::GgufWriter& w) { w.set_string("adapter.type", "control_vector"); };
    expect(load_error(l), "adapter.type is 'control_vector', expected 'lora'");
  }
  {
    SyntheticLora l;
    l.drop_first_b = true;
    expect(load_error(l), "'blk.0.attn_q.weight' has lora_a but no lora_b");
  }
  {
    SyntheticLora l;
    l.extra_tensor = "blk.7.attn_q.weight";  // the base has 2 layers
    expect(load_error(l), "targets 'blk.7.attn_q.weight'");
  }
  {
    SyntheticLora l;
    l.extra_tensor = "output.weight";
    expect(load_error(l), "targets 'output.weight'");
  }
  {
    SyntheticLora l;
    l.transpose_a = true;
    expect(load_error(l), "(the pair looks transposed)");
  }
  {
    SyntheticLora l;
    l.rank = 16;
    expect(load_error(l, {.max_rank = 8}), "rank 16 is above --max-lora-rank 8");
  }
  {
    SyntheticLora l;
    l.nan_in_first_a = true;
    expect(load_error(l), "element 1 is nan");
  }
  {
    SyntheticLora l;
    l.edit_metadata = [](gguf::GgufWriter& w) { w.set_string("adapter.lora.alpha", "big"); };
    expect(load_error(l), "adapter.lora.alpha is missing or not a number");
  }
  // A truncated file: the GGUF reader refuses it before any tensor is read.
  const std::string path = tmp("trunc.gguf");
  ASSERT_TRUE(testing::write_synthetic_lora(path, kBase, SyntheticLora{}).ok());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 100);
  auto a = LoraAdapter::load(path, base_config());
  std::remove(path.c_str());
  ASSERT_FALSE(a.ok());
  expect(a.error().message, "LoRA adapter '" + path + "'");
  // A model file given as an adapter.
  const std::string model_path = tmp("model.gguf");
  ASSERT_TRUE(testing::write_synthetic_model(model_path, kBase).ok());
  auto m = LoraAdapter::load(model_path, base_config());
  std::remove(model_path.c_str());
  ASSERT_FALSE(m.ok());
  expect(m.error().message, "general.type is '', expected 'adapter' (is this a model file?)");
}

// Logits of `tokens` fed as a 5-token prefill then one by one, through `adapter` or none.
std::vector<float> run(const LlamaModel& model, const LoraAdapter* adapter, const std::vector<int32_t>& tokens) {
  testing::SingleSequence seq(model, 64);
  seq.set_adapter(adapter);
  std::vector<float> all = seq.feed_rows({tokens.begin(), tokens.begin() + 5});
  for (size_t i = 5; i < tokens.size(); ++i) {
    std::vector<float> row = seq.feed({tokens[i]});
    all.insert(all.end(), row.begin(), row.end());
  }
  return all;
}

TEST(LoraAdapter, ForwardMatchesTheDenseMergedModel) {
  std::vector<SyntheticShape> shapes = {kBase};
  shapes.push_back(SyntheticShape{.name = "qwen2", .architecture = "qwen2", .num_layers = 2, .dim = 64, .num_heads = 4,
                                  .num_kv_heads = 2, .ffn_dim = 96, .vocab = 100, .qkv_bias = true, .tied_output = true});
  shapes.push_back(SyntheticShape{.name = "gemma3", .architecture = "gemma3", .num_layers = 3, .dim = 64, .num_heads = 4,
                                  .num_kv_heads = 1, .ffn_dim = 96, .vocab = 100, .tied_output = true, .head_dim = 32,
                                  .qk_norm = true, .post_norms = true, .sliding_window = 8, .window_pattern = 3});
  const std::vector<int32_t> tokens = {1, 17, 42, 99, 3, 8, 64, 23, 5, 77, 31};
  for (const SyntheticShape& s : shapes) {
    const std::string base = tmp("base.gguf"), lora = tmp("lora.gguf"), merged = tmp("merged.gguf");
    ASSERT_TRUE(testing::write_synthetic_model(base, s).ok());
    SyntheticLora l;
    l.rank = 8;
    l.alpha = 16.0f;
    testing::LoraValues v;
    ASSERT_TRUE(testing::write_synthetic_lora(lora, s, l, 3, &v).ok());
    ASSERT_TRUE(testing::write_merged_model(base, v, l.rank, l.alpha, merged).ok());
    auto base_model = LlamaModel::load(base);
    auto merged_model = LlamaModel::load(merged);
    ASSERT_TRUE(base_model.ok() && merged_model.ok());
    auto adapter = LoraAdapter::load(lora, (*base_model)->config());
    ASSERT_TRUE(adapter.ok()) << adapter.error().message;
    const std::vector<float> with = run(**base_model, adapter->get(), tokens);
    const std::vector<float> dense = run(**merged_model, nullptr, tokens);
    const std::vector<float> plain = run(**base_model, nullptr, tokens);
    float max_abs = 0.0f, max_diff = 0.0f, max_delta = 0.0f;
    for (size_t i = 0; i < with.size(); ++i) {
      max_abs = std::max(max_abs, std::fabs(dense[i]));
      max_diff = std::max(max_diff, std::fabs(dense[i] - with[i]));
      max_delta = std::max(max_delta, std::fabs(plain[i] - with[i]));
    }
    EXPECT_LT(max_diff, 1e-4f * max_abs) << s.name;
    EXPECT_GT(max_delta, 100.0f * max_diff) << s.name;  // the adapter moves the logits far more than that
    for (const std::string& p : {base, lora, merged}) std::remove(p.c_str());
  }
}

TEST(LoraAdapter, ZeroBLeavesTheBaseBitsAlone) {
  const std::string base = tmp("base0.gguf"), lora = tmp("lora0.gguf");
  ASSERT_TRUE(testing::write_synthetic_model(base, kBase).ok());
  SyntheticLora l;
  l.b_scale = 0.0f;  // PEFT's initial state: B = 0
  ASSERT_TRUE(testing::write_synthetic_lora(lora, kBase, l).ok());
  auto model = LlamaModel::load(base);
  ASSERT_TRUE(model.ok());
  auto adapter = LoraAdapter::load(lora, (*model)->config());
  ASSERT_TRUE(adapter.ok());
  const std::vector<int32_t> tokens = {1, 17, 42, 99, 3, 8, 64};
  EXPECT_EQ(run(**model, adapter->get(), tokens), run(**model, nullptr, tokens));
  std::remove(base.c_str());
  std::remove(lora.c_str());
}

}  // namespace
}  // namespace tessera
