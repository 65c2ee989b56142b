// NgramProposer: prompt-lookup speculation. For a sequence's tokens (prompt + output), find an
// earlier occurrence of its last n tokens and propose up to k tokens that followed it there.
//
//   tokens:  ... a b c d x y z ... a b c d |        (suffix "a b c d", n = 4)
//                ^^^^^^^ match   ^^^^^ proposal = x y z (up to k tokens, never past the end)
//
// Rules:
//  - n is tried from max_n down to min_n; the first n with a match wins (longest n-gram).
//  - Among matches of that n, MatchPolicy::kLatest (default) takes the most recent occurrence
//    (recent context predicts best, the choice of this brief); MatchPolicy::kEarliest takes the
//    first one, which is what vLLM v1's prompt-lookup (KMP over the reversed tokens) returns.
//  - A match may overlap the suffix itself (runs like "1 1 1 1"), but must start before it, so at
//    least one token follows the match.
//  - Fewer than min_n + 1 tokens, or no match: no proposal.
//
// Cost: a backwards scan, O(L * n) comparisons per tried n in the worst case and ~L in practice
// (the first compared token usually differs), so O(max_n^2 * L) worst case: ~50k comparisons for
// L = 4096 and max_n = 4, a few microseconds per sequence per step. No allocation in propose().
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "speculative/proposer.h"
#include "tessera/engine_defaults.h"
#include "util/status.h"

namespace tessera::speculative {

enum class MatchPolicy {
  kLatest,    // most recent earlier occurrence (default)
  kEarliest,  // first occurrence (vLLM v1)
};

struct NgramConfig {
  int32_t min_n = 2;                       // shortest n-gram to match (tokens), >= 1
  int32_t max_n = 4;                       // longest n-gram to match (tokens), >= min_n
  int32_t num_speculative_tokens = defaults::kNumSpeculativeTokens;  // k: tokens proposed at most per step
  MatchPolicy policy = MatchPolicy::kLatest;
};

Status validate_ngram_config(const NgramConfig& config);

class NgramProposer final : public Proposer {
 public:
  explicit NgramProposer(const NgramConfig& config);  // config must validate

  const NgramConfig& config() const { return config_; }

  // Writes up to min(k, out.size()) proposed tokens to out and returns how many (0 = none).
  // The caller shrinks `out` near the context limit (vLLM caps k by max_model_len - L).
  int32_t propose(std::span<const int32_t> tokens, std::span<int32_t> out) const;
  std::vector<int32_t> propose(std::span<const int32_t> tokens) const;

  // Proposer: each request's prompt ++ output, up to its num_drafts tokens. The lookups are the
  // proposer's "forwards" (microseconds, timed all the same: as many as the largest k of the call).
  // Nothing to catch up, nothing kept per sequence.
  void propose_batch(std::span<const DraftRequest> requests, ThreadPool& pool,
                     std::span<DraftResult> results) override;
  ProposeCost last_cost() const override { return last_cost_; }
  int32_t num_catch_up(const DraftRequest&) override { return 0; }
  void release(int64_t) override {}

 private:
  NgramConfig config_;
  std::vector<int32_t> context_;  // propose_batch scratch: prompt ++ output of one request
  ProposeCost last_cost_;
};

// The readable twin: for each n from max_n down, compares every earlier window with the suffix
// using std::equal; returns the proposal of the chosen occurrence.
std::vector<int32_t> propose_ngram_ref(const NgramConfig& config,
                                       std::span<const int32_t> tokens);

}  // namespace tessera::speculative
