// Proposer: where draft tokens come from. Two implement it: NgramProposer (prompt lookup in the
// sequence's own tokens) and DraftProposer (a small draft model with its own KV cache). The
// SpecDecoder (spec_decoder.h) calls one of them once per step for every sequence the Speculator
// lets draft, and never needs to know which.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "tessera/sampling_params.h"
#include "util/thread_pool.h"

namespace tessera::speculative {

// One speculating sequence of a step. Spans point into the engine's request state.
struct DraftRequest {
  int64_t seq_id = 0;                       // key of the proposer's per-sequence state
  std::span<const int32_t> prompt;          // [num_prompt] committed prompt tokens
  std::span<const int32_t> output;          // [num_output] committed output tokens
  int32_t num_drafts = 0;                   // k for this sequence, 1..num_speculative_tokens
  const SamplingParams* params = nullptr;   // greedy -> argmax drafts; else drawn from q
  uint64_t cache_extra_key = 0;             // kv::hash_cache_salt of the request's salt (0 = none)
};

struct DraftResult {
  std::vector<int32_t> tokens;              // [<= num_drafts] proposals (empty: none this step)
  std::vector<float> probs;                 // [tokens.size()][vocab] q rows; empty when greedy
                                            // (or when the proposer has no distribution: n-gram)
};

// What the last propose_batch() cost, in the Speculator's cost-model terms (speculator.h).
struct ProposeCost {
  int32_t num_forwards = 0;                 // drafting forwards (n-gram: its k lookups)
  double forward_seconds = 0.0;             // their wall time
  int32_t num_catch_up_tokens = 0;          // tokens fed to catch up beyond the last one or two
                                            // committed ones per sequence (0: it was up to date)
  double catch_up_seconds = 0.0;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  // Drafts for every request: results[i] answers requests[i] (results.size() == requests.size()).
  // `pool` is the engine's compute pool (the draft model's forwards run on it).
  virtual void propose_batch(std::span<const DraftRequest> requests, ThreadPool& pool,
                             std::span<DraftResult> results) = 0;
  virtual ProposeCost last_cost() const = 0;
  // Committed tokens of `request` the proposer would feed before its first draft, beyond the one
  // or two that every proposal feeds (the cost model's catch-up). No side effects.
  virtual int32_t num_catch_up(const DraftRequest& request) = 0;
  // Forgets a sequence (finished or aborted). Unknown ids: no-op.
  virtual void release(int64_t seq_id) = 0;
};

}  // namespace tessera::speculative
