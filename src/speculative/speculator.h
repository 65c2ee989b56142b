// Speculator: decides, per decoding sequence and step, whether to speculate and how many draft
// tokens to ask the proposer for — so that speculation never makes things slower:
//   * the cost model (spec_cost_model.h; on with the wall-clock guard): from measured step times
//     (target step time per number of tokens in the step, proposer time per forward, draft
//     catch-up per token) and each sequence's acceptance α, plan() picks each sequence's k
//     (0 included) for the best predicted speed-up of the whole step (SpecCostModel::best_plan:
//     the drafts of largest expected yield α_i^j first, since at batch b every draft widens
//     everyone's step), and speculates only when it is >= min_predicted_speedup (1 + a margin
//     for noise); it waits for one timed step without drafts at each batch size b first, the
//     base t(b) of every plan. α is the
//     per-position acceptance (accepted / drafts tested: a rejection ends the tests), an EMA per
//     sequence that starts from the engine-wide EMA, so a workload of low-α prompts stops paying
//     for wrong guesses from its first tokens. A sequence the best plan leaves out backs off
//     (4, 8, ... 64 steps) and then probes with one draft to refresh its α. The draft model must
//     also earn back its catch-up: feeding t tokens it has not seen costs t · t_c, allowed only
//     when its share (1/m of the m speculating) of the batch time the plan saves over the tokens
//     the sequence may still generate exceeds it;
//   * without timing (tests, or before the first step was timed), a heuristic per sequence: full
//     k while the EMA of accepted / proposed is high, fewer tokens as it drops, none — with
//     exponential back-off before trying again — when drafts keep being rejected; the draft may
//     catch up on at most max_catch_up_per_remaining tokens per token still to generate;
//   * per step, no speculation once the batch holds more than max_batch_for_spec sequences (it
//     also sizes the draft model's batch): with 16 allowed, the cost model's plans at batch 8
//     lost on a loaded 2-core host (bench/README.md B9: t(n) of each width is sampled at
//     different moments of a changing load), so larger batches stay plain decode.
//   * engine-wide, the safety net, a wall-clock guard: speculative decode-only steps are timed
//     against the baseline of steps without drafts; when speculating does not pay — a draft model
//     too slow for its acceptance, verification compute on a busy machine, anything the cost
//     model misses — it is switched off, with exponential back-off before the next trial.
//     Baselines are kept per batch size (number of sequences in the step): a trial step is
//     charged the time its tokens would have taken without speculation at the same batch size,
//     so a batch shrinking or growing is not mistaken for a speed-up or a slow-down. Every step
//     without drafts is a baseline sample, whatever the phase (a decaying sum, so recent steps
//     dominate): within a trial such steps (the cost model declining, n-gram misses) interleave
//     with the speculative ones, so load that comes and goes hits both sides alike, and a trial
//     counts speculative steps only — a trial in which nothing was proposed is no verdict.
// Expected tokens per target step for acceptance α and k drafts: (1 − α^(k+1)) / (1 − α).
#pragma once
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "sample/rng.h"
#include "speculative/ngram_proposer.h"
#include "speculative/spec_cost_model.h"

namespace tessera::speculative {

struct SpeculatorConfig {
  int32_t num_speculative_tokens = defaults::kNumSpeculativeTokens;  // k at most
  int32_t max_batch_for_spec = 4;      // speculate only while running sequences <= this (B9 on
                                       // the 2-core host: n-gram at batch 8 lost, 0.62-1.04x)
  double min_acceptance = 0.3;         // below this EMA acceptance, back off
  double ema_weight = 0.3;             // weight of the newest step in the EMA
  int32_t initial_backoff_steps = 4;   // steps without speculation after a low-acceptance verdict
  int32_t max_backoff_steps = 64;
  bool speed_guard = true;             // the wall-clock guard (tests of exact draft counts turn it off)
  int32_t guard_probe_steps = 8;       // decode steps without speculation to measure the baseline
  int32_t guard_trial_steps = 16;      // speculative decode steps in the first trial
  double guard_min_speedup = 1.0;      // keep speculating only at >= this speed-up
  int32_t guard_max_off_steps = 2048;  // longest back-off after failed trials
  int32_t max_catch_up_per_remaining = 4;  // heuristic: draft catch-up tokens per remaining token
  bool cost_model = true;              // plan() by predicted speed-up (the engine ties it to the guard)
  double min_predicted_speedup = 1.05; // speculate only when the cost model predicts at least this
  double alpha_prior = 0.7;            // engine-wide α before any verification
  double global_alpha_weight = 0.1;    // weight of a verification in the engine-wide α EMA
  double explore_catch_up_share = 0.25;  // before any verification, a draft may catch up when that
                                         // costs <= this share of the sequence's plain decode time
  SpecCostConfig costs;                // priors and EMA weight of the measured times
  bool adaptive = true;                // false: always num_speculative_tokens (no EMA k, no back-off,
                                       // no catch-up limit)
};

// A decoding sequence that could speculate this step.
struct SpecCandidate {
  int64_t seq_id = 0;
  int32_t max_k = 0;          // drafts its max_tokens and the context allow (>= 1)
  int32_t num_catch_up = 0;   // tokens the draft model must feed before drafting (0: n-gram)
  int32_t num_remaining = 0;  // tokens the sequence may still generate
};

class Speculator {
 public:
  explicit Speculator(const SpeculatorConfig& config)
      : config_(config), costs_(config.costs),
        global_accepted_(config.alpha_prior) {}

