// SpecDecoder: speculative decoding's one home. It owns the Speculator (who drafts how many
// tokens: adaptive k, back-off, the cost model and the wall-clock guard), the Proposer (n-gram or
// draft model, one interface), the draft models' q rows waiting for verification, the proposal
// scratch and the proposer's timing. The engine makes one call per step, after it has applied the
// step's updates:
//
//   step N:    runner verifies drafts (q rows: draft_probs_of) -> scheduler update -> outputs
//              -> SpecDecoder::after_step: record the verifications, forget finished sequences,
//                 propose drafts for the sequences still decoding (Scheduler::set_spec_token_ids),
//                 time the step for the guard and the cost model
//   step N+1:  the scheduler runs each speculating sequence's k drafts as one (k + 1)-token chunk
//              in the same batch as everyone else's tokens.
//
// Invariants:
//  - draft_probs_[seq] exists only while that sequence has sampled (non-greedy) draft-model drafts
//    waiting for verification; it is dropped as soon as the sequence gets logits (verified) or
//    finishes. Its rows correspond, in order, to the drafts handed to set_spec_token_ids; the
//    scheduler may run only a prefix of them, so draft_probs_of slices the first num_spec_tokens.
//  - The Speculator decides per sequence and step whether to propose and how many, for both
//    proposers.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/llama_model.h"
#include "sched/scheduler.h"
#include "speculative/draft_proposer.h"
#include "speculative/ngram_proposer.h"
#include "speculative/proposer.h"
#include "speculative/speculator.h"
#include "tessera/sampling_params.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace tessera::speculative {

struct SpecDecoderConfig {
  std::string proposer;                  // "ngram" | "draft"
  std::string draft_model_path;          // "draft": a GGUF with the target's vocabulary
  SpeculatorConfig speculator;
  NgramConfig ngram;                     // "ngram"
  DraftProposerConfig draft;             // "draft"
  int32_t max_model_len = 0;             // context per request in force (caps k)
  int32_t vocab_size = 0;                // q row width
  // Sees (and may change) each sequence's drafts before they are scheduled; unset in production.
  // The tests' synthetic proposer (tests/speculative/test_engine_spec_stats.cpp) replaces draft
  // tokens with a seeded probability through it, to measure acceptance in the i.i.d. setting.
  std::function<void(int64_t seq_id, std::span<int32_t> drafts)> draft_filter;
};

// A sequence still decoding after this step's updates, as the engine holds it.
struct SpecSequence {
  int64_t seq_id = 0;
  std::span<const int32_t> prompt;       // committed prompt tokens
  std::span<const int32_t> output;       // this sample's committed output tokens
  const SamplingParams* params = nullptr;
  uint64_t cache_extra_key = 0;          // kv::hash_cache_salt of the request's salt
};

// One step as after_step needs it. Spans into the engine's step data: num_accepted[i] and
// sampled[i] belong to out.seqs[i]; `finished` are the sequences whose sample ended in this step's
// outputs (stop string, EOS, length, abort); `decoding` those that may draft for the next step.
struct SpecStep {
  const sched::SchedulerOutput* out = nullptr;
  std::span<const int32_t> num_accepted;
  std::span<const std::vector<int32_t>> sampled;
  std::span<const sched::RequestUpdate> updates;
  std::span<const int64_t> finished;
  std::span<const SpecSequence> decoding;
  std::chrono::steady_clock::time_point start;  // when the step began (schedule)
};

// What after_step did, for the engine's metrics.
struct SpecStepStats {
  double propose_seconds = 0.0;          // the proposer's time in this step (0 when it did not run)
  int64_t num_catch_up_tokens = 0;       // tokens a draft model fed to catch up
};

class SpecDecoder {
 public:
  // The proposer the config names: the n-gram lookup, or the draft model loaded and checked
  // against `target`'s vocabulary (kInvalidArgument: no path, k < 1, an incompatible vocabulary).
  static Result<std::unique_ptr<SpecDecoder>> create(const SpecDecoderConfig& config, const LlamaModel& target);

  // The q rows of a scheduled sequence's drafts: [num_spec_tokens][vocab], empty for n-gram drafts,
  // greedy requests and sequences without drafts.
  std::span<const float> draft_probs_of(int64_t seq_id, int32_t num_spec_tokens) const;

  // Once per step, after the engine applied the step's updates (see the file comment): records
  // the verifications, forgets the finished, proposes for `decoding` (Scheduler::set_spec_token_ids)
  // on `pool`, and times the step for the guard and the cost model.
  SpecStepStats after_step(const SpecStep& step, sched::Scheduler& scheduler, ThreadPool& pool);

  // A sequence the engine ended outside a step's updates (it failed the request): its acceptance
  // estimates go now.
  void remove(int64_t seq_id) { speculator_->remove(seq_id); }

  const SpecCostModel& costs() const { return speculator_->costs(); }
  // Committed tokens the draft model's prefix cache served (0 for the n-gram proposer).
  int64_t draft_prefix_hit_tokens() const { return draft_ ? draft_->stats().num_prefix_hit_tokens : 0; }

 private:
  SpecDecoder(const SpecDecoderConfig& config, std::unique_ptr<Speculator> speculator,
              std::unique_ptr<Proposer> proposer, DraftProposer* draft);
  // Drafts for `decoding` (step N's proposals for step N+1); returns the proposer's time.
  double propose(const SpecStep& step, sched::Scheduler& scheduler, ThreadPool& pool, SpecStepStats& stats);
  // The proposal itself (propose() times it): candidates, plan, one batched proposal, the drafts
  // handed to the scheduler.
  void draft(const SpecStep& step, sched::Scheduler& scheduler, ThreadPool& pool, SpecStepStats& stats);
  void forget(int64_t seq_id);

  SpecDecoderConfig config_;
  std::unique_ptr<Speculator> speculator_;
  std::unique_ptr<Proposer> proposer_;
  DraftProposer* draft_ = nullptr;                         // proposer_ when it is the draft model
  std::unordered_map<int64_t, std::vector<float>> draft_probs_;  // seq id -> [k][vocab] q rows
  // propose() scratch: who may speculate, the Speculator's k for each, the proposer's requests
  // and results (reused step to step).
  std::vector<SpecCandidate> candidates_;
  std::vector<const SpecSequence*> candidate_seqs_;
  std::vector<int32_t> plan_;
  std::vector<DraftRequest> requests_;
  std::vector<DraftResult> results_;
};

}  // namespace tessera::speculative
