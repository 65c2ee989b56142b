// Engine-level test helpers for speculation: run a set of prompts through a public tessera::Engine
// all at once (so they share the batch), collect each request's tokens, and read the speculation
// metrics once the engine has published its final step.
#pragma once
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine_impl.h"
#include "tessera/engine.h"
#include "util/check.h"

namespace tessera::testing {

struct RunResult {
  std::vector<std::vector<int32_t>> tokens;  // [num_prompts] generated ids
  MetricsSnapshot metrics;                   // after every request finished
};

inline EngineConfig engine_config(const std::string& model, const std::string& speculative,
                                  const std::string& draft, int32_t k) {
  EngineConfig c;
  c.model_path = model;
  c.num_threads = 2;
  c.kv_cache_bytes = int64_t{64} << 20;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 256;
  c.max_model_len = 512;
  c.speculative = speculative;
  c.draft_model_path = draft;
  c.num_speculative_tokens = k;
  c.speculative_speed_guard = false;  // these tests pin exact draft counts, not wall-clock choices
  return c;
}

// `adjust`: changes to the engine's derived inner configs (EngineImpl::create_impl), e.g. a
// synthetic proposer.
inline RunResult run_engine(const EngineConfig& config, const std::vector<std::vector<int32_t>>& prompts,
                            const SamplingParams& params,
                            const std::function<void(EngineConfigs&)>& adjust = nullptr) {
  auto engine = EngineImpl::create_impl(config, adjust);
  TESSERA_CHECK(engine.ok(), "engine: {}", engine.ok() ? "" : engine.error().message);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& p : prompts) {
    auto s = (*engine)->submit({p, params, ""});
    TESSERA_CHECK(s.ok(), "submit: {}", s.ok() ? "" : s.error().message);
    streams.push_back(*s);
  }
  RunResult r;
  for (auto& s : streams) {
    std::vector<int32_t> ids;
    while (auto ev = s->next()) ids.insert(ids.end(), ev->token_ids.begin(), ev->token_ids.end());
    r.tokens.push_back(std::move(ids));
  }
  // The last step publishes its metrics just after pushing the final events.
  for (int i = 0; i < 200; ++i) {
    r.metrics = (*engine)->metrics();
    if (r.metrics.num_requests_finished == static_cast<int64_t>(prompts.size())) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  (*engine)->shutdown(std::chrono::milliseconds(0));
  return r;
}

// Tokens per verified step: accepted drafts + the one corrected or bonus token.
inline double tokens_per_spec_step(const MetricsSnapshot& m) {
  return m.spec_num_drafts == 0 ? 0.0
                                : static_cast<double>(m.spec_num_accepted_tokens + m.spec_num_drafts) /
                                      static_cast<double>(m.spec_num_drafts);
}

}  // namespace tessera::testing
