// Independent reference for LoRA adapters (issue 45 (b)): tiny random-weight llama (Llama-3.1 rope
// scaling), qwen2 (q/k/v biases) and gemma3 (16-token window) models built with Hugging Face
// transformers, each with a random PEFT LoRA (r 8, alpha 16, q/k/v/o/gate/up/down, B != 0),
// converted to GGUF (the adapter in llama.cpp's LoRA layout), and peft's float32 logits at every
// position of a 32-token teacher-forced sequence, with the adapter and without
// (tests/data/lora_peft, scripts/gen_lora_peft_goldens.py, offline). tessera loads the base and
// the adapter with its own loaders and runs its forward (prefill and decode chunks): within 1e-3
// absolute of peft with the adapter, of the base logits without it and with the adapter's scale 0.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "forward_harness.h"
#include "model/lora_adapter.h"

namespace tessera {
namespace {

constexpr float kMaxAbsF32 = 1e-3f;
// The adapter must move the logits far more than the tolerance, or the comparison proves nothing
// (measured: 3.7 to 4.8 at worst).
constexpr float kMinAdapterEffect = 1.0f;

const std::string kData = TESSERA_PROJECT_TESTDATA_DIR "/";

using Logits = std::vector<std::vector<float>>;  // [32][vocab]

struct Golden {
  std::string base_gguf;  // relative to tests/data
  float alpha = 0.0f;
  int32_t rank = 0;
  std::vector<int32_t> tokens;
  Logits lora, base;
};

Golden load_golden(const std::string& name) {
  std::ifstream in(kData + "lora_peft/" + name + ".logits.json");
  const auto j = nlohmann::json::parse(in);
  return {j.at("base_gguf").get<std::string>(), j.at("alpha").get<float>(), j.at("rank").get<int32_t>(),
          j.at("tokens").get<std::vector<int32_t>>(), j.at("lora_logits").get<Logits>(),
          j.at("base_logits").get<Logits>()};
}

// Every position, fed as chunks of 5, 1, 17, 1, 1 and 7 tokens through `adapter` (or none).
Logits run_all_positions(const LlamaModel& model, const LoraAdapter* adapter, const std::vector<int32_t>& tokens) {
  testing::SingleSequence seq(model, 64, 16);
  seq.set_adapter(adapter);
  return testing::feed_in_chunks(seq, tokens, {5, 1, 17, 1, 1, 7}, model.config().vocab_size);
}

struct Diff {
  float max_abs = 0.0f;
  int32_t position = -1;
};

Diff max_abs_diff(const Logits& got, const Logits& want) {
  Diff d;
  EXPECT_EQ(got.size(), want.size());
  for (size_t p = 0; p < std::min(got.size(), want.size()); ++p) {
    EXPECT_EQ(got[p].size(), want[p].size());
    for (size_t v = 0; v < std::min(got[p].size(), want[p].size()); ++v) {
      const float e = std::fabs(got[p][v] - want[p][v]);
      if (!(e <= d.max_abs)) d.max_abs = e, d.position = static_cast<int32_t>(p);  // NaN counts as worst
    }
  }
  return d;
}

class LoraPeft : public ::testing::TestWithParam<const char*> {};

TEST_P(LoraPeft, LogitsMatchPeftAtEveryPosition) {
  const std::string name = GetParam();
  const Golden g = load_golden(name);
  ASSERT_EQ(g.tokens.size(), 32u);
  auto model = LlamaModel::load(kData + g.base_gguf);
  ASSERT_TRUE(model.ok()) << model.error().message;
  const std::string lora_path = kData + "lora_peft/" + name + ".lora.f32.gguf";
  auto adapter = LoraAdapter::load(lora_path, (*model)->config());
  ASSERT_TRUE(adapter.ok()) << adapter.error().message;
  EXPECT_EQ((*adapter)->alpha(), g.alpha);
  EXPECT_EQ((*adapter)->max_rank(), g.rank);
  EXPECT_EQ((*adapter)->num_targets(), kNumLoraTargets * (*model)->config().num_layers);

  const Diff lora = max_abs_diff(run_all_positions(**model, adapter->get(), g.tokens), g.lora);
  const Diff base = max_abs_diff(run_all_positions(**model, nullptr, g.tokens), g.base);
  auto zero = LoraAdapter::load(lora_path, (*model)->config(), {.max_rank = 64, .scale = 0.0f});
  ASSERT_TRUE(zero.ok()) << zero.error().message;
  const Diff scale0 = max_abs_diff(run_all_positions(**model, zero->get(), g.tokens), g.base);
  const Diff effect = max_abs_diff(g.lora, g.base);
  std::printf("%-6s max |tessera - peft| %.2e at position %d; base %.2e; scale 0 vs base %.2e; "
              "|peft lora - base| %.2f\n",
              name.c_str(), lora.max_abs, lora.position, base.max_abs, scale0.max_abs, effect.max_abs);
  EXPECT_LT(lora.max_abs, kMaxAbsF32) << "with the adapter, position " << lora.position;
  EXPECT_LT(base.max_abs, kMaxAbsF32) << "base model, position " << base.position;
  EXPECT_LT(scale0.max_abs, kMaxAbsF32) << "adapter at scale 0, position " << scale0.position;
  EXPECT_GT(effect.max_abs, kMinAdapterEffect);
}

INSTANTIATE_TEST_SUITE_P(Families, LoraPeft, ::testing::Values("llama", "qwen2", "gemma3"));

}  // namespace
}  // namespace tessera
