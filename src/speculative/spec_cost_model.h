// SpecCostModel: what a speculative step costs and yields, from times measured on this machine,
// so the Speculator speculates only where it pays (issue 6: adaptive speculation "must never make
// things slower"). Plain arithmetic over recorded seconds: no clock, no model, no engine.
//
// Measured (EMAs of seconds, the first sample taken as is):
//   t(n)  a decode-only target step that ran n tokens in all (b sequences, each 1 + its drafts):
//         forward, sampling and rejection, scheduler and output handling; the proposer excluded
//   t_d   one proposer forward: the draft model over every speculating sequence of the step
//         (batched), or the n-gram lookup of a step (microseconds)
//   t_c   draft catch-up per token: the draft prefilling prompt or output it has not seen
//
// A step of b sequences in which sequence i proposes k_i drafts, each accepted with probability
// α_i (independently: the formula of issue 6), and k = max_i k_i proposer forwards:
//
//   tokens   = Σ_i E(α_i, k_i)          E(α, k) = (1 − α^(k+1)) / (1 − α),  E(α, 0) = 1
//   time     = k · t_d + t(b + Σ_i k_i)
//   speed-up = (tokens / time) / (b / t(b))       at b = 1:  E(α, k) · t(1) / (k · t_d + t(k + 1))
//
// Sizes not measured yet are interpolated linearly between the nearest measured ones; above the
// largest, extrapolated along the two largest (or, with one only, at prior_token_cost × t(n)/n per
// extra token: decode on a CPU is memory-bound, so extra tokens start out looking cheap, get tried
// and then measured). Before a proposer forward was timed, t_d = draft_cost_prior × t(1).
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace tessera::speculative {

struct SpecCostConfig {
  double ema_weight = 0.2;         // weight of the newest sample in every time EMA
  double prior_token_cost = 0.1;   // unmeasured extra token: this share of t(n)/n (see above)
  double draft_cost_prior = 0.0;   // t_d before measured, as a share of t(1) (draft weight bytes /
                                   // target weight bytes; 0 for n-gram)
  double catch_up_cost_prior = 0.15;  // t_c before measured, as a share of t_d: a CPU prefills a
                                      // token ~7x cheaper than it decodes one (Qwen2.5 0.5B on
                                      // Zen 4: 697 vs 106 tok/s, issue 46's table)
};

class SpecCostModel {
 public:
  static constexpr int32_t kMaxStepTokens = 64;  // larger steps are not recorded (extrapolated)

  explicit SpecCostModel(const SpecCostConfig& config = {}) : config_(config) {}

  void record_target_step(int32_t num_tokens, double seconds);
  void record_proposer_forward(double seconds);
  void record_catch_up(int32_t num_tokens, double seconds);

  bool has_target_times() const { return num_measured_ > 0; }
  // Predicted t(n), 0 when nothing was measured.
  double target_step_seconds(int32_t num_tokens) const;
  double measured_target_step_seconds(int32_t num_tokens) const;  // 0 = not measured
  double proposer_forward_seconds() const;
  double catch_up_seconds_per_token() const;
  double measured_proposer_forward_seconds() const { return proposer_forward_.set ? proposer_forward_.value : 0.0; }
  double measured_catch_up_seconds_per_token() const { return catch_up_per_token_.set ? catch_up_per_token_.value : 0.0; }

  // Speed-up of a step of num_seqs sequences of which those listed propose drafts[i] tokens
  // accepted with probability alphas[i] (the others run 1 token each): see the file comment.
  double predict_speedup(int32_t num_seqs, std::span<const double> alphas,
                         std::span<const int32_t> drafts) const;
  // The k in [1, max_k] that maximizes the speed-up of one speculating sequence among num_seqs
  // (the others not speculating), and that speed-up; {0, 0} without target times.
  struct Choice {
    int32_t k = 0;
    double speedup = 0.0;
  };
  Choice best_single(int32_t num_seqs, double alpha, int32_t max_k) const;
  // Per-sequence k for a step of num_seqs sequences of which alphas.size() may speculate (at most
  // max_ks[i] drafts each; the rest run 1 token): the ks (written to ks, 0 = none) of the highest
  // predicted speed-up, which is returned (1 when no plan reaches min_speedup; then all ks are 0).
  // The j-th draft of sequence i adds α_i^j expected tokens and costs one token of the target step,
  // so for a proposer depth K (forwards, the deepest k) and N drafts in all the best ks take the
  // N largest α_i^j with j <= K; every (K, N) is tried. Ties go to the lower K, N and index.
  double best_plan(int32_t num_seqs, std::span<const double> alphas, std::span<const int32_t> max_ks,
                   double min_speedup, std::span<int32_t> ks) const;

 private:
  struct Ema {
    double value = 0.0;
    bool set = false;
    void add(double x, double w) {
      value = set ? (1.0 - w) * value + w * x : x;
      set = true;
    }
  };
  SpecCostConfig config_;
  std::array<Ema, kMaxStepTokens + 1> target_{};  // [n]: t(n); index 0 unused
  int32_t num_measured_ = 0;                      // sizes with a sample
  Ema proposer_forward_, catch_up_per_token_;
  struct Gain {  // best_plan() scratch: the j-th draft of sequence i adds α_i^j tokens
    double tokens = 0.0;
    int32_t seq = 0, j = 0;
  };
  mutable std::vector<Gain> gains_;
};

// E(α, k): expected tokens of a verification with k drafts (1 when k = 0).
double expected_tokens(double alpha, int32_t k);

}  // namespace tessera::speculative
