// bench_matmul: GB/s of matmul (m = 1, the decode case) on SmolLM2-135M's shapes, per weight type
// and ISA level, plus m = 16 GOP/s (batched decode / prefill). Compare the GB/s with
// probe_bandwidth: m = 1 matmul is a read of the weights, so that is its speed of light.
// Usage: bench_matmul [threads=all] [seconds per case=0.3] [types=Q4_1,Q8_0,...]
#include <fmt/format.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "util/cpu_features.h"
#include "util/dtype.h"
#include "util/thread_pool.h"
#include "util/timer.h"

using namespace tessera;

namespace {

struct Shape {
  const char* name;
  int64_t cols;  // input features
  int64_t rows;  // output features
};

constexpr Shape kShapes[] = {{"576->576", 576, 576},
                             {"576->1536", 576, 1536},
                             {"1536->576", 1536, 576},
                             {"576->49152", 576, 49152}};

std::vector<uint8_t> make_weights(DType type, int64_t rows, int64_t cols) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<uint8_t> out(dtype_row_bytes(type, cols) * static_cast<size_t>(rows));
  if (!kernels::dtype_supported_for_quantize(type)) {  // K-quants: random bytes, small scales
    for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
    return out;
  }
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = dist(rng);
    kernels::quantize_row_ref(type, row.data(), out.data() + r * dtype_row_bytes(type, cols), cols);
  }
  return out;
}

// Seconds per call, after warm-up, over at least `seconds` of runs.
double time_call(const kernels::WeightMatrix& w, const std::vector<float>& x, int64_t m,
                 std::vector<float>& y, ThreadPool& pool, double seconds) {
  for (int i = 0; i < 3; ++i) kernels::matmul(w, x.data(), m, y.data(), pool);
  Stopwatch sw;
  int64_t calls = 0;
  while (sw.elapsed_ms() < seconds * 1000.0) {
    kernels::matmul(w, x.data(), m, y.data(), pool);
    ++calls;
  }
  return sw.elapsed_ms() / 1000.0 / static_cast<double>(calls);
}

}  // namespace

int main(int argc, char** argv) {
  const int num_threads = argc > 1 ? std::atoi(argv[1]) : default_num_threads();
  const double seconds = argc > 2 ? std::atof(argv[2]) : 0.3;
  std::vector<DType> types = {DType::Q4_1, DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::Q5_1,
                              DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::F16,  DType::BF16,
                              DType::F32};
  if (argc > 3) {
    types.clear();
    std::string list = argv[3];
    size_t start = 0;
    while (start <= list.size()) {
      const size_t comma = std::min(list.find(',', start), list.size());
      if (auto t = dtype_from_name(list.substr(start, comma - start))) types.push_back(*t);
      start = comma + 1;
    }
  }
  ThreadPool pool(num_threads);
  fmt::print("bench_matmul: {} threads, detected isa {}\n", num_threads, isa_name(detected_isa_level()));
  fmt::print("{:<6} {:<7} {:<11} {:>10} {:>9} {:>12}\n", "type", "isa", "shape", "m=1 us",
             "m=1 GB/s", "m=16 GOP/s");
  for (DType type : types) {
    for (const Shape& s : kShapes) {
      if (s.cols % dtype_block_size(type) != 0) continue;
      const auto data = make_weights(type, s.rows, s.cols);
      const auto w = kernels::WeightMatrix::view(type, data.data(), s.rows, s.cols);
      std::vector<float> x(16 * s.cols, 0.5f), y(16 * s.rows);
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 1000) / 500.0f - 1.0f;
      for (int l = static_cast<int>(detected_isa_level()); l >= 0; --l) {
        set_isa_level(static_cast<IsaLevel>(l));
        const double t1 = time_call(w, x, 1, y, pool, l == 0 ? seconds / 3 : seconds);
        const double t16 = time_call(w, x, 16, y, pool, l == 0 ? seconds / 3 : seconds);
        const double gops = 2.0 * 16 * static_cast<double>(s.rows * s.cols) / t16 / 1e9;
        fmt::print("{:<6} {:<7} {:<11} {:>10.1f} {:>9.1f} {:>12.1f}\n", dtype_name(type),
                   isa_name(static_cast<IsaLevel>(l)), s.name, t1 * 1e6,
                   static_cast<double>(w.bytes()) / t1 / 1e9, gops);
      }
      set_isa_level(detected_isa_level());
    }
  }
  return 0;
}
