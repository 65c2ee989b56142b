// The real Gemma-3-270M Q4_K_M through the engine (include/tessera/engine.h) with the hybrid KV
// cache on, against llama.cpp (LABEL model). Its 15 local layers see a 512-token window; the
// engine keeps them in 5 KV-cache groups whose blocks go back to the pool once behind the window
// (kv/kv_cache_manager.cpp), and the 3 global layers in a group that keeps everything. Three
// prompts of about 600, 900 and 1500 tokens (tests/data/gemma3_270m_window_greedy.json from
// scripts/gen_kquant_goldens.py: records, a Python module, a chat turn about a long report), 128
// greedy tokens each, batched together with 512-token chunked prefill: the local groups release
// blocks between the chunks of the two longer prompts and every 16 generated tokens of all three,
// so a block freed too early (or a released entry read) shows in tokens and logits that differ
// from llama.cpp's, which keeps its whole window.
//
// Token by token over all 128 positions: at a parting, tessera's token must be on a near-tie of
// llama.cpp's logits (llamacpp_golden.h's rule); the comparison then goes on from llama.cpp's
// token (prompt + its tokens so far, a new request: the prefix cache serves the prompt back,
// window groups included), so no position goes unchecked. At every position, tessera's logit
// gap between llama.cpp's top two tokens (from its top-5 logprobs) is held against llama.cpp's:
// the mean distance measures how near the two runs are where no token flips.
//
// Measured at this commit (AVX-512 host): 2 partings (records@16 and @73, llama.cpp gaps 0.14 and
// 0.48), mean gap distance 0.205. With the local groups releasing one block too early once past
// the window (each step's release + 1, the block the window still starts in): 3 partings and a
// mean of 0.339; both ceilings below catch it.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include "../model/llamacpp_golden.h"
#include "engine_harness.h"

