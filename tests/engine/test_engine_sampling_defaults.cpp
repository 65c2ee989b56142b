// ModelInfo::default_sampling (issue 43): the model file's general.sampling.* recommendations over
// llama.cpp's defaults. RecommendedSampling reads the keys (any numeric type, out-of-range values
// ignored and named); the engine merges them; a file with a recommended temperature of 0 makes a
// request that sets nothing greedy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "engine_harness.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/model_config.h"
#include "tessera/engine_defaults.h"

namespace tessera::testing {
namespace {

const std::string kModel = TESSERA_PROJECT_TESTDATA_DIR "/../../models/SmolLM2-135M-Instruct.Q4_1.gguf";

// A copy of `src` with extra metadata set by `edit`.
template <typename Edit>
std::string copy_with(const std::string& src, const std::string& name, Edit&& edit) {
  auto file = gguf::GgufFile::open(src);
  EXPECT_TRUE(file.ok());
  gguf::GgufWriter w;
  for (const auto& [k, v] : file->metadata()) w.set_value(k, v);
  edit(w);
  for (const auto& t : file->tensors()) EXPECT_TRUE(w.add_tensor_ref(t.name, t.dims, t.type, {t.data, t.num_bytes}).ok());
  const std::string path = ::testing::TempDir() + "/" + name + ".gguf";
  EXPECT_TRUE(w.write(path).ok());
  return path;
}

RecommendedSampling read_keys(void (*edit)(gguf::GgufWriter&)) {
  gguf::GgufWriter w;
  w.set_string("general.architecture", "llama");
  edit(w);
  const std::string path = ::testing::TempDir() + "/sampling_keys.gguf";
  EXPECT_TRUE(w.write(path).ok());
  auto file = gguf::GgufFile::open(path);
  EXPECT_TRUE(file.ok());
  RecommendedSampling r = RecommendedSampling::from_gguf(*file);
  std::remove(path.c_str());
  return r;
}

TEST(RecommendedSampling, ReadsEveryKeyInAnyNumericType) {
  const RecommendedSampling r = read_keys([](gguf::GgufWriter& w) {
    w.set_float32("general.sampling.temp", 0.6f);
    w.set_uint32("general.sampling.top_k", 20);
    w.set_float64("general.sampling.top_p", 0.95);
    w.set_float32("general.sampling.min_p", 0.0f);  // a declared zero is a choice, kept
    w.set_float32("general.sampling.penalty_repeat", 1.05f);
    w.set_string("general.sampling.sequence", "penalties;top_k;top_p;temp");  // not a knob: unread
  });
  ASSERT_TRUE(r.temperature && r.top_k && r.top_p && r.min_p && r.repetition_penalty);
  EXPECT_FLOAT_EQ(*r.temperature, 0.6f);
  EXPECT_EQ(*r.top_k, 20);
  EXPECT_FLOAT_EQ(*r.top_p, 0.95f);
  EXPECT_EQ(*r.min_p, 0.0f);
  EXPECT_FLOAT_EQ(*r.repetition_penalty, 1.05f);
  EXPECT_TRUE(r.ignored.empty());
}

TEST(RecommendedSampling, AbsentAndOutOfRangeKeysAreLeftToTheDefaults) {
  EXPECT_FALSE(read_keys([](gguf::GgufWriter&) {}).any());
  const RecommendedSampling r = read_keys([](gguf::GgufWriter& w) {
    w.set_float32("general.sampling.temp", std::numeric_limits<float>::quiet_NaN());
    w.set_int32("general.sampling.top_k", -5);
    w.set_float32("general.sampling.top_p", 0.0f);  // (0, 1]: zero keeps nothing
    w.set_float32("general.sampling.min_p", 1.5f);
    w.set_string("general.sampling.penalty_repeat", "1.1");  // not a number
  });
  EXPECT_FALSE(r.any());
  EXPECT_EQ(r.ignored, (std::vector<std::string>{"general.sampling.temp", "general.sampling.top_k",
                                                 "general.sampling.top_p", "general.sampling.min_p",
                                                 "general.sampling.penalty_repeat"}));
}

class SamplingDefaultsSmolLM2 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "no " << kModel << " (run scripts/setup.sh)";
  }
};

TEST_F(SamplingDefaultsSmolLM2, WithoutKeysTheEngineUsesLlamaCppDefaults) {
  auto engine = make_engine(base_config(kModel));
  const ModelInfo& info = engine->model_info();
  EXPECT_EQ(info.default_sampling_source, "llama.cpp defaults");
  EXPECT_EQ(info.default_sampling.temperature, defaults::kTemperature);
  EXPECT_EQ(info.default_sampling.top_k, 40);
  EXPECT_EQ(info.default_sampling.top_p, 0.95f);
  EXPECT_EQ(info.default_sampling.min_p, 0.05f);
  EXPECT_EQ(info.default_sampling.repetition_penalty, 1.0f);
  // Everything else is SamplingParams{}'s.
  EXPECT_EQ(info.default_sampling.max_tokens, SamplingParams{}.max_tokens);
  EXPECT_FALSE(info.default_sampling.seed.has_value());
}

TEST_F(SamplingDefaultsSmolLM2, TheFilesRecommendationWinsAndZeroTemperatureIsGreedy) {
  const std::string path = copy_with(kModel, "smollm2_greedy_recommended", [](gguf::GgufWriter& w) {
    w.set_float32("general.sampling.temp", 0.0f);
    w.set_uint32("general.sampling.top_k", 20);
  });
  std::vector<int32_t> prompt = {1, 9690, 2683, 314, 253, 1345, 30};
  auto greedy_of = [&](const std::string& model, const SamplingParams& p) {
    auto engine = make_engine(base_config(model));
    auto stream = engine->submit({prompt, p, ""});
    EXPECT_TRUE(stream.ok());
    RequestResult r = drain(**stream, 1);
    return std::make_pair(r[0].token_ids, engine->model_info());
  };
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = 24;
  auto [reference, plain_info] = greedy_of(kModel, greedy);
  auto [file_default_probe, info] = greedy_of(path, greedy);
  EXPECT_EQ(info.default_sampling_source, "model file + llama.cpp defaults");
  EXPECT_EQ(info.default_sampling.temperature, 0.0f);
  EXPECT_EQ(info.default_sampling.top_k, 20);
  EXPECT_EQ(info.default_sampling.top_p, 0.95f);  // not in the file: llama.cpp's
  // A request that takes the model's defaults as they are is greedy: the tokens of temperature 0.
  SamplingParams from_defaults = info.default_sampling;
  from_defaults.max_tokens = 24;
  auto [tokens, unused] = greedy_of(path, from_defaults);
  EXPECT_EQ(tokens, reference);
  EXPECT_EQ(file_default_probe, reference);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tessera::testing
