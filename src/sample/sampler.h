// Sampler: one logits row (f32, vocab_size entries) + the request's SamplingParams + the tokens it
// has seen + its Rng -> the next token id (and, if asked, logprobs).
//
// Processing order (the same in the fast path here and in the readable twin sampler_ref.h):
//   1. penalties (vLLM semantics):
//        repetition_penalty r on every token in prompt ∪ output: x > 0 ? x / r : x * r
//        then, on output tokens only (OpenAI formula), with c = occurrences in the output:
//        x -= frequency_penalty * c;  x -= presence_penalty * (c > 0)
//   2. temperature: T < kGreedyTemperature means greedy: argmax, ties broken by the lowest id,
//      no random draw. Otherwise l = x / T.
//   3. top-k  (0 < top_k < vocab): keep exactly top_k tokens, ordered by (l desc, id asc), so
//      ties at the boundary keep the lowest ids.
//   4. top-p  (top_p < 1): with p = softmax over the top-k survivors, walk them in (l desc, id
//      asc) order and keep a token while the mass strictly before it is < top_p (the smallest
//      prefix whose mass reaches top_p; the most likely token always survives).
//   5. min-p  (min_p > 0): drop tokens with p < min_p * p_max (ratio, so renormalization after
//      steps 3-4 does not matter): exp(l - l_max) < min_p.
//   6. sample: one uniform u from the Rng; inverse CDF over the survivors in token-id order:
//      the first id whose running weight sum exceeds u * (total weight).
// Every sampling decision consumes exactly one Rng draw; greedy consumes none.
//
// Logprobs (when SamplingParams::logprobs is set) follow vLLM v1's default logprobs_mode
// "raw_logprobs": log_softmax of the RAW logits row, before penalties, temperature and
// truncation. So they describe the model, not the sampler settings, and they are the same for
// any temperature. The chosen token is reported with its logprob and rank (rank = number of
// tokens whose raw logit is >= the chosen one's, 1 for the argmax); the top-N list is sorted by
// (logprob desc, id asc).
//
// Allocation: a Sampler owns a SamplerWorkspace sized to the vocabulary at construction; sample()
// and compute_probs(span) allocate nothing afterwards (SampleOutput::top_logprobs reuses its
// capacity). The greedy path without penalties reads the row in place (a max pass, then a scan
// for the first position of the max): no copy, no sort.
// Not thread-safe: one Sampler per engine thread.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "sample/rng.h"
#include "tessera/sampling_params.h"
#include "util/status.h"

namespace tessera::sample {

// Temperatures below this are greedy (vLLM uses the same epsilon).
inline constexpr float kGreedyTemperature = 1e-5f;

inline bool is_greedy(const SamplingParams& params) {
  return params.temperature < kGreedyTemperature;
}
bool has_penalties(const SamplingParams& params);
// Greedy with no penalties and no logprobs: Sampler::sample's token is argmax_lowest_id of the raw
// row, and it draws nothing and touches no workspace (so rows can be picked on any thread).
inline bool is_plain_greedy(const SamplingParams& params) {
  return is_greedy(params) && !has_penalties(params) && !params.logprobs.has_value();
}

// Rejects values the sampler cannot honour (negative temperature, top_p outside (0, 1], ...).
// The engine calls this when a request arrives; sample() assumes valid params.
Status validate_sampling_params(const SamplingParams& params, int32_t vocab_size);

// The tokens a request has seen, for penalties. Spans into the request's own storage.
struct SeenTokens {
  std::span<const int32_t> prompt;   // [num_tokens_prompt] prompt token ids
  std::span<const int32_t> output;   // [num_tokens_output] generated (committed) token ids
  std::span<const int32_t> pending;  // [num] uncommitted tokens after output (draft tokens ahead
                                     // of a verification row); counted as output
};

struct TokenLogprob {
  int32_t token_id = -1;  // vocabulary id
  float logprob = 0.0f;   // natural log of the raw-model probability
};

struct SampleOutput {
  int32_t token_id = -1;                   // the chosen token
  float logprob = 0.0f;                    // raw logprob of token_id (only when logprobs set)
  int32_t rank = 0;                        // 1-based rank of token_id in the raw distribution
  std::vector<TokenLogprob> top_logprobs;  // [min(params.logprobs, vocab)] (logprob desc, id asc)
};

// Preallocated buffers, each [vocab_size]. Scratch only: contents are meaningless between calls,
// except mark/counts, which are all zero between calls.
struct SamplerWorkspace {
  explicit SamplerWorkspace(int32_t vocab_size);
  std::vector<float> logits;     // [vocab] penalized row, then scaled by 1/T
  std::vector<float> weights;    // [vocab] exp(l - l_max) (unnormalized probabilities)
  std::vector<int32_t> indices;  // [vocab] candidate ids (partial sorts happen here)
  std::vector<int32_t> touched;  // [<= vocab] ids whose mark/counts are non-zero during penalties
  std::vector<int32_t> counts;   // [vocab] occurrences in output + pending
  std::vector<uint8_t> mark;     // [vocab] 1 if seen in prompt, output or pending
};

class Sampler {
 public:
  explicit Sampler(int32_t vocab_size);

