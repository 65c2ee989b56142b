// Independent references: tiny random-weight models built with Hugging Face transformers (gemma3
// with a 16-token window and linear rope scaling on its global layers, qwen3, llama with Llama-3.1
// rope scaling, phi3 with fused tensors and a 24-token window), converted to GGUF, and
// transformers' float32 logits at every position of a 64-token teacher-forced sequence
// (tests/data/hf_tiny, scripts/gen_hf_tiny_goldens.py, offline). Fed in chunks of prefill and
// decode; F32 weights must match within 1e-3 absolute everywhere, including past the windows; a
// Q8_0 copy (quantized here) within a looser named budget.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "forward_harness.h"
#include "gguf/gguf_writer.h"
#include "kernels/quant.h"

namespace tessera {
namespace {

constexpr float kMaxAbsF32 = 1e-3f;
// Q8_0 weights and activations (random tiny weights: measured 2.9-5.3% of the logits' range).
constexpr float kMaxAbsQ8RelativeToRange = 0.08f;

const std::string kDir = TESSERA_PROJECT_TESTDATA_DIR "/hf_tiny/";

struct Golden {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;  // [64][vocab]
};

Golden load_golden(const std::string& name) {
  std::ifstream in(kDir + name + ".logits.json");
  const auto j = nlohmann::json::parse(in);
  return {j.at("tokens").get<std::vector<int32_t>>(), j.at("logits").get<std::vector<std::vector<float>>>()};
}

// Every position's logits, fed as chunks of 5, 1, 17, 1, 1 and 39 tokens (prefill and decode).
std::vector<std::vector<float>> run_all_positions(const LlamaModel& model, const std::vector<int32_t>& tokens) {
  testing::SingleSequence seq(model, 128, 16);
  return testing::feed_in_chunks(seq, tokens, {5, 1, 17, 1, 1, 39}, model.config().vocab_size);
}

// A copy of an F32 file with every 2-D tensor in Q8_0 (tessera's own quantizer).
std::string quantized_copy(const std::string& path) {
  auto file = gguf::GgufFile::open(path);
  EXPECT_TRUE(file.ok());
  gguf::GgufWriter w;
  for (const auto& [k, v] : file->metadata()) w.set_value(k, v);
  static std::vector<std::vector<uint8_t>> keep;
  for (const auto& t : file->tensors()) {
    if (t.dims.size() != 2 || t.type != DType::F32) {
      EXPECT_TRUE(w.add_tensor_ref(t.name, t.dims, t.type, {t.data, t.num_bytes}).ok());
      continue;
    }
    const int64_t cols = t.dims[0], rows = t.dims[1];
    std::vector<uint8_t>& bytes = keep.emplace_back(dtype_row_bytes(DType::Q8_0, cols) * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      kernels::quantize_row_ref(DType::Q8_0, reinterpret_cast<const float*>(t.data) + r * cols,
                                bytes.data() + static_cast<size_t>(r) * dtype_row_bytes(DType::Q8_0, cols), cols);
    }
    EXPECT_TRUE(w.add_tensor_ref(t.name, t.dims, DType::Q8_0, bytes).ok());
  }
  const std::string out = ::testing::TempDir() + "/hf_tiny_q8_0.gguf";
  EXPECT_TRUE(w.write(out).ok());
  return out;
}

class HfTiny : public ::testing::TestWithParam<const char*> {};

TEST_P(HfTiny, LogitsMatchTransformersAtEveryPosition) {
  const std::string name = GetParam();
  const Golden g = load_golden(name);
  ASSERT_EQ(g.tokens.size(), 64u);
  for (bool quantized : {false, true}) {
    SCOPED_TRACE(quantized ? "Q8_0" : "F32");
    const std::string path = quantized ? quantized_copy(kDir + name + ".f32.gguf") : kDir + name + ".f32.gguf";
    auto model = LlamaModel::load(path);
    ASSERT_TRUE(model.ok()) << model.error().message;
    const auto got = run_all_positions(**model, g.tokens);
    float worst = 0.0f, lo = 0.0f, hi = 0.0f;
    int32_t worst_pos = -1;
    for (size_t p = 0; p < got.size(); ++p) {
      ASSERT_EQ(got[p].size(), g.logits[p].size());
      for (size_t v = 0; v < got[p].size(); ++v) {
        const float d = std::fabs(got[p][v] - g.logits[p][v]);
        if (d > worst) worst = d, worst_pos = static_cast<int32_t>(p);
        lo = std::min(lo, g.logits[p][v]), hi = std::max(hi, g.logits[p][v]);
      }
    }
    std::printf("%-8s %s: max |tessera - transformers| %.2e at position %d (logits in [%.2f, %.2f])\n", name.c_str(),
                quantized ? "Q8_0" : "F32 ", worst, worst_pos, lo, hi);
    EXPECT_LT(worst, quantized ? kMaxAbsQ8RelativeToRange * (hi - lo) : kMaxAbsF32) << "position " << worst_pos;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, HfTiny, ::testing::Values("gemma3", "qwen3", "llama31", "phi3"));

}  // namespace
}  // namespace tessera
