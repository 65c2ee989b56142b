// Rng: the per-request random generator (xoshiro256**, state expanded from a 64-bit seed with
// splitmix64). One generator per request, never shared across requests, so a request's tokens
// depend only on its own seed and logits, not on what else is in the batch.
//
// Invariants:
//  - The state is 4 × u64 and never all zero (splitmix64 cannot produce four zero words in a row
//    from one seed; the constructor checks it anyway).
//  - uniform() consumes exactly one next_u64() and returns a double in [0, 1) with 53 random bits.
//  - Samplers consume a fixed number of draws per decision (documented at each call site), so
//    saving state() and restoring it replays the same tokens (preemption, recompute).
#pragma once
#include <array>
#include <cstdint>

#include "tessera/sampling_params.h"

namespace tessera::sample {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0);

  // The seed a request uses: its own SamplingParams::seed if given, else the one the engine
  // hands out (for example from a global counter), so unseeded requests still get a stream.
  static Rng for_request(const SamplingParams& params, uint64_t engine_seed) {
    return Rng(params.seed.has_value() ? *params.seed : engine_seed);
  }

  uint64_t next_u64();
  double uniform();  // [0, 1), 53 bits

  std::array<uint64_t, 4> state() const { return s_; }
  void set_state(const std::array<uint64_t, 4>& state);

 private:
  std::array<uint64_t, 4> s_;  // xoshiro256** state words
};

}  // namespace tessera::sample