  int32_t vocab_size() const { return vocab_size_; }

  // Picks the next token. `out` (may be null) receives the token and, if params.logprobs is set,
  // the raw logprobs. Consumes one rng draw unless greedy.
  int32_t sample(std::span<const float> logits, const SamplingParams& params,
                 const SeenTokens& seen, Rng& rng, SampleOutput* out = nullptr);

  // Greedy pick after penalties (what sample() returns for temperature 0), whatever the
  // temperature in params. No draw, no allocation, no copy when there are no penalties.
  int32_t argmax(std::span<const float> logits, const SamplingParams& params,
                 const SeenTokens& seen);

  // The final distribution after steps 1-5, [vocab], summing to 1 (a one-hot at the argmax when
  // greedy). The rejection sampler and the tests use it as p and q.
  void compute_probs(std::span<const float> logits, const SamplingParams& params,
                     const SeenTokens& seen, std::span<float> probs);
  std::vector<float> compute_probs(std::span<const float> logits, const SamplingParams& params,
                                   const SeenTokens& seen);

  // Raw logprobs (as sample() reports them) of a token chosen elsewhere, e.g. by the rejection
  // sampler: out->token_id, logprob, rank and the top params.logprobs entries.
  void logprobs_of(std::span<const float> logits, int32_t token_id, const SamplingParams& params,
                   SampleOutput* out);

 private:
  // Steps 1-5. Dense (nothing filtered): every id survives with weight ws_.weights[id].
  // Otherwise the survivors' ids are ws_.indices[0, num), ascending, weights in ws_.weights.
  struct Survivors {
    int32_t num = 0;     // surviving tokens
    double total = 0;    // sum of their weights, accumulated in id order
    bool dense = false;  // all vocab_size ids survive; ws_.indices is not filled
  };
  Survivors prepare(std::span<const float> logits, const SamplingParams& params,
                    const SeenTokens& seen);
  // Step 1 into ws_.logits; returns the row to read (the input itself when no penalty applies).
  const float* penalized_row(std::span<const float> logits, const SamplingParams& params,
                             const SeenTokens& seen);
  void fill_logprobs(std::span<const float> logits, int32_t num_top, SampleOutput* out);

  int32_t vocab_size_;
  SamplerWorkspace ws_;
};

// Shared helpers (also used by the rejection sampler and the reference twin).
// argmax with ties broken by the lowest id; NaNs are never chosen unless all entries are NaN.
int32_t argmax_lowest_id(const float* row, int32_t n);
// Inverse-CDF pick in id order over weights[0, n): the first i whose running (double) sum exceeds
// u * total; falls back to the last i with positive weight.
int32_t pick_by_weight(const float* weights, int32_t n, double total, double u);

}  // namespace tessera::sample
