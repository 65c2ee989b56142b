// Monotonic wall-clock helpers (milliseconds as double).
#pragma once
#include <chrono>

namespace tessera {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

class Stopwatch {
 public:
  Stopwatch() : start_(Clock::now()) {}
  void reset() { start_ = Clock::now(); }
  double elapsed_ms() const { return ms_since(start_); }

 private:
  Clock::time_point start_;
};

}  // namespace tessera