  const SpeculatorConfig& config() const { return config_; }
  // Drafts for each candidate this step (ks[i] for candidates[i], 0 = none), `num_running`
  // sequences in the batch. Each call counts as one step for the candidates' back-off.
  void plan(std::span<const SpecCandidate> candidates, int32_t num_running, std::span<int32_t> ks);
  // The heuristic for one sequence (used by plan() without timing): 0 = do not speculate.
  int32_t num_tokens_to_propose(int64_t seq_id, int32_t num_running);
  // Outcome of a verification: `proposed` drafts, `accepted` of them accepted.
  void record(int64_t seq_id, int32_t proposed, int32_t accepted);
  // A step where the proposer found nothing for the sequence (n-gram miss): the heuristic backs
  // off after 4 in a row.
  void record_miss(int64_t seq_id);
  void remove(int64_t seq_id) { seqs_.erase(seq_id); }

  double acceptance(int64_t seq_id) const;  // the heuristic's EMA of accepted / proposed
  double alpha(int64_t seq_id) const;       // the cost model's per-position α (prior if unknown)
  double global_alpha() const { return global_accepted_ / global_tested_; }

  // Measured times for the cost model: a decode-only step of `num_tokens` tokens without the
  // proposer's time; a proposer call of `num_forwards` forwards (steady drafting); a draft
  // catch-up of `num_tokens` tokens.
  void record_target_step(int32_t num_tokens, double seconds) { costs_.record_target_step(num_tokens, seconds); }
  void record_proposer(int32_t num_forwards, double seconds);
  void record_catch_up(int32_t num_tokens, double seconds) { costs_.record_catch_up(num_tokens, seconds); }
  const SpecCostModel& costs() const { return costs_; }

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
  double guard_speedup() const { return last_speedup_; }

 private:
  enum class GuardPhase { kProbe, kTrial, kOff };
  static constexpr int32_t kMaxGuardSeqs = 16;  // batch sizes above share the last baseline
  static constexpr double kBaseDecay = 0.9;     // weight of older baseline samples, per sample
  struct Rate {
    double tokens = 0, seconds = 0;  // decaying sums over steps without drafts, one batch size
  };
  void start_trial();
  GuardPhase phase_ = GuardPhase::kProbe;
  int32_t phase_steps_ = 0;      // kProbe: steps without drafts; kTrial: speculative steps
  int32_t trial_plain_steps_ = 0;  // kTrial: steps without drafts (fresh baseline samples)
  int32_t unmeasured_steps_ = 0; // kTrial: speculative steps at a batch size without a baseline
  int32_t off_steps_left_ = 0;   // kOff: steps until the next trial
  int32_t next_off_steps_ = 64;  // back-off after the next failed trial
  Rate base_[kMaxGuardSeqs + 1];  // [num_seqs] baselines
  double trial_base_seconds_ = 0, trial_seconds_ = 0;  // kTrial: baseline time of its tokens, actual
  double last_speedup_ = 0.0;
  int32_t trial_steps_ = 0;      // length of the current trial (grows while speculation pays)

  struct SeqStats {
    double alpha = 0.7;        // heuristic: EMA of accepted / proposed (optimistic start)
    double accepted = 0.0;     // cost model: EMAs of drafts accepted and drafts tested per
    double tested = 0.0;       //   verification (α = accepted / tested), seeded from the global α
    int32_t backoff = 0;       // steps left without speculation
    int32_t next_backoff = 0;  // length of the next back-off
    int32_t num_misses = 0;    // consecutive proposer misses
    bool probe_due = false;    // cost model: after this back-off, one single-draft probe
  };
  SeqStats& stats_of(int64_t seq_id);
  void back_off(SeqStats& s);
  void plan_heuristic(std::span<const SpecCandidate> candidates, int32_t num_running, std::span<int32_t> ks);
  // plan() by the cost model: best_plan() over the eligible sequences still `in` (their e.k set),
  // returning the predicted speed-up of the step.
  double plan_jointly(int32_t num_running);
  // May a sequence whose draft must first catch up speculate in a step of predicted speed-up
  // `speedup` with num_speculating sequences drafting? (Always, when it has nothing to catch up.)
  bool catch_up_pays(const SpecCandidate& c, int32_t num_running, double speedup, int32_t num_speculating) const;

  SpeculatorConfig config_;
  std::unordered_map<int64_t, SeqStats> seqs_;
  SpecCostModel costs_;
  double global_accepted_, global_tested_ = 1.0;  // engine-wide EMAs (α prior of new sequences)
  int64_t num_verifications_ = 0;                 // record()s with drafts, engine-wide
  int64_t explorer_ = -1;                         // the sequence whose draft caught up before any
                                                  // verification (catch_up_pays), -1 = none yet
  struct Eligible {
    size_t index = 0;          // into the candidates
    double alpha = 0.0;
    int32_t max_k = 0;
    bool in = true;            // still planned (false: its draft's catch-up does not pay)
    int32_t k = 0;             // the plan's drafts
  };
  std::vector<Eligible> eligible_;              // plan() scratch
  std::vector<double> plan_alphas_;
  std::vector<int32_t> plan_max_ks_, plan_drafts_;
};

}  // namespace tessera::speculative
