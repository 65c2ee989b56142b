// Per-op wall-time profile of forward steps (`tessera run --profile`): the forward, the runner and
// the sampler wrap their ops in OpScope; when profiling is off a scope costs one relaxed atomic
// load. Times are accumulated per phase (prefill steps: some sequence has more than one new token;
// decode steps: every sequence has exactly one, whatever the batch) and per op, on whatever thread
// runs the step (the engine's; one at a time), and read after the run. Nothing here changes a
// computed value.
#pragma once
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

namespace tessera::profile {

enum class Op : int {
  kEmbedding, kRmsnorm, kQkv, kBias, kRope, kWriteKv, kAttention, kWo, kResidual, kFfnGateUp,
  kSwiglu, kFfnDown, kFinalNorm, kLogits, kSampling, kBuildBatch, kStep,
  kEngineLoop,  // the engine's step (EngineImpl::step) less the runner's part: LoopScope
  kCount
};
constexpr int kNumOps = static_cast<int>(Op::kCount);

inline const char* op_name(Op op) {
  constexpr std::array<const char*, kNumOps> kNames = {
      "embedding", "rmsnorm", "qkv matmul", "qkv bias", "rope", "write_kv", "attention",
      "wo matmul", "residual add", "ffn gate+up", "swiglu", "ffn down", "final norm",
      "logits matmul", "sampling", "build batch", "runner step (total)", "engine loop (outside the runner)"};
  return kNames[static_cast<size_t>(op)];
}

enum class Phase : int { kPrefill = 0, kDecode = 1 };

// The accumulated profile: [phase][op] milliseconds and calls, plus steps per phase.
struct Profile {
  std::atomic<bool> enabled{false};
  Phase phase = Phase::kDecode;                          // of the step now running
  double ms[2][kNumOps] = {};                            // wall milliseconds
  int64_t calls[2][kNumOps] = {};                        // scopes closed
  int64_t steps[2] = {};                                 // forward steps (kStep scopes)
};

inline Profile& global() {
  static Profile p;
  return p;
}
// Zeroes the accumulated times, calls and steps (a benchmark profiling one configuration at a time).
inline void reset() {
  Profile& p = global();
  for (int ph = 0; ph < 2; ++ph) {
    p.steps[ph] = 0;
    for (int op = 0; op < kNumOps; ++op) p.ms[ph][op] = 0.0, p.calls[ph][op] = 0;
  }
}
// One op of a phase's table: calls and total wall milliseconds.
struct OpRow {
  Op op;
  int64_t calls;
  double ms;
};
// The ops of `phase` that ran, in Op order (the step itself included), into `rows`; returns the
// step time no op scope accounts for (the runner's own bookkeeping: "runner, other"), in ms.
inline double phase_rows(Phase phase, std::vector<OpRow>& rows) {
  const Profile& p = global();
  const auto ph = static_cast<size_t>(phase);
  rows.clear();
  double accounted = 0.0;
  for (int op = 0; op < kNumOps; ++op) {
    if (p.calls[ph][op] == 0 || op == static_cast<int>(Op::kEngineLoop)) continue;  // not in the runner's step
    const auto o = static_cast<Op>(op);
    rows.push_back({o, p.calls[ph][op], p.ms[ph][op]});
    if (o != Op::kStep) accounted += p.ms[ph][op];
  }
  return p.ms[ph][static_cast<size_t>(Op::kStep)] - accounted;
}
inline bool enabled() { return global().enabled.load(std::memory_order_relaxed); }
inline void set_phase(Phase phase) {
  if (enabled()) global().phase = phase;
}

// Adds the scope's wall time to `op` of the current phase.
class OpScope {
 public:
  explicit OpScope(Op op) : op_(op), on_(enabled()) {
    if (on_) start_ = std::chrono::steady_clock::now();
  }
  ~OpScope() {
    if (!on_) return;
    Profile& p = global();
    const auto phase = static_cast<size_t>(p.phase);
    const auto i = static_cast<size_t>(op_);
    p.ms[phase][i] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
    p.calls[phase][i] += 1;
    if (op_ == Op::kStep) p.steps[phase] += 1;
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  Op op_;
  bool on_;
  std::chrono::steady_clock::time_point start_;
};

// One engine step less the runner's part inside it (runner_begin .. runner_end): schedule, views,
// managers, output processing, metrics. Adds to kEngineLoop of the step's phase on destruction, one
// call per step, so a reader divides by its own calls: a step still running when the profile is
// read (or one closing after a reset) moves the mean by one sample, not by a runner step's time.
class LoopScope {
 public:
  LoopScope() : on_(enabled()) {
    if (on_) start_ = std::chrono::steady_clock::now();
  }
  void runner_begin() {
    if (on_) runner_start_ = std::chrono::steady_clock::now();
  }
  void runner_end() {
    if (on_) runner_ += std::chrono::steady_clock::now() - runner_start_;
  }
  void cancel() { on_ = false; }  // a step that ran nothing
  ~LoopScope() {
    if (!on_) return;
    Profile& p = global();
    const auto phase = static_cast<size_t>(p.phase);
    const auto i = static_cast<size_t>(Op::kEngineLoop);
    p.ms[phase][i] +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_ - runner_).count();
    p.calls[phase][i] += 1;
  }
  LoopScope(const LoopScope&) = delete;
  LoopScope& operator=(const LoopScope&) = delete;

 private:
  bool on_;
  std::chrono::steady_clock::time_point start_, runner_start_;
  std::chrono::steady_clock::duration runner_{};
};

}  // namespace tessera::profile