namespace tessera::testing {
namespace {

const std::string kModel = TESSERA_PROJECT_TESTDATA_DIR "/../../models/gemma-3-270m-q4_k_m.gguf";
constexpr int32_t kWindow = 512;

// What Gemma-3-270M measures at this commit (see the test's output), pinned as ceilings: partings
// over the 3 x 128 positions, each on a near-tie, and the mean distance between tessera's and
// llama.cpp's top-2 logit gaps (0.205 measured; headroom for other kernels' rounding).
constexpr int kMaxPartings = 2;
constexpr double kMaxMeanGapDistance = 0.25;
constexpr int kMaxRounds = 16;  // each round checks at least one more position of every open case

EngineConfig window_config() {
  EngineConfig c = base_config(kModel);
  c.max_model_len = 2048;
  c.max_num_batched_tokens = 512;  // chunked prefill: chunk edges fall inside and past the window
  c.hybrid_kv_cache = true;  // the default, named: this test is about it
  return c;
}

TEST(EngineGemma3Window, MatchesLlamaCppPastTheWindowWithBlocksFreed) {
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "no " << kModel << " (run scripts/setup.sh)";
  const std::vector<LlamaCppCase> cases = load_llamacpp_cases("gemma3_270m_window_greedy.json");
  ASSERT_EQ(cases.size(), 3u);
  auto engine = make_engine(window_config());
  ASSERT_NE(engine, nullptr);
  // 6 groups of 3 layers: the global layers' (0 = full) and 5 of local layers.
  EXPECT_EQ(engine->model_info().kv_cache_group_windows,
            (std::vector<int32_t>{0, kWindow, kWindow, kWindow, kWindow, kWindow}));
  EXPECT_EQ(engine->model_info().kv_layers_per_block, 3);

  // checked[i]: positions of case i compared so far (its next request starts from llama.cpp's
  // tokens [0, checked[i])).
  std::vector<size_t> checked(cases.size(), 0);
  int partings = 0, rounds = 0;
  double gap_sum = 0, gap_max = 0;  // |tessera's top-2 gap - llama.cpp's|, in logits
  int gap_n = 0;
  // The first round alone releases, in each of the 5 local groups, the blocks wholly before the
  // window of its last step (kv/README.md: floor((computed - W + 1) / block_size); the last step
  // computes position prompt + 126 with prompt + 126 tokens already computed).
  int64_t min_releases = 0;
  for (const LlamaCppCase& c : cases) {
    const auto computed = static_cast<int64_t>(c.prompt_ids.size() + c.greedy_ids.size()) - 2;
    min_releases += 5 * ((computed - kWindow + 1) / window_config().block_size);
  }
  for (;;) {
    std::vector<size_t> open;
    std::vector<TestRequest> reqs;
    for (size_t i = 0; i < cases.size(); ++i) {
      const LlamaCppCase& c = cases[i];
      ASSERT_GT(c.prompt_ids.size(), static_cast<size_t>(kWindow)) << c.name;
      if (checked[i] == c.greedy_ids.size()) continue;
      TestRequest r;
      r.prompt = c.prompt_ids;
      r.prompt.insert(r.prompt.end(), c.greedy_ids.begin(), c.greedy_ids.begin() + static_cast<long>(checked[i]));
      r.params.temperature = 0.0f;
      r.params.max_tokens = static_cast<int32_t>(c.greedy_ids.size() - checked[i]);
      r.params.ignore_eos = true;
      r.params.logprobs = 5;
      open.push_back(i);
      reqs.push_back(std::move(r));
    }
    if (open.empty()) break;
    ASSERT_LE(++rounds, kMaxRounds) << partings << " partings so far, at most " << kMaxPartings << " expected";
    const std::vector<RequestResult> results = run_batch(*engine, reqs);
    ASSERT_EQ(results.size(), reqs.size());
    for (size_t j = 0; j < open.size(); ++j) {
      const LlamaCppCase& c = cases[open[j]];
      const std::vector<int32_t>& ours = results[j].at(0).token_ids;
      ASSERT_EQ(ours.size(), static_cast<size_t>(reqs[j].params.max_tokens)) << c.name;
      size_t& k = checked[open[j]];
      const size_t start = k;
      const auto& tops = results[j].at(0).top_logprobs;
      ASSERT_EQ(tops.size(), ours.size());
      auto logprob = [&](int32_t id) -> std::optional<float> {  // tessera's, at position k
        for (const TokenLogprob& t : tops[k - start]) {
          if (t.token_id == id) return t.logprob;
        }
        return std::nullopt;
      };
      for (; k < c.greedy_ids.size(); ++k) {
        const auto a = logprob(c.top_ids[k][0]), b = logprob(c.top_ids[k][1]);
        if (a && b) {  // logprob differences are logit differences
          const double d = std::abs((*a - *b) - (c.top_logits[k][0] - c.top_logits[k][1]));
          gap_sum += d, gap_max = std::max(gap_max, d), ++gap_n;
        }
        if (ours[k - start] != c.greedy_ids[k]) break;
      }
      if (k == c.greedy_ids.size()) continue;
      const std::string why = parting_error(c, k, ours[k - start], kGemma3MaxRank);
      EXPECT_TRUE(why.empty()) << why;
      std::printf("%-24s parts at token %zu (ours %d, llama.cpp %d; its top-2 gap %.4f)\n", c.name.c_str(), k,
                  ours[k - start], c.greedy_ids[k], c.top2_gaps[k]);
      ++partings, ++k;  // the parting position is checked; go on from llama.cpp's token
    }
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    std::printf("%-24s %zu prompt tokens, %zu generated positions compared with llama.cpp\n", cases[i].name.c_str(),
                cases[i].prompt_ids.size(), checked[i]);
  }
  std::printf("%d partings in %d rounds; top-2 logit gap vs llama.cpp's: mean distance %.4f, max %.4f, over %d "
              "positions\n", partings, rounds, gap_sum / gap_n, gap_max, gap_n);
  EXPECT_LE(partings, kMaxPartings);
  EXPECT_GE(gap_n, 380);  // llama.cpp's top two are in tessera's top 5 nearly everywhere
  EXPECT_LE(gap_sum / gap_n, kMaxMeanGapDistance);

  // The blocks went back: the local groups released the entries behind the window, and none are
  // held once the requests are done.
  const MetricsSnapshot m = settled_metrics(*engine);
  std::printf("window releases %lld, peak blocks %lld, prefix cache hits %lld of %lld tokens\n",
              static_cast<long long>(m.num_kv_window_releases), static_cast<long long>(m.peak_num_kv_blocks_used),
              static_cast<long long>(m.prefix_cache_hits), static_cast<long long>(m.prefix_cache_queries));
  EXPECT_GE(m.num_kv_window_releases, min_releases);
  EXPECT_EQ(m.num_kv_blocks_used, 0);
}

}  // namespace
}  // namespace tessera::testing
