// Helpers for scheduler tests: request builders and a fake runner (no model).
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <numeric>

#include "sched/scheduler.h"

namespace tessera::sched::testing_util {

using V = std::vector<int32_t>;

inline V iota(int32_t n, int32_t start) {
  V v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

inline NewRequest make_request(int64_t id, V prompt, int32_t max_tokens, int32_t n = 1) {
  NewRequest r;
  r.id = id;
  r.prompt = std::make_shared<const V>(std::move(prompt));
  r.stop.max_tokens = max_tokens;
  r.stop.eos_token_ids = {2};
  r.num_samples = n;
  return r;
}

// A sequence's prompt ++ output as one vector.
inline V all_tokens(const Request& r) {
  V v(r.prompt->begin(), r.prompt->end());
  v.insert(v.end(), r.output_ids.begin(), r.output_ids.end());
  return v;
}

// The fake runner: every sequence that needs logits gets `num_samples` tokens from `pick`
// (default: 1000 + the position sampled for), or whatever `custom` returns.
using TokenFn = std::function<V(const ScheduledSeq&)>;

inline ModelRunnerOutput fake_run(const SchedulerOutput& out, const TokenFn& custom = nullptr) {
  ModelRunnerOutput r;
  for (const ScheduledSeq& s : out.seqs) {
    V tokens;
    if (s.needs_logits) {
      if (custom) {
        tokens = custom(s);
      } else {
        const int32_t pos = s.start_position + static_cast<int32_t>(s.token_ids.size());
        for (int32_t k = 0; k < s.num_samples; ++k) tokens.push_back(1000 + pos + 100 * k);
      }
    }
    r.sampled_token_ids.push_back(std::move(tokens));
  }
  return r;
}

inline const ScheduledSeq* find_seq(const SchedulerOutput& out, int64_t id) {
  for (const ScheduledSeq& s : out.seqs) {
    if (s.seq_id == id) return &s;
  }
  return nullptr;
}

// Per-sequence scheduled token counts, in schedule order: {{id, n}, ...}.
inline std::vector<std::pair<int64_t, int32_t>> counts(const SchedulerOutput& out) {
  std::vector<std::pair<int64_t, int32_t>> c;
  for (const ScheduledSeq& s : out.seqs) c.emplace_back(s.seq_id, static_cast<int32_t>(s.token_ids.size()));
  return c;
}

}  // namespace tessera::sched::testing_util
