// Speculator: decides, per decoding sequence and step, whether to speculate and how many draft
// tokens to ask the proposer for — so that speculation never makes things slower:
//   * per sequence, an exponential moving average of the acceptance rate α picks k
//     (full k while α is high, fewer tokens as it drops, none — with exponential back-off
//     before trying again — when drafts keep being rejected);
//   * per step, no speculation once the batch holds more than max_batch_for_spec sequences:
//     batched decode is then no longer memory-bound, and verifying k extra tokens per sequence
//     costs real compute.
//   * engine-wide, a wall-clock guard: decode-only steps with speculation are timed against
//     probe windows without it; when speculating does not pay — a draft model too slow for its
//     acceptance, verification compute on a busy machine — it is switched off, with exponential
//     back-off before the next trial. Baselines are kept per batch size (number of sequences in
//     the step): a trial step is charged the time its tokens would have taken without speculation
//     at the same batch size, so a batch shrinking or growing between probe and trial is not
//     mistaken for a speed-up or a slow-down;
//   * per sequence, for the draft model: no speculation when the draft would first have to catch
//     up on more than max_catch_up_per_remaining tokens (prefill of prompt and output it has not
//     seen) per token the sequence may still generate: the catch-up could not pay for itself
//     (seen at batch 8, where sequences start speculating only in their last few tokens).
// Expected tokens per target step for acceptance α and k drafts: (1 − α^(k+1)) / (1 − α).
#pragma once
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "sample/rng.h"
#include "spec/ngram_proposer.h"

namespace tessera::spec {

struct SpeculatorConfig {
  int32_t num_speculative_tokens = 4;  // k at most
  int32_t max_batch_for_spec = 4;      // speculate only while running sequences <= this
  double min_acceptance = 0.3;         // below this EMA acceptance, back off
  double ema_weight = 0.3;             // weight of the newest step in the EMA
  int32_t initial_backoff_steps = 4;   // steps without speculation after a low-acceptance verdict
  int32_t max_backoff_steps = 64;
  bool speed_guard = true;             // the wall-clock guard (tests of exact draft counts turn it off)
  int32_t guard_probe_steps = 8;       // decode steps without speculation to measure the baseline
  int32_t guard_trial_steps = 16;      // decode steps with speculation per trial
  double guard_min_speedup = 1.0;      // keep speculating only at >= this speed-up
  int32_t guard_max_off_steps = 2048;  // longest back-off after failed trials
  int32_t max_catch_up_per_remaining = 4;  // draft catch-up tokens allowed per remaining token
  bool adaptive = true;                // false: always num_speculative_tokens (no EMA k, no back-off,
                                       // no catch-up limit)
  // Synthetic proposer for tests (see SpecTestHooks): each draft token is kept with this
  // probability, else replaced by (token + 1) % vocab. 1 = drafts untouched.
  double draft_keep_probability = 1.0;
  uint64_t draft_corruption_seed = 0;
};

// Test-only, process-wide: read when an engine is created (its Speculator config is built from it)
// so that engine-level tests can run a synthetic proposer with a known acceptance probability.
// With a self-draft under greedy decoding every untouched draft equals the target's argmax, so with
// fixed_k and draft_keep_probability = a each draft position is accepted independently with
// probability a: the i.i.d. setting in which (1 - a^(k+1)) / (1 - a) tokens per step is exact.
// Tests set it before creating the engine and reset it (set_spec_test_hooks({})) afterwards.
struct SpecTestHooks {
  bool fixed_k = false;                // SpeculatorConfig::adaptive = false
  double draft_keep_probability = 1.0;
  uint64_t seed = 0;
};
void set_spec_test_hooks(const SpecTestHooks& hooks);
SpecTestHooks spec_test_hooks();
// Copies the hooks into a config (the engine calls this for every Speculator it builds).
void apply_spec_test_hooks(SpeculatorConfig& config);

class Speculator {
 public:
  explicit Speculator(const SpeculatorConfig& config)
      : config_(config), corruption_rng_(config.draft_corruption_seed) {}

  const SpeculatorConfig& config() const { return config_; }
  // How many draft tokens to propose for this sequence this step (0 = do not speculate).
  int32_t num_tokens_to_propose(int64_t seq_id, int32_t num_running);
  // Outcome of a verification: `proposed` drafts, `accepted` of them accepted.
  void record(int64_t seq_id, int32_t proposed, int32_t accepted);
  // A step where the proposer found nothing for the sequence (n-gram miss): counts toward backoff.
  void record_miss(int64_t seq_id);
  void remove(int64_t seq_id) { seqs_.erase(seq_id); }
  // The synthetic proposer of SpecTestHooks: replaces each draft token, with probability
  // 1 - draft_keep_probability, by (token + 1) % vocab_size. No-op (no draws) at probability 1.
  void corrupt_drafts(std::span<int32_t> drafts, int32_t vocab_size);

  double acceptance(int64_t seq_id) const;

  // Draft model: may a sequence whose draft must first be fed `num_catch_up` tokens, and which
  // may generate `num_remaining` more, speculate this step?
  bool worth_catching_up(int32_t num_catch_up, int32_t num_remaining) const;

  // Wall-clock guard. allow_step(): may this step speculate at all? record_step(): a decode-only
  // step of `num_seqs` sequences (each ran its 1 + drafts tokens) that emitted `tokens` in
  // `seconds`; `speculated` = some sequence ran drafts.
  bool allow_step();
  void record_step(bool speculated, int32_t num_seqs, int64_t tokens, double seconds);
  // Proposer time spent in a step that record_step() does not see (one with prefill chunks), e.g.
  // the draft model catching up on a prompt just prefilled: during a trial it is charged to the
  // trial's time (the tokens it buys are counted in later steps).
  void record_overhead(double seconds);
  double guard_speedup() const { return last_speedup_; }  // last trial's measured speed-up

 private:
  enum class GuardPhase { kProbe, kTrial, kOff };
  static constexpr int32_t kMaxGuardSeqs = 16;  // batch sizes above share the last baseline
  struct Rate {
    double tokens = 0, seconds = 0;  // non-speculative decode-only steps of one batch size
  };
  GuardPhase phase_ = GuardPhase::kProbe;
  int32_t phase_steps_ = 0;      // decode steps recorded in this phase
  int32_t unmeasured_steps_ = 0; // kTrial: steps at a batch size without a baseline
  int32_t off_steps_left_ = 0;   // kOff: steps until the next probe
  int32_t next_off_steps_ = 64;  // back-off after the next failed trial
  Rate base_[kMaxGuardSeqs + 1];  // [num_seqs] baselines; halved at each probe (recent dominate)
  double trial_base_seconds_ = 0, trial_seconds_ = 0;  // kTrial: baseline time of its tokens, actual
  double last_speedup_ = 0.0;
  int32_t trial_steps_ = 0;      // length of the current trial (grows while speculation pays)

  struct SeqStats {
    double alpha = 0.7;        // EMA of per-token acceptance (optimistic start)
    int32_t backoff = 0;       // steps left without speculation
    int32_t next_backoff = 0;  // length of the next back-off
    int32_t num_misses = 0;    // consecutive proposer misses
  };
  SpeculatorConfig config_;
  sample::Rng corruption_rng_;   // draws of corrupt_drafts()
  std::unordered_map<int64_t, SeqStats> seqs_;
};

}  // namespace tessera::spec
