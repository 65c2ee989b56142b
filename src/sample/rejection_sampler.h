// RejectionSampler: verifies k proposed (draft) tokens against the target model's k+1 logits rows
// of one sequence and emits the tokens the target itself would have produced.
//
// Glossary (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding",
// arXiv:2211.17192; Chen et al. 2023, "Accelerating Large Language Model Decoding with
// Speculative Sampling", arXiv:2302.01318):
//   draft tokens     x_1..x_k proposed by a draft model (with distributions q_1..q_k) or by n-gram
//                    lookup (no distribution: q_i is taken as a one-hot at x_i).
//   target rows      p_1..p_{k+1}: the target's distributions after the same processing as normal
//                    sampling (Sampler::compute_probs). Row i scores position i given x_1..x_{i-1};
//                    row k+1 follows x_k.
//   accepted tokens  the longest prefix x_1..x_a that passes verification.
//   recovered token  at the first rejection (position a+1 <= k), a replacement drawn from the
//                    residual normalize(max(0, p_{a+1} - q_{a+1})), or argmax p_{a+1} when greedy.
//   bonus token      when all k are accepted, one more token drawn from p_{k+1} for free.
// Every step emits num_accepted + 1 tokens: the accepted prefix, then one recovered or bonus token.
//
//   row:      p_1     p_2     p_3   ...   p_k     p_{k+1}
//   draft:    x_1     x_2     x_3   ...   x_k
//   emitted:  x_1     x_2     y_3                            (x_3 rejected: y_3 recovered, a = 2)
//   emitted:  x_1     x_2     x_3   ...   x_k     b          (all accepted: b bonus, a = k)
//
// Greedy (temperature 0): x_i is accepted iff x_i == argmax p_i; the recovered token is argmax
// p_{a+1}; the bonus is argmax p_{k+1}. No random draws: identical to non-speculative greedy.
// Sampling: x_i is accepted with probability min(1, p_i(x_i) / q_i(x_i)) (one draw each), a
// recovered token costs one more draw, a bonus one draw. The emitted tokens are then distributed
// exactly as sampling the target token by token (lossless); tests/sample check this
// statistically.
//
// Random draws per step: (a accept tests) + (1 if a rejection happened) + 1 (recovered or bonus).
// Allocation: none in verify()/verify_greedy(); verify_logits() uses buffers sized at construction.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "sample/rng.h"
#include "sample/sampler.h"
#include "tessera/sampling_params.h"

namespace tessera::sample {

struct RejectionResult {
  int32_t num_accepted = 0;  // draft tokens accepted, in [0, k]
  int32_t num_emitted() const { return num_accepted + 1; }  // accepted + recovered/bonus
};

// A deliberately broken verification, so that the statistical losslessness tests through the whole
// engine can show their statistic fails on a wrong sampler. Chosen per RejectionSampler at
// construction (RunnerConfig::rejection_fault, set only by those tests through
// EngineImpl::create_impl's config adjustment); kNone everywhere else. No process-wide state.
enum class RejectionFault {
  kNone,
  kAcceptAll,      // broken: accepts every draft token (output follows q, not p)
  kResampleFromP,  // broken: on rejection draws from p instead of normalize(max(0, p - q))
};

class RejectionSampler {
 public:
  // Sizes the buffers of verify_logits() for up to max_num_spec_tokens drafts per step.
  RejectionSampler(int32_t vocab_size, int32_t max_num_spec_tokens, RejectionFault fault = RejectionFault::kNone);

  // Greedy verification from precomputed argmaxes.
  //   draft_token_ids: [k]; target_argmax: [k+1]; out_tokens: [>= k+1] receives the emitted
  //   tokens (num_emitted of them).
  static RejectionResult verify_greedy(std::span<const int32_t> draft_token_ids,
                                       std::span<const int32_t> target_argmax,
                                       std::span<int32_t> out_tokens);

  // Sampling verification from full distributions, rows of vocab_size floats.
  //   draft_probs:  [k * vocab] q_1..q_k, or empty for n-gram drafts (one-hot q).
  //   target_probs: [(k+1) * vocab] p_1..p_{k+1}, each summing to 1.
  static RejectionResult verify(std::span<const int32_t> draft_token_ids,
                                std::span<const float> draft_probs,
                                std::span<const float> target_probs, int32_t vocab_size, Rng& rng,
                                std::span<int32_t> out_tokens, RejectionFault fault = RejectionFault::kNone);

  // End to end from the target's raw logits rows ([(k+1) * vocab]): applies the request's
  // processing row by row with sampler (penalties see draft tokens x_1..x_{i-1} as pending
  // output for row i), then verify_greedy() or verify(). `seen.pending` must be empty.
  RejectionResult verify_logits(Sampler& sampler, std::span<const int32_t> draft_token_ids,
                                std::span<const float> draft_probs,
                                std::span<const float> target_logits,
                                const SamplingParams& params, const SeenTokens& seen, Rng& rng,
                                std::span<int32_t> out_tokens);

 private:
  int32_t vocab_size_;
  RejectionFault fault_;                // kNone but in the losslessness tests' broken engines
  int32_t max_num_spec_tokens_;
  std::vector<float> target_probs_;     // [(max_k+1) * vocab] processed target rows
};

// Expected emitted tokens per step with k drafts each accepted independently with probability
// alpha: 1 + alpha + ... + alpha^k = (1 - alpha^(k+1)) / (1 - alpha) (k+1 when alpha = 1).
double expected_tokens_per_step(double alpha, int32_t k);


}  // namespace tessera::sample
