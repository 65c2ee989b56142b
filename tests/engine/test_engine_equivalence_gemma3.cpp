// The engine's greedy equivalence suite (equivalence_suite.h) on a synthetic Gemma 3 model with
// sliding-window layers: 3 layers, layers 0 and 1 local with a 24-token window, layer 2 global
// (random weights, tests/model/synthetic_model.h). The prompts (up to 100 tokens) and the 24
// generated tokens run far past the window, so batched vs alone, chunked vs unchunked, preempted
// vs uninterrupted, static vs continuous, prefix cache on vs off and block sizes 1/16/32 all
// cross window edges at different step boundaries.
#include <cstdio>

#include "../model/synthetic_model.h"
#include "equivalence_suite.h"

namespace tessera::testing {
namespace {

const std::string& gemma3_path() {
  static const std::string path = [] {
    const std::string weights = ::testing::TempDir() + "/synthetic_gemma3_window_weights.gguf";
    const SyntheticShape shape{.name = "gemma3_window", .architecture = "gemma3", .num_layers = 3, .dim = 128,
                               .num_heads = 4, .num_kv_heads = 1, .ffn_dim = 256, .vocab = 512, .rope_base = 1e6f,
                               .tied_output = true, .head_dim = 32, .qk_norm = true, .post_norms = true,
                               .sliding_window = 24, .window_pattern = 3};
    TESSERA_CHECK(write_synthetic_model(weights, shape).ok(), "cannot write {}", weights);
    // The engine needs a tokenizer: stories260K's (a 512-token SentencePiece vocabulary).
    auto model = gguf::GgufFile::open(weights);
    auto vocab = gguf::GgufFile::open(TESSERA_TESTDATA_DIR "/models/stories260K.gguf");
    TESSERA_CHECK(model.ok() && vocab.ok(), "cannot read the synthetic model or stories260K");
    gguf::GgufWriter w;
    for (const auto& [k, v] : model->metadata()) w.set_value(k, v);
    for (const auto& [k, v] : vocab->metadata()) {
      if (k.rfind("tokenizer.", 0) == 0) w.set_value(k, v);
    }
    for (const auto& t : model->tensors()) {
      TESSERA_CHECK(w.add_tensor_ref(t.name, t.dims, t.type, {t.data, t.num_bytes}).ok(), "tensor {}", t.name);
    }
    const std::string p = ::testing::TempDir() + "/synthetic_gemma3_window.gguf";
    TESSERA_CHECK(w.write(p).ok(), "cannot write {}", p);
    std::remove(weights.c_str());
    return p;
  }();
  return path;
}

EquivalenceSuite& suite() {
  static EquivalenceSuite s({.model_path = gemma3_path(),
                             .prompt_lens = {5, 17, 33, 1, 9, 70, 100},
                             .num_shared = 3,
                             .prefix_len = 48,
                             .max_tokens = 24,
                             .first_id = 3,
                             .seed = 11});
  return s;
}

TEST(EngineEquivalenceGemma3Window, BatchedEqualsAlone) { suite().batched_vs_alone(); }
TEST(EngineEquivalenceGemma3Window, ChunkedEqualsUnchunked) { suite().chunked_vs_unchunked(); }
TEST(EngineEquivalenceGemma3Window, PreemptedEqualsUninterrupted) { suite().preempted_vs_uninterrupted(); }
TEST(EngineEquivalenceGemma3Window, StaticEqualsContinuous) { suite().static_vs_continuous(); }
TEST(EngineEquivalenceGemma3Window, PrefixCacheOnEqualsOff) { suite().prefix_cache_on_vs_off(); }
TEST(EngineEquivalenceGemma3Window, BlockSizes1_16_32Agree) { suite().block_sizes(); }

}  // namespace
}  // namespace tessera::testing
