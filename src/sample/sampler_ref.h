// The readable twin of Sampler: dense masks and one full sort of the vocabulary, no workspace,
// allocations everywhere. Tests hold the fast path to bitwise equality with these functions (same
// probabilities, same token for the same Rng state). See sampler.h for the processing order and
// the semantics of each step; the code below is that list, one block per step.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "sample/rng.h"
#include "sample/sampler.h"
#include "tessera/sampling_params.h"

namespace tessera::sample {

// Step 1 only: the penalized logits row.
std::vector<float> apply_penalties_ref(std::span<const float> logits, const SamplingParams& params,
                                       const SeenTokens& seen);

// Steps 1-5: the final distribution (one-hot at the argmax when greedy).
std::vector<float> compute_probs_ref(std::span<const float> logits, const SamplingParams& params,
                                     const SeenTokens& seen);

// Steps 1-6: the token (one rng draw unless greedy).
int32_t sample_ref(std::span<const float> logits, const SamplingParams& params,
                   const SeenTokens& seen, Rng& rng);

// log_softmax of the raw row (the logprobs convention of sampler.h).
std::vector<double> raw_logprobs_ref(std::span<const float> logits);

}  // namespace tessera::sample
