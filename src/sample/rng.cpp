// xoshiro256** (Blackman & Vigna, 2018) seeded through splitmix64, written from the published
// recurrences.
#include "sample/rng.h"

#include "util/check.h"

namespace tessera::sample {
namespace {

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t splitmix64(uint64_t& x) {
  x += 0x9e3779b97f4a7c15ULL;
  uint64_t z = x;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

Rng::Rng(uint64_t seed) {
  uint64_t x = seed;
  for (auto& word : s_) word = splitmix64(x);
  TESSERA_CHECK((s_[0] | s_[1] | s_[2] | s_[3]) != 0, "xoshiro state must not be all zero");
}

void Rng::set_state(const std::array<uint64_t, 4>& state) {
  TESSERA_CHECK((state[0] | state[1] | state[2] | state[3]) != 0,
                "xoshiro state must not be all zero");
  s_ = state;
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

}  // namespace tessera::sample
