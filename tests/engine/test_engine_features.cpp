// Engine features on stories260K through the public API: the golden 200 greedy tokens, parallel
// sampling (n > 1: seeded reproducibility, shared prompt blocks), abort (every block returned),
// stop strings (exact cut, deltas concatenate to the text), refusal of prompts that can never fit,
// and seeded sampling that does not depend on the batch it runs in, KV-cache events.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"

#include "engine_harness.h"

namespace tessera::testing {
namespace {

const std::string kModel = TESSERA_TESTDATA_DIR "/models/stories260K.gguf";
const std::string kGolden = TESSERA_TESTDATA_DIR "/models/stories260K.golden.json";

struct Golden {
  std::vector<int32_t> prompt, greedy;
  std::string text;
};

Golden load_golden() {
  std::ifstream in(kGolden);
  const auto j = nlohmann::json::parse(in);
  const auto& c = j.at("cases").at(0);
  return {c.at("prompt_ids").get<std::vector<int32_t>>(), c.at("greedy_ids").get<std::vector<int32_t>>(),
          c.at("greedy_text").get<std::string>()};
}

SamplingParams greedy(int32_t max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

SamplingParams seeded(int32_t max_tokens, uint64_t seed, int32_t n = 1) {
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_p = 0.95f;
  p.seed = seed;
  p.n = n;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

std::vector<int32_t> prompt_of(int32_t len, int32_t salt) {
  std::vector<int32_t> ids = {1};
  for (int32_t i = 1; i < len; ++i) ids.push_back(3 + (i * 37 + salt * 101) % 509);
  return ids;
}

TEST(EngineStories, GreedyReproducesGolden200Tokens) {
  const Golden g = load_golden();
  auto e = make_engine(base_config(kModel));
  ASSERT_TRUE(e);
  const auto r = run_batch(*e, {{g.prompt, greedy(static_cast<int32_t>(g.greedy.size()))}});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0][0].token_ids, g.greedy);
  EXPECT_EQ(r[0][0].finish_reason, FinishReason::kLength);
  // The streamed deltas concatenate to the whole detokenized text.
  EXPECT_EQ(r[0][0].text, e->detokenize(g.greedy));
}

TEST(EngineStories, GoldenAlongsideOtherRequests) {
  // The golden request in the middle of a batch, with 8-token chunks and block size 1.
  const Golden g = load_golden();
  EngineConfig c = base_config(kModel);
  c.block_size = 1;
  c.long_prefill_token_threshold = 8;
  auto e = make_engine(c);
  ASSERT_TRUE(e);
  std::vector<TestRequest> reqs = {{prompt_of(60, 1), greedy(50)},
                                   {g.prompt, greedy(static_cast<int32_t>(g.greedy.size()))},
                                   {prompt_of(130, 2), seeded(90, 5)}};
  const auto r = run_batch(*e, reqs);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[1][0].token_ids, g.greedy);
}

TEST(EngineStories, ParallelSamplingIsSeededAndSharesPromptBlocks) {
  EngineConfig c = base_config(kModel);
  auto e = make_engine(c);
  ASSERT_TRUE(e);
  const std::vector<int32_t> prompt = prompt_of(100, 3);  // 6 full blocks + a 4-token partial block
  const TestRequest req{prompt, seeded(40, 1234, 4)};
  const auto first = run_batch(*e, {req});
  const MetricsSnapshot m1 = settled_metrics(*e);
  const auto again = run_batch(*e, {req});
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(again.size(), 1u);
  ASSERT_EQ(first[0].size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(first[0][i].token_ids.size(), 40u);
    EXPECT_EQ(first[0][i].token_ids, again[0][i].token_ids) << "sample " << i;
    EXPECT_EQ(first[0][i].text, e->detokenize(first[0][i].token_ids)) << "sample " << i;
  }
  // The samples differ from one another (distinct RNG streams)...
  EXPECT_NE(first[0][0].token_ids, first[0][1].token_ids);
  // ...and share the prompt's blocks: the partial last prompt block is copied on write.
  EXPECT_GT(m1.num_cow_copies, 0);
  EXPECT_LE(m1.num_cow_copies, 3);
  // A different seed gives different samples.
  const auto other = run_batch(*e, {{prompt, seeded(40, 99, 4)}});
  EXPECT_NE(other[0][0].token_ids, first[0][0].token_ids);
}

TEST(EngineStories, ParallelSamplingPeakBlocksBelowIndependentCopies) {
  EngineConfig c = base_config(kModel);
  c.enable_prefix_caching = false;
  auto e = make_engine(c);
  ASSERT_TRUE(e);
  const std::vector<int32_t> prompt = prompt_of(200, 4);  // 13 blocks (12 full)
  auto s = e->submit({prompt, seeded(60, 7, 4), ""});
  ASSERT_TRUE(s.ok());
  int32_t peak_used = 0;
  while (auto ev = (*s)->next(std::chrono::milliseconds(60000))) {
    const MetricsSnapshot m = e->metrics();
    peak_used = std::max(peak_used, m.num_kv_blocks_total - m.num_kv_blocks_free - m.num_kv_blocks_cached);
    if ((*s)->finished()) break;
  }
  // Independent copies: 4 x ceil(260 / 16) = 68 blocks. Shared: 12 prompt blocks once, then each
  // sample's own tail: at most 12 + 4 x ceil((260 - 192) / 16) = 32.
  EXPECT_GT(peak_used, 12);
  EXPECT_LE(peak_used, 32);
}

TEST(EngineStories, AbortFreesEveryBlock) {
  auto e = make_engine(base_config(kModel));
  ASSERT_TRUE(e);
  auto s = e->submit({prompt_of(150, 5), greedy(300), ""});
  auto bystander = e->submit({prompt_of(40, 6), greedy(20), ""});
  ASSERT_TRUE(s.ok() && bystander.ok());
  int32_t num_tokens = 0;
  while (auto ev = (*s)->next(std::chrono::milliseconds(60000))) {
    num_tokens += static_cast<int32_t>(ev->token_ids.size());
    if (num_tokens >= 20) break;
  }
  e->abort((*s)->request_id());
  const RequestResult rest = drain(**s, 1);
  EXPECT_EQ(rest[0].finish_reason, FinishReason::kAbort);
  EXPECT_LT(num_tokens + static_cast<int32_t>(rest[0].token_ids.size()), 300);
  const RequestResult by = drain(**bystander, 1);
  EXPECT_EQ(by[0].token_ids.size(), 20u);
  const MetricsSnapshot m = settled_metrics(*e);
  EXPECT_EQ(m.num_requests_running, 0);
  EXPECT_EQ(m.num_kv_blocks_free + m.num_kv_blocks_cached, m.num_kv_blocks_total);
  EXPECT_EQ(m.num_requests_aborted, 1);
  e->abort(123456);  // unknown ids are ignored
}

// KV-cache events (EngineConfig::on_kv_events): the blocks a request fills are reported once each,
// in chain order, with their tokens; the same prompt again is a prefix hit and stores none of them.
TEST(EngineStories, KvEventsReportStoredBlocksInChainOrder) {
  std::mutex mu;
  std::vector<KvEventBatch> batches;
  EngineConfig c = base_config(kModel);
  c.on_kv_events = [&](KvEventBatch&& b) {
    std::lock_guard lock(mu);
    batches.push_back(std::move(b));
  };
  auto e = make_engine(c);
  ASSERT_TRUE(e);
  const std::vector<int32_t> prompt = prompt_of(40, 9);
  const RequestResult first = run_batch(*e, {{prompt, greedy(8)}})[0];
  settled_metrics(*e);
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), first[0].token_ids.begin(), first[0].token_ids.end());
  std::vector<KvCacheEvent> events;
  {
    std::lock_guard lock(mu);
    for (const KvEventBatch& b : batches) {
      EXPECT_EQ(b.block_size, 16);
      EXPECT_GT(b.ts, 1.7e9);
      events.insert(events.end(), b.events.begin(), b.events.end());
    }
    batches.clear();
  }
  ASSERT_GE(events.size(), 2u);  // 47 computed tokens: at least the prompt's two full blocks
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].kind, KvCacheEvent::Kind::kBlockStored);
    EXPECT_EQ(events[i].token_ids, std::vector<int32_t>(all.begin() + 16 * static_cast<ptrdiff_t>(i),
                                                        all.begin() + 16 * static_cast<ptrdiff_t>(i + 1)));
    if (i == 0) {
      EXPECT_FALSE(events[i].parent_block_hash.has_value());
    } else {
      EXPECT_EQ(events[i].parent_block_hash, events[i - 1].block_hash);
    }
  }
  run_batch(*e, {{prompt, greedy(8)}});
  settled_metrics(*e);
  std::lock_guard lock(mu);
  for (const KvEventBatch& b : batches) {
    for (const KvCacheEvent& ev : b.events) {
      for (const KvCacheEvent& old : events) EXPECT_NE(ev.block_hash, old.block_hash);
    }
  }
}

