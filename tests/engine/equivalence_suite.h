// The engine's greedy equivalence suite, shared by the stories260K (LABEL golden) and SmolLM2
// (LABEL model) tests. Every case runs the same requests under one serving feature and requires
// token-for-token equality with the reference: each request run alone, prefix cache off, block 16,
// ample KV, one unchunked prefill. Where a feature could silently not engage (no prefix hit, no
// preemption, no chunking), the engine's metrics prove that it did.
#pragma once
#include <algorithm>
#include <numeric>

#include "engine_harness.h"
#include "sched/request.h"

namespace tessera::testing {

// A model and the requests to run on it.
struct EquivalenceScenario {
  std::string model_path;
  std::vector<int32_t> prompt_lens;  // suffix lengths of each request's prompt
  int32_t num_shared = 0;            // the first num_shared prompts start with one shared prefix
  int32_t prefix_len = 0;            // tokens of that prefix
  int32_t max_tokens = 16;           // greedy tokens per request
  int32_t first_id = 3;              // random prompt ids are drawn from [first_id, vocab)
  uint64_t seed = 1;
};

class EquivalenceSuite {
 public:
  explicit EquivalenceSuite(EquivalenceScenario s) : s_(std::move(s)) {}

  EngineConfig config() const {
    EngineConfig c = base_config(s_.model_path);
    c.enable_prefix_caching = false;
    return c;
  }

  const std::vector<TestRequest>& requests() {
    if (reqs_.empty()) {
      auto probe = make_engine(config());
      const int32_t vocab = probe->model_info().vocab_size;
      reqs_ = make_greedy_requests(s_.prompt_lens, s_.num_shared, s_.prefix_len, s_.max_tokens, s_.first_id, vocab,
                                   s_.seed);
      // Bytes of one token slot of a block (a block holds kv_layers_per_block layers: all of them
      // unless the model has sliding-window layers in KV-cache groups of their own).
      bytes_per_token_ = probe->model_info().kv_cache_bytes /
                         (int64_t{probe->model_info().num_kv_blocks} * probe->model_info().block_size);
      group_windows_ = probe->model_info().kv_cache_group_windows;
    }
    return reqs_;
  }

  // Each request alone, cache off, block 16, one unchunked prefill step per prompt.
  const std::vector<std::vector<int32_t>>& reference() {
    if (ref_.empty()) {
      EngineConfig c = config();
      c.enable_chunked_prefill = false;
      c.max_num_batched_tokens = c.max_model_len;
      auto e = make_engine(c);
      ref_ = tokens_of(run_one_by_one(*e, requests()));
      for (const auto& t : ref_) EXPECT_EQ(static_cast<int32_t>(t.size()), s_.max_tokens);
    }
    return ref_;
  }

  // The most KV blocks any request can hold with steps of at most `budget` tokens (the engine's
  // admission rule, sched::max_kv_blocks_of_request, over the model's KV-cache groups).
  int32_t longest_request_blocks(int32_t budget) {
    int64_t most = 0;
    for (const TestRequest& r : requests()) {
      most = std::max(most, sched::max_kv_blocks_of_request(static_cast<int64_t>(r.prompt.size()), s_.max_tokens,
                                                            {16, group_windows_, budget}));
    }
    return static_cast<int32_t>(most);
  }

  int64_t bytes_per_token() {
    requests();
    return bytes_per_token_;
  }

  int32_t total_prompt_tokens() {
    int32_t n = 0;
    for (const TestRequest& r : requests()) n += static_cast<int32_t>(r.prompt.size());
    return n;
  }

  int32_t longest_request_tokens() {
    int32_t n = 0;
    for (const TestRequest& r : requests()) n = std::max(n, static_cast<int32_t>(r.prompt.size()) + s_.max_tokens);
    return n;
  }

  // Runs all requests together under config c and compares with the reference.
  MetricsSnapshot expect_batch_matches(const EngineConfig& c, const char* what) {
    auto e = make_engine(c);
    if (!e) return {};
    const auto got = tokens_of(run_batch(*e, requests()));
    expect_same(got, what);
    return settled_metrics(*e);
  }

