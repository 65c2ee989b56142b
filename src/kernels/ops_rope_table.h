// Internal: the one definition of rope's cos/sin, shared by ops_ref.cpp and the fast paths so
// both rotate by bit-identical factors.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/ops.h"

namespace tessera::kernels {

// theta = pos * freq_scale * freq_base^(-2i/head_dim) [/ freq_factors[i]], computed in double,
// rounded once.
inline void rope_cos_sin(int32_t pos, int64_t i, int64_t head_dim, const RopeParams& p, float* c,
                         float* s) {
  const double inv_freq = std::pow(static_cast<double>(p.freq_base),
                                   -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  double theta = static_cast<double>(pos) * static_cast<double>(p.freq_scale) * inv_freq;
  if (p.freq_factors != nullptr) theta /= static_cast<double>(p.freq_factors[i]);
  *c = static_cast<float>(std::cos(theta));
  *s = static_cast<float>(std::sin(theta));
}

}  // namespace tessera::kernels