TEST(EngineStories, StopStringsCutTextExactly) {
  const Golden g = load_golden();
  auto e = make_engine(base_config(kModel));
  ASSERT_TRUE(e);
  const std::string full = e->detokenize(g.greedy);
  // A stop string from the middle of the golden text, spanning a token boundary or not.
  const std::string stop = full.substr(full.size() / 2, 6);
  const size_t at = full.find(stop);
  ASSERT_NE(at, std::string::npos);
  for (bool include : {false, true}) {
    SamplingParams p = greedy(200);
    p.stop = {stop, "no such stop string anywhere"};
    p.include_stop_str_in_output = include;
    const auto r = run_batch(*e, {{g.prompt, p}});
    const SampleResult& s = r.at(0).at(0);
    EXPECT_EQ(s.finish_reason, FinishReason::kStop);
    EXPECT_EQ(s.text, full.substr(0, include ? at + stop.size() : at)) << "include " << include;
    // The tokens stop at the one that completed the stop string: a prefix of the golden tokens.
    ASSERT_LE(s.token_ids.size(), g.greedy.size());
    EXPECT_TRUE(std::equal(s.token_ids.begin(), s.token_ids.end(), g.greedy.begin()));
    const std::string upto = e->detokenize(s.token_ids);
    EXPECT_GE(upto.size(), at + stop.size());
    const std::vector<int32_t> one_less(s.token_ids.begin(), s.token_ids.end() - 1);
    EXPECT_LT(e->detokenize(one_less).size(), at + stop.size());
  }
}