  void expect_same(const std::vector<std::vector<int32_t>>& got, const char* what) {
    const auto& want = reference();
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i], want[i]) << what << ": request " << i << " (prompt " << requests()[i].prompt.size()
                                 << " tokens) diverged";
    }
  }

  // --- the cases ---

  void batched_vs_alone() {
    EngineConfig c = config();
    const MetricsSnapshot m = expect_batch_matches(c, "batched");
    // Batched for real: fewer steps than the requests' tokens run one at a time would need.
    EXPECT_LT(m.num_steps, static_cast<int64_t>(requests().size()) * s_.max_tokens);
    EXPECT_EQ(m.generation_tokens, static_cast<int64_t>(requests().size()) * s_.max_tokens);
  }

  void chunked_vs_unchunked() {
    EngineConfig c = config();
    c.max_num_batched_tokens = 16;  // every prompt over 16 tokens is split across steps
    const MetricsSnapshot m = expect_batch_matches(c, "chunked prefill (budget 16)");
    const int32_t min_prefill_steps = (total_prompt_tokens() + 15) / 16;
    EXPECT_GE(m.num_steps, min_prefill_steps);
    EXPECT_GT(m.num_steps, static_cast<int64_t>(requests().size()));
    // A per-request chunk cap with a large budget: chunks of 7 from several prompts share a step.
    EngineConfig c2 = config();
    c2.long_prefill_token_threshold = 7;
    expect_batch_matches(c2, "chunked prefill (threshold 7)");
  }

  void preempted_vs_uninterrupted() {
    EngineConfig c = config();
    // Room for the longest request and a little more: the batch must preempt. Steps of 16 tokens,
    // so that a sliding-window group's share (its window plus a step) stays small.
    c.max_num_batched_tokens = 16;
    const int32_t blocks = longest_request_blocks(c.max_num_batched_tokens) + 2;
    c.kv_cache_bytes = int64_t{blocks} * 16 * bytes_per_token();
    const MetricsSnapshot m = expect_batch_matches(c, "preempted and recomputed");
    EXPECT_GT(m.num_preemptions, 0);
    EXPECT_EQ(m.num_kv_blocks_total, blocks);
  }

  void static_vs_continuous() {
    EngineConfig c = config();
    c.policy = "static";
    c.max_num_seqs = 3;
    expect_batch_matches(c, "static policy, 3 lanes");
    c.policy = "continuous";
    expect_batch_matches(c, "continuous policy, 3 lanes");
  }

  void prefix_cache_on_vs_off() {
    for (bool on : {true, false}) {
      EngineConfig c = config();
      c.enable_prefix_caching = on;
      auto e = make_engine(c);
      // The first shared request runs alone and leaves its blocks cached; the rest then hit them.
      std::vector<RequestResult> results = run_batch(*e, {requests()[0]});
      std::vector<TestRequest> rest(requests().begin() + 1, requests().end());
      for (RequestResult& r : run_batch(*e, rest)) results.push_back(std::move(r));
      expect_same(tokens_of(results), on ? "prefix cache on" : "prefix cache off");
      const MetricsSnapshot m = settled_metrics(*e);
      if (on) {
        EXPECT_GT(m.prefix_cache_hits, 0);
        // Each later shared prompt is served at least its full prefix blocks from the cache.
        for (int32_t i = 1; i < s_.num_shared; ++i) {
          EXPECT_GE(results[static_cast<size_t>(i)][0].num_cached_prompt_tokens, s_.prefix_len / 16 * 16)
              << "request " << i;
        }
      } else {
        EXPECT_EQ(m.prefix_cache_hits, 0);
      }
    }
  }

  void block_sizes() {
    for (int32_t bs : {1, 16, 32}) {
      EngineConfig c = config();
      c.block_size = bs;
      c.enable_prefix_caching = true;
      const std::string what = "block size " + std::to_string(bs);
      const MetricsSnapshot m = expect_batch_matches(c, what.c_str());
      EXPECT_EQ(m.num_kv_blocks_free + m.num_kv_blocks_cached, m.num_kv_blocks_total) << what;
    }
  }

 private:
  EquivalenceScenario s_;
  std::vector<TestRequest> reqs_;
  std::vector<std::vector<int32_t>> ref_;
  int64_t bytes_per_token_ = 0;
  std::vector<int32_t> group_windows_;
};

}  // namespace tessera::testing
