// ModelRunner: SchedulerOutput -> attention metadata (CSR block tables, slot mapping, positions)
// -> one forward over the ragged batch -> logits of the rows that need them -> sampled tokens.
// All buffers are preallocated for the step limits: a steady-state step allocates nothing here.
//
// Per step, for the scheduled sequences s = 0..S-1 in schedule order:
//   tokens/positions     [num_tokens]      seq s's tokens at start_position + i
//   query_start_loc      [S + 1]           rows of seq s: [qsl[s], qsl[s+1])
//   seq_lens             [S]               start_position + num_tokens
//   block_table_indptr   [S + 1]           CSR into block_table_indices
//   slot_mapping         [num_tokens]      block_table[p / block_size] * block_size + p % block_size
//   logits_rows          [R]               last num_spec_tokens + 1 rows of each seq needing logits
// then, under the static policy, one padding row per idle lane (see append_padding_lanes).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "model/forward_batch.h"
#include "model/kv_storage.h"
#include "model/llama_model.h"
#include "sample/rejection_sampler.h"
#include "sample/rng.h"
#include "sample/sampler.h"
#include "sched/scheduler_output.h"
#include "tessera/engine_defaults.h"
#include "tessera/sampling_params.h"
#include "util/op_profile.h"

namespace tessera {

struct RunnerConfig {
  int32_t max_num_batched_tokens = defaults::kMaxNumBatchedTokens;  // tokens per step at most
  int32_t max_num_seqs = defaults::kMaxNumSeqs;                     // sequences per step at most
  int32_t max_model_len = defaults::kMaxModelLen;                   // context per sequence at most
  int32_t max_num_spec_tokens = 8;       // draft tokens per sequence per step at most
  int32_t max_num_samples = defaults::kMaxSamplesPerRequest;  // n at most (parallel sampling)
  int32_t num_threads = 1;
  // A deliberately broken rejection sampler (sample::RejectionFault), set only by the statistical
  // losslessness tests (through EngineImpl::create_impl's adjustment) to show they catch one.
  sample::RejectionFault rejection_fault = sample::RejectionFault::kNone;
};

// What sampling needs to know about one scheduled sequence: its parameters, its random stream per
// sample and the tokens it has seen (penalties). Views of the engine's request state, handed down
// with the scheduler's output (one per ScheduledSeq): nothing calls back up for them.
struct SequenceSampling {
  const SamplingParams* params = nullptr;
  std::span<sample::Rng* const> rngs;        // [n]: the stream of each sample (index = sample_index)
  std::span<const int32_t> prompt;           // prompt token ids
  std::span<const int32_t> output;           // generated so far (this sample)
  std::span<const float> draft_probs;        // [k][vocab] draft distributions, empty for n-gram
  // Structured output: [k + 1][ceil(vocab / 64)] bitsets of the allowed tokens of each logits row
  // (bit i of word i / 64 = token i); empty = unconstrained. Disallowed logits become -inf
  // before any sampling, so greedy, sampling and the rejection sampler only see allowed tokens.
  std::span<const uint64_t> allowed_tokens;
};

// Per sampled token, when the request asked for logprobs.
struct SampledLogprobs {
  std::vector<sample::SampleOutput> tokens;  // one per sampled token of the sequence
};

struct RunnerOutput {
  sched::ModelRunnerOutput sampled;          // what the scheduler consumes
  std::vector<SampledLogprobs> logprobs;     // [seqs.size()] (empty entries when not asked)
  std::vector<int32_t> num_accepted_drafts;  // [seqs.size()] accepted draft tokens (speculation)
  // [seqs.size()] 1 when a logits row of the sequence held NaN or +Inf (or no finite value): the
  // sequence got no token, and the engine fails its request (a broken model or overflow must end
  // that request with an error, not abort the process in the sampler).
  std::vector<uint8_t> nonfinite_logits;
};

class ModelRunner {
 public:
  ModelRunner(const LlamaModel& model, KvStorage& kv, const RunnerConfig& config);

  // Runs one step: forward(out), then sample(out, sampling). sampling[i] belongs to out.seqs[i]
  // (read for the sequences that need logits; sampling.size() == out.seqs.size()). The result
  // lives in the runner until the next call (its vectors keep their capacity: a steady-state step
  // allocates nothing).
  const RunnerOutput& execute(const sched::SchedulerOutput& out, std::span<const SequenceSampling> sampling);
  // The two halves, for a caller that prepares part of `sampling` while the forward runs (the
  // engine's structured-output masks): the forward over the step's batch into the logits rows,
  // then masks, verification and sampling of those rows. sample() follows forward() of the same
  // `out`; the spans of `sampling` must be ready (nothing here waits).
  // adapters[i]: the LoRA adapter out.seqs[i] runs (null: the base model); empty: none this step.
  void forward(const sched::SchedulerOutput& out, std::span<const LoraAdapter* const> adapters = {});
  const RunnerOutput& sample(const sched::SchedulerOutput& out, std::span<const SequenceSampling> sampling);

  ThreadPool& pool() { return pool_; }
  // Pad rows the last step computed for idle static-batch lanes.
  int32_t num_padding_lanes() const { return num_padding_lanes_; }
  const RunnerConfig& config() const { return config_; }

 private:
  void build_batch(const sched::SchedulerOutput& out, std::span<const LoraAdapter* const> adapters);
  // Sets the logits of tokens not in `allowed` ([rows][words]) to -inf, rows in place.
  void apply_token_masks(float* rows, int32_t num_rows, std::span<const uint64_t> allowed) const;
  void append_padding_lanes(int32_t num_idle_lanes);
  void sample_sequence(const sched::ScheduledSeq& seq, const float* rows, const SequenceSampling& s,
                       std::vector<int32_t>& tokens, SampledLogprobs& logprobs, int32_t& num_accepted);

  const LlamaModel& model_;
  KvStorage& kv_;
  RunnerConfig config_;
  ThreadPool pool_;
  ForwardWorkspace workspace_;
  sample::Sampler sampler_;
  sample::RejectionSampler rejection_sampler_;
  // The step's batch (capacity reserved once).
  ForwardBatchBuilder batch_;  // this step's ragged batch (model/forward_batch.h)
  AlignedVector<float> logits_;            // [max rows][vocab], lines as the matmul stores them
  int32_t num_logits_rows_ = 0;
  int32_t num_padding_lanes_ = 0;          // static policy: idle lanes computed this step
  std::vector<uint8_t> row_usable_;         // [max logits rows] kernels::scan_logits' usable, per row this step
  std::vector<int32_t> row_argmax_;         // [max logits rows] its argmax (before any token mask)
  std::vector<int32_t> plain_greedy_;      // per scheduled seq: its argmax token, or -1 (sampled below)
  std::vector<std::pair<int32_t, size_t>> greedy_rows_;  // (seq index, logits row): plain greedy after a token mask
  std::vector<int32_t> spec_scratch_;      // [k + 1] emitted tokens of one verification
  RunnerOutput output_;                    // the last step's result, reused
  std::optional<profile::OpScope> step_scope_;  // --profile: the step from forward() to sample()'s end
};

}  // namespace tessera
