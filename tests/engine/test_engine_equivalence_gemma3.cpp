// The engine's greedy equivalence suite (equivalence_suite.h) on a synthetic Gemma 3 model with
// sliding-window layers: 3 layers, layers 0 and 1 local with a 24-token window, layer 2 global
// (random weights, tests/model/synthetic_model.h; an untied output matrix: with tied embeddings a
// random model only repeats its last token, which would make the comparisons weak). By default
// the local layers are KV-cache groups of their own whose blocks go back behind the window
// (kv/kv_cache_layout.h). The prompts (up to 100 tokens) and the 24 generated tokens run far past
// the window, so batched vs alone, chunked vs unchunked, preempted vs uninterrupted, static vs
// continuous, prefix cache on vs off, block sizes 1/16/32, speculation, and windows freed vs kept
// all cross window edges at different step boundaries.
#include <cstdio>

#include "../model/synthetic_model.h"
#include "equivalence_suite.h"

namespace tessera::testing {
namespace {

// The synthetic model with weights from `seed` (7: the target; another seed: a draft model that
// shares its vocabulary but disagrees often, so drafts get rejected).
std::string write_gemma3(uint64_t seed) {
  {
    const std::string weights = ::testing::TempDir() + "/synthetic_gemma3_window_weights.gguf";
    const SyntheticShape shape{.name = "gemma3_window", .architecture = "gemma3", .num_layers = 3, .dim = 128,
                               .num_heads = 4, .num_kv_heads = 1, .ffn_dim = 256, .vocab = 512, .rope_base = 1e6f,
                               .tied_output = false, .head_dim = 32, .qk_norm = true, .post_norms = true,
                               .sliding_window = 24, .window_pattern = 3};
    TESSERA_CHECK(write_synthetic_model(weights, shape, seed).ok(), "cannot write {}", weights);
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
    const std::string p = ::testing::TempDir() + "/synthetic_gemma3_window_" + std::to_string(seed) + ".gguf";
    TESSERA_CHECK(w.write(p).ok(), "cannot write {}", p);
    std::remove(weights.c_str());
    return p;
  }
}

const std::string& gemma3_path() {
  static const std::string path = write_gemma3(7);
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

// Speculative decoding over sliding-window groups: a draft model proposes k = 4 tokens a step,
// verified in the target's chunk; a rejected draft truncates each group's table (never into a
// window's released blocks). Drafts from the model itself are all accepted; from one with other
// weights most are rejected. Greedy output equals the plain run's either way.
TEST(EngineEquivalenceGemma3Window, DraftSpeculationEqualsPlain) {
  static const std::string other = write_gemma3(99);
  for (const std::string& draft : {gemma3_path(), other}) {
    EngineConfig c = suite().config();
    c.speculative = "draft";
    c.draft_model_path = draft;
    c.num_speculative_tokens = 4;
    c.speculative_speed_guard = false;  // propose every step: no wall-clock choices
    c.max_num_seqs = 4;                 // speculation runs for batches of up to 4 sequences
    const MetricsSnapshot m = suite().expect_batch_matches(c, "draft-model speculation, k = 4");
    EXPECT_GT(m.spec_num_draft_tokens, 0) << draft;
    EXPECT_GT(m.num_kv_window_releases, 0) << draft;
    if (draft == other) {
      EXPECT_LT(m.spec_num_accepted_tokens, m.spec_num_draft_tokens / 2) << "the other draft should disagree";
    } else {
      EXPECT_EQ(m.spec_num_accepted_tokens, m.spec_num_draft_tokens);
    }
  }
}

// The hybrid KV cache (the default) gives back the local layers' blocks behind their window; off,
// one block table keeps every layer's blocks. Same tokens either way, and the metrics show the
// blocks going back: with windows freed the batch holds fewer blocks at its peak.
TEST(EngineEquivalenceGemma3Window, WindowsFreedEqualsKept) {
  EngineConfig c = suite().config();
  const MetricsSnapshot freed = suite().expect_batch_matches(c, "hybrid KV cache (windows freed)");
  c.hybrid_kv_cache = false;
  const MetricsSnapshot kept = suite().expect_batch_matches(c, "one block table (windows kept)");
  EXPECT_GT(freed.num_kv_window_releases, 0);
  EXPECT_EQ(kept.num_kv_window_releases, 0);
  // Blocks of 16 tokens: freed blocks hold 1 layer (3 groups of 1), kept blocks all 3 layers.
  auto e = make_engine(suite().config());
  EXPECT_EQ(e->model_info().kv_cache_group_windows, (std::vector<int32_t>{0, 24, 24}));
  EXPECT_EQ(e->model_info().kv_layers_per_block, 1);
  const int64_t freed_bytes = int64_t{freed.peak_num_kv_blocks_used} * 1;  // layer-blocks at the peak
  const int64_t kept_bytes = int64_t{kept.peak_num_kv_blocks_used} * 3;
  EXPECT_LT(freed_bytes, kept_bytes) << freed.peak_num_kv_blocks_used << " vs " << kept.peak_num_kv_blocks_used;
  EXPECT_EQ(freed.num_kv_blocks_used, 0);
}

}  // namespace
}  // namespace tessera::testing
