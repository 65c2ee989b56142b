#include "tessera/metrics.h"

#include <algorithm>

#include "tessera/engine.h"

namespace tessera {

Histogram Histogram::with_bounds(std::vector<double> bounds) {
  Histogram h;
  std::sort(bounds.begin(), bounds.end());
  h.bounds = std::move(bounds);
  h.counts.assign(h.bounds.size() + 1, 0);
  return h;
}

void Histogram::observe(double value) {
  const auto it = std::lower_bound(bounds.begin(), bounds.end(), value);
  counts[static_cast<size_t>(it - bounds.begin())] += 1;
  sum += value;
  count += 1;
}

}  // namespace tessera