TEST(EngineStories, PromptThatCanNeverFitIsRefusedAtSubmit) {
  EngineConfig c = base_config(kModel);
  c.max_model_len = 256;
  auto probe = make_engine(c);
  ASSERT_TRUE(probe);
  const int64_t bytes_per_token = probe->model_info().kv_cache_bytes /
                                  (int64_t{probe->model_info().num_kv_blocks} * probe->model_info().block_size);
  c.kv_cache_bytes = 10 * 16 * bytes_per_token;  // 10 blocks = 160 tokens
  auto e = make_engine(c);
  ASSERT_TRUE(e);
  ASSERT_EQ(e->model_info().context_length, 256);
  ASSERT_EQ(e->model_info().num_kv_blocks, 10);
  auto too_long = e->submit({prompt_of(256, 1), greedy(1), ""});
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.error().code, ErrorCode::kOutOfRange);
  auto with_output = e->submit({prompt_of(200, 1), greedy(100), ""});
  ASSERT_FALSE(with_output.ok());
  EXPECT_EQ(with_output.error().code, ErrorCode::kOutOfRange);
  auto over_cache = e->submit({prompt_of(150, 1), greedy(20), ""});  // 170 tokens > 160 slots
  ASSERT_FALSE(over_cache.ok());
  EXPECT_EQ(over_cache.error().code, ErrorCode::kOutOfRange);
  auto empty = e->submit({{}, greedy(1), ""});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code, ErrorCode::kInvalidArgument);
  auto fits = e->submit({prompt_of(150, 1), greedy(10), ""});  // 160 tokens: exactly the cache
  ASSERT_TRUE(fits.ok());
  EXPECT_EQ(drain(**fits, 1)[0].token_ids.size(), 10u);
  // The block boundary: 150 + 11 = 161 tokens, but the last sampled token is never cached, so it
  // needs 160 slots = 10 blocks: accepted by the engine (the scheduler's rule), and it runs to the end.
  auto boundary = e->submit({prompt_of(150, 1), greedy(11), ""});
  ASSERT_TRUE(boundary.ok()) << boundary.error().message;
  EXPECT_EQ(drain(**boundary, 1)[0].token_ids.size(), 11u);
  auto one_past = e->submit({prompt_of(150, 1), greedy(12), ""});  // 161 slots = 11 blocks
  ASSERT_FALSE(one_past.ok());
  EXPECT_EQ(one_past.error().code, ErrorCode::kOutOfRange);
}

