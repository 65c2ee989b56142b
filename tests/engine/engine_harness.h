// Test harness for the Engine's public API: build configs, submit a batch of requests, read every
// stream to its end, and collect token ids, text (concatenated deltas), finish reasons and the
// engine's metrics. Header-only; shared by the stories260K (golden) and SmolLM2 (model) suites.
//
// Invariant the equivalence suites rely on: with greedy sampling the tokens a request gets must
// not depend on how the engine batched, chunked, preempted, cached or blocked it.
#pragma once
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tessera/engine.h"

namespace tessera::testing {

// One sample's result.
struct SampleResult {
  std::vector<int32_t> token_ids;  // every generated token, in order
  std::vector<std::vector<TokenLogprob>> top_logprobs;  // per token, when SamplingParams::logprobs asks
  std::string text;                // concatenation of the text deltas
  FinishReason finish_reason = FinishReason::kNone;
  int32_t num_events = 0;          // events received
  int32_t num_cached_prompt_tokens = 0;  // from the last event
};

// One request's result: one entry per sample (n).
using RequestResult = std::vector<SampleResult>;

struct TestRequest {
  std::vector<int32_t> prompt;  // token ids
  SamplingParams params;
};

inline EngineConfig base_config(const std::string& model_path) {
  EngineConfig c;
  c.model_path = model_path;
  c.num_threads = 2;
  c.kv_cache_bytes = int64_t{64} << 20;
  c.max_model_len = 512;
  c.max_num_batched_tokens = 512;
  c.max_num_seqs = 16;
  return c;
}

inline std::unique_ptr<Engine> make_engine(const EngineConfig& c) {
  auto e = Engine::create(c);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
  if (!e.ok()) return nullptr;
  return std::move(*e);
}

// Reads a stream to its end.
inline RequestResult drain(RequestStream& stream, int32_t num_samples) {
  RequestResult r(static_cast<size_t>(num_samples));
  while (auto ev = stream.next(std::chrono::milliseconds(120000))) {
    SampleResult& s = r.at(static_cast<size_t>(ev->sample_index));
    s.token_ids.insert(s.token_ids.end(), ev->token_ids.begin(), ev->token_ids.end());
    s.top_logprobs.insert(s.top_logprobs.end(), ev->top_logprobs.begin(), ev->top_logprobs.end());
    s.text += ev->text_delta;
    s.num_events += 1;
    s.num_cached_prompt_tokens = ev->num_cached_prompt_tokens;
    if (ev->finish_reason != FinishReason::kNone) s.finish_reason = ev->finish_reason;
    if (stream.finished()) break;
  }
  return r;
}

// Submits every request as one message (they are scheduled together from the first step), then
// reads all streams.
inline std::vector<RequestResult> run_batch(Engine& engine, const std::vector<TestRequest>& reqs) {
  std::vector<GenerateRequest> batch;
  for (const TestRequest& r : reqs) batch.push_back({r.prompt, r.params, ""});
  auto submitted = engine.submit_all(std::move(batch));
  EXPECT_TRUE(submitted.ok()) << (submitted.ok() ? "" : submitted.error().message);
  if (!submitted.ok()) return {};
  const std::vector<std::shared_ptr<RequestStream>>& streams = submitted.value();
  std::vector<RequestResult> out;
  for (size_t i = 0; i < streams.size(); ++i) out.push_back(drain(*streams[i], reqs[i].params.n));
  return out;
}

// Runs each request alone: the next is submitted after the previous one finished.
inline std::vector<RequestResult> run_one_by_one(Engine& engine, const std::vector<TestRequest>& reqs) {
  std::vector<RequestResult> out;
  for (const TestRequest& r : reqs) {
    auto batch = run_batch(engine, {r});
    if (batch.empty()) return {};
    out.push_back(std::move(batch[0]));
  }
  return out;
}

// The metrics once the engine thread has published the state after its last request finished.
inline MetricsSnapshot settled_metrics(Engine& engine) {
  MetricsSnapshot m = engine.metrics();
  for (int i = 0; i < 2000 && (m.num_requests_running + m.num_requests_waiting > 0 ||
                               engine.num_unfinished_requests() > 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    m = engine.metrics();
  }
  return m;
}

// Token ids of every sample of every request, for whole-run comparisons.
inline std::vector<std::vector<int32_t>> tokens_of(const std::vector<RequestResult>& results) {
  std::vector<std::vector<int32_t>> t;
  for (const RequestResult& r : results) {
    for (const SampleResult& s : r) t.push_back(s.token_ids);
  }
  return t;
}

// Greedy requests of varied prompt lengths; the first `num_shared` share a `prefix_len`-token
// prefix (so a prefix cache has something to hit), the rest are independent. Token ids are drawn
// from [first_id, vocab).
inline std::vector<TestRequest> make_greedy_requests(const std::vector<int32_t>& prompt_lens, int32_t num_shared,
                                                     int32_t prefix_len, int32_t max_tokens, int32_t first_id,
                                                     int32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> id(first_id, vocab - 1);
  std::vector<int32_t> prefix(static_cast<size_t>(prefix_len));
  for (int32_t& t : prefix) t = id(rng);
  std::vector<TestRequest> reqs;
  for (size_t i = 0; i < prompt_lens.size(); ++i) {
    TestRequest r;
    const bool shared = static_cast<int32_t>(i) < num_shared;
    if (shared) r.prompt = prefix;
    while (static_cast<int32_t>(r.prompt.size()) < prompt_lens[i] + (shared ? prefix_len : 0)) r.prompt.push_back(id(rng));
    r.params.temperature = 0.0f;
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    reqs.push_back(std::move(r));
  }
  return reqs;
}

}  // namespace tessera::testing