TEST(EngineStories, SeededSamplingIndependentOfBatch) {
  EngineConfig c = base_config(kModel);
  const TestRequest probe{prompt_of(37, 8), seeded(64, 2024)};
  auto alone_engine = make_engine(c);
  ASSERT_TRUE(alone_engine);
  const auto alone = run_batch(*alone_engine, {probe});
  // The same request between others, with small chunks and block size 32.
  c.block_size = 32;
  c.max_num_batched_tokens = 24;
  auto batch_engine = make_engine(c);
  ASSERT_TRUE(batch_engine);
  const auto batched = run_batch(*batch_engine, {{prompt_of(90, 9), seeded(30, 1)},
                                                 {prompt_of(12, 10), greedy(70)},
                                                 probe,
                                                 {prompt_of(55, 11), seeded(64, 2)}});
  ASSERT_EQ(batched.size(), 4u);
  EXPECT_EQ(alone[0][0].token_ids.size(), 64u);
  EXPECT_EQ(batched[2][0].token_ids, alone[0][0].token_ids);
  EXPECT_NE(batched[3][0].token_ids, alone[0][0].token_ids);
}

// Static batching keeps a finished lane in the batch as a pad row until the longest member is
// done. Three requests of 2, 5 and 9 tokens admitted together: the 2-token lane idles for
// 9 - 2 = 7 steps and the 5-token lane for 9 - 5 = 4, so exactly 11 pad rows are computed; the
// tokens are those the continuous policy produces (pad rows never touch a real sequence).
// submit_all is all or nothing: one invalid request refuses the whole batch and queues none.
TEST(EngineStories, SubmitAllQueuesNothingWhenOneRequestIsInvalid) {
  auto e = make_engine(base_config(kModel));
  ASSERT_TRUE(e);
  std::vector<GenerateRequest> batch;
  batch.push_back({prompt_of(10, 1), greedy(3), ""});
  batch.push_back({{}, greedy(3), ""});  // empty prompt
  const auto r = e->submit_all(std::move(batch));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(e->num_unfinished_requests(), 0);
}

// --kv-dtype q8: the same byte budget holds more blocks (int8 plus one f32 scale per token and
// head instead of f16), each row's output still does not depend on the batch around it (every
// K/V row is quantized on its own), and an unknown dtype is refused with a clear error.
TEST(EngineStories, Q8KvCacheHoldsMoreBlocksAndBatchesLikeAlone) {
  EngineConfig c = base_config(kModel);
  auto f16 = make_engine(c);
  c.kv_dtype = "q8";
  auto q8 = make_engine(c);
  ASSERT_TRUE(f16 && q8);
  const ModelInfo& info = q8->model_info();
  const int64_t q8_bytes_per_token =
      2 * int64_t{info.num_layers} * (int64_t{info.num_kv_heads} * info.head_dim + int64_t{info.num_kv_heads} * 4);
  EXPECT_EQ(info.num_kv_blocks, c.kv_cache_bytes / (q8_bytes_per_token * info.block_size));
  // f16: 2 bytes per element; q8 gains 2 x head_dim / (head_dim + 4) (1.33x at stories260K's
  // head_dim 8, 1.88x at SmolLM2's 64).
  const int64_t f16_bytes_per_token = 2 * int64_t{info.num_layers} * info.num_kv_heads * info.head_dim * 2;
  EXPECT_EQ(f16->model_info().num_kv_blocks, c.kv_cache_bytes / (f16_bytes_per_token * info.block_size));
  EXPECT_GT(info.num_kv_blocks, f16->model_info().num_kv_blocks);

  const std::vector<TestRequest> reqs = {{prompt_of(40, 1), greedy(30)},
                                         {prompt_of(70, 2), greedy(20)},
                                         {prompt_of(5, 3), greedy(40)}};
  const auto batched = run_batch(*q8, reqs);
  const auto alone = run_one_by_one(*q8, reqs);
  ASSERT_EQ(batched.size(), 3u);
  ASSERT_EQ(alone.size(), 3u);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(batched[i][0].token_ids, alone[i][0].token_ids) << i;
    EXPECT_EQ(batched[i][0].token_ids.size(), static_cast<size_t>(reqs[i].params.max_tokens));
  }

  for (const char* bad : {"q9", "", "F16", "q8 "}) {
    c.kv_dtype = bad;
    const auto e = Engine::create(c);
    ASSERT_FALSE(e.ok()) << "'" << bad << "'";
    EXPECT_EQ(e.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(e.error().message.find("must be f16, f32 or q8"), std::string::npos) << e.error().message;
  }
}

TEST(EngineStories, StaticPolicyComputesPadRowsForFinishedLanes) {
  const std::vector<TestRequest> reqs = {{prompt_of(30, 1), greedy(2)},
                                         {prompt_of(45, 2), greedy(5)},
                                         {prompt_of(20, 3), greedy(9)}};
  EngineConfig c = base_config(kModel);
  c.policy = "static";
  auto st = make_engine(c);
  ASSERT_TRUE(st);
  const auto static_out = run_batch(*st, reqs);
  const MetricsSnapshot m = settled_metrics(*st);
  EXPECT_EQ(m.padding_lane_steps, 11);
  EXPECT_EQ(m.num_steps, 9);
  EXPECT_EQ(m.num_kv_blocks_free + m.num_kv_blocks_cached, m.num_kv_blocks_total);

  c.policy = "continuous";
  auto cont = make_engine(c);
  ASSERT_TRUE(cont);
  const auto cont_out = run_batch(*cont, reqs);
  EXPECT_EQ(tokens_of(static_out), tokens_of(cont_out));
  EXPECT_EQ(settled_metrics(*cont).padding_lane_steps, 0);
}

// Issue 30, finding 4: stories260K with its final norm weights set to `bad` (NaN or Inf), written
// with the project's GGUF writer. Every logits row is then non-finite.
std::string write_broken_norm_model(float bad, const std::string& name) {
  auto file = gguf::GgufFile::open(kModel);
  EXPECT_TRUE(file.ok());
  gguf::GgufWriter w;
  for (const auto& [k, v] : file->metadata()) w.set_value(k, v);
  std::vector<float> norm;
  for (const auto& t : file->tensors()) {
    if (t.name == "output_norm.weight") {
      norm.assign(static_cast<size_t>(t.num_elements), bad);
      EXPECT_TRUE(w.add_tensor_f32(t.name, t.dims, norm).ok());
    } else {
      EXPECT_TRUE(w.add_tensor_ref(t.name, t.dims, t.type, {t.data, t.num_bytes}).ok());
    }
  }
  EXPECT_FALSE(norm.empty()) << "stories260K has no output_norm.weight";
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  EXPECT_TRUE(w.write(path).ok());
  return path;
}

// Non-finite logits fail the request with an error event (counted), never the process; the
// engine keeps serving and holds no blocks afterwards.
TEST(EngineStories, NonFiniteLogitsFailTheRequestAndTheEngineKeepsServing) {
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    const std::string path = write_broken_norm_model(bad, std::isnan(bad) ? "tessera_nan_norm.gguf" : "tessera_inf_norm.gguf");
    auto e = make_engine(base_config(path));
    ASSERT_TRUE(e);
    std::vector<TestRequest> reqs;
    for (int32_t i = 0; i < 20; ++i) reqs.push_back({prompt_of(8 + i, i), seeded(16, 1000 + i, i % 3 == 0 ? 2 : 1)});
    reqs.push_back({prompt_of(12, 99), greedy(16)});
    const auto results = run_batch(*e, reqs);
    ASSERT_EQ(results.size(), reqs.size());
    for (const RequestResult& r : results) {
      for (const SampleResult& s : r) {
        EXPECT_EQ(s.finish_reason, FinishReason::kError);
        EXPECT_TRUE(s.token_ids.empty());
      }
    }
    // Still serving: a later request is answered (with the same clean error).
    const auto later = run_batch(*e, {{prompt_of(5, 7), seeded(4, 5)}});
    ASSERT_EQ(later.size(), 1u);
    EXPECT_EQ(later[0][0].finish_reason, FinishReason::kError);
    const MetricsSnapshot m = settled_metrics(*e);
    EXPECT_EQ(m.num_requests_nonfinite, 22);
    EXPECT_EQ(m.num_kv_blocks_free, m.num_kv_blocks_total);
    e.reset();
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace tessera::testing
