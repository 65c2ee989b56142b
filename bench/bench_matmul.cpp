// bench_matmul: GB/s of matmul (m = 1, the decode case) on SmolLM2-135M's and Qwen2.5-0.5B's FFN shapes, per weight type
// and ISA level, plus m = 16 GOP/s (batched decode / prefill). Compare the GB/s with
// probe_bandwidth: m = 1 matmul is a read of the weights, so that is its speed of light.
// Weights are packed where the CPU runs a packed kernel (as the model loader does).
// Then, at the detected ISA, GOP/s for m >= 1 of the AVX2 kernel on the GGUF layout ("gguf",
// set_matmul_packed_enabled(false)), the ISA's kernel on the packed layout ("packed": AVX-512 VNNI,
// or AVX2 on CPUs without AVX-512) and the AMX-INT8 one ("amx", where usable), interleaved round by round: median GOP/s of each and the per-round
// ratios as median (min-max). With 1 thread that table times CPU seconds of the calling thread
// instead of wall time.
// Usage: bench_matmul [threads=all] [seconds per case=0.3] [types=Q4_1,Q8_0,...] [m=8,16,128,512]
//        [rounds=5] [shapes=all | e.g. 896->4864,4864->896] [weights=hot|cold]
// Naming shapes skips the first (every ISA level, m = 1 and 16) table and runs only the kernel
// table on those shapes. "cold" cycles the kernel table through copies of each matrix that add up
// to more than the L3 (every call streams its weights from DRAM, as in a model's step); "hot"
// (default) times one copy, which small shapes keep in cache.
#include <fmt/format.h>

#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/matmul_pack.h"
#include "kernels/quant.h"
#include "util/aligned_vector.h"
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
                             {"576->49152", 576, 49152},
                             // Qwen2.5-0.5B's FFN (gate/up Q5_0, down Q4_K or Q6_K in Q4_K_M files)
                             {"896->4864", 896, 4864},
                             {"4864->896", 4864, 896},
                             {"896->896", 896, 896},        // Qwen2.5-0.5B's attn_q / attn_output
                             {"896->151936", 896, 151936},  // Qwen2.5-0.5B's logits (Q8_0 output.weight)
                             // Qwen2.5-Coder-1.5B (Q4_K_M: gate/up Q4_K, down Q4_K or Q6_K, output Q6_K)
                             {"1536->8960", 1536, 8960},
                             {"8960->1536", 8960, 1536},
                             {"1536->151936", 1536, 151936},
                             // Gemma-3-270M (Q4_K_M: q/k/v/gate/up Q5_0 or Q8_0, attn_output Q4_K, down Q4_K or
                             // Q6_K, logits over the tied Q8_0 token_embd)
                             {"640->1024", 640, 1024},
                             {"1024->640", 1024, 640},
                             {"640->2048", 640, 2048},
                             {"2048->640", 2048, 640},
                             {"640->262144", 640, 262144}};



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

// The weights one case cycles through: one matrix, or (cold) as many copies as make up at least
// kColdBytes, so every call streams its weights from DRAM as a model's decode step does (Qwen2.5-0.5B
// reads 392 MB per step; one 896->4864 matrix, 3 MB, would stay in the 32 MiB L3).
constexpr size_t kColdBytes = size_t{160} << 20;
struct Weights {
  std::vector<std::vector<uint8_t>> data;  // one GGUF copy per matrix
  std::vector<kernels::WeightMatrix> w;
};
Weights make_case(DType type, const Shape& s, bool cold) {
  Weights out;
  out.data.push_back(make_weights(type, s.rows, s.cols));
  const size_t copies = cold ? std::max<size_t>(1, (kColdBytes + out.data[0].size() - 1) / out.data[0].size()) : 1;
  while (out.data.size() < copies) out.data.push_back(out.data[0]);
  std::vector<kernels::WeightMatrix*> all;
  out.w.reserve(copies);
  for (const auto& d : out.data) out.w.push_back(kernels::WeightMatrix::view(type, d.data(), s.rows, s.cols));
  for (auto& w : out.w) all.push_back(&w);
  kernels::WeightMatrix::pack_all_if_useful(all);
  return out;
}

// Seconds per call, after warm-up, over at least `seconds` of runs (call k reads w[k % size]).
double time_call(const std::vector<kernels::WeightMatrix>& w, const AlignedVector<float>& x, int64_t m,
                 AlignedVector<float>& y, ThreadPool& pool, double seconds) {
  for (size_t i = 0; i < std::max<size_t>(3, w.size()); ++i) kernels::matmul(w[i % w.size()], x.data(), m, y.data(), pool);
  Stopwatch sw;
  int64_t calls = 0;
  while (sw.elapsed_ms() < seconds * 1000.0) {
    kernels::matmul(w[static_cast<size_t>(calls) % w.size()], x.data(), m, y.data(), pool);
    ++calls;
  }
  return sw.elapsed_ms() / 1000.0 / static_cast<double>(calls);
}

// Seconds of this thread's CPU time per call (1-thread runs on a loaded machine: time the kernel
// ran, not time it waited for a core; a hyperthread sibling's load still slows it).
double time_call_cpu(const std::vector<kernels::WeightMatrix>& w, const AlignedVector<float>& x, int64_t m,
                     AlignedVector<float>& y, ThreadPool& pool, double seconds) {
  auto cpu_s = [] {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
  };
  for (size_t i = 0; i < std::max<size_t>(3, w.size()); ++i) kernels::matmul(w[i % w.size()], x.data(), m, y.data(), pool);
  const double start = cpu_s();
  int64_t calls = 0;
  while (cpu_s() - start < seconds) {
    kernels::matmul(w[static_cast<size_t>(calls) % w.size()], x.data(), m, y.data(), pool);
    ++calls;
  }
  return (cpu_s() - start) / static_cast<double>(calls);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    out.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// The shapes named in the comma-separated `list` ("all": every shape).
std::vector<Shape> select_shapes(const std::string& list) {
  const std::vector<std::string> names = split(list);
  std::vector<Shape> out;
  for (const Shape& s : kShapes) {
    if (list == "all" || std::find(names.begin(), names.end(), s.name) != names.end()) out.push_back(s);
  }
  return out;
}

// The layout/kernel table, interleaved rounds: the AVX2 kernel on the GGUF layout ("gguf"), the
// ISA's kernel on the packed layout ("packed") and, where usable and m >= amx_min_rows(type), the
// AMX-INT8 tiles on the packed layout ("amx"). Ratios are per round against packed.
void gemm_table(const std::vector<DType>& types, const std::vector<Shape>& shapes, const std::vector<int64_t>& ms,
                int rounds, double seconds, bool cold, ThreadPool& pool) {
  // One thread: GOP per second of CPU time (robust to a loaded machine); more: wall time.
  const bool cpu_time = pool.num_threads() == 1;
  auto timed = cpu_time ? time_call_cpu : time_call;
  fmt::print("\nat {}: GOP/s ({}) by kernel, {} interleaved rounds, weights {}; ratios median (min-max) against packed\n",
             isa_name(detected_isa_level()), cpu_time ? "per CPU second" : "wall", rounds,
             cold ? "cold (copies cycled past the L3)" : "hot (one copy)");
  fmt::print("{:<6} {:<11} {:>5} {:>9} {:>9} {:>9} {:>22} {:>22}\n", "type", "shape", "m", "gguf", "packed",
             "amx", "packed/gguf", "amx/packed");
  auto ratio_text = [](const std::vector<double>& r) {
    if (r.empty()) return std::string("n/a");
    return fmt::format("{:.2f}x ({:.2f}-{:.2f})", median(r), *std::min_element(r.begin(), r.end()),
                       *std::max_element(r.begin(), r.end()));
  };
  for (DType type : types) {
    if (!kernels::packable(type)) continue;
    for (const Shape& s : shapes) {
      if (s.cols % dtype_block_size(type) != 0) continue;
      const Weights c = make_case(type, s, cold);
      const std::vector<kernels::WeightMatrix>& w = c.w;
      for (int64_t m : ms) {
        AlignedVector<float> x(m * s.cols), y(m * s.rows);  // line-aligned, as the engine's activations
        for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 1000) / 500.0f - 1.0f;
        const double ops = 2.0 * static_cast<double>(m * s.rows * s.cols);
        const int64_t amx_rows = kernels::amx_min_rows(type);
        const bool with_amx = kernels::matmul_amx_available() && amx_rows > 0 && m >= amx_rows;
        std::vector<double> gguf_gops, packed_gops, amx_gops, packed_over_gguf, amx_over_packed;
        for (int round = 0; round < rounds; ++round) {
          kernels::set_matmul_packed_enabled(false);
          const double t_gguf = timed(w, x, m, y, pool, seconds);
          kernels::set_matmul_packed_enabled(true);
          kernels::set_matmul_amx_enabled(false);
          const double t_packed = timed(w, x, m, y, pool, seconds);
          kernels::set_matmul_amx_enabled(true);
          gguf_gops.push_back(ops / t_gguf / 1e9);
          packed_gops.push_back(ops / t_packed / 1e9);
          packed_over_gguf.push_back(t_gguf / t_packed);
          if (with_amx) {
            const double t_amx = timed(w, x, m, y, pool, seconds);
            amx_gops.push_back(ops / t_amx / 1e9);
            amx_over_packed.push_back(t_packed / t_amx);
          }
        }
        fmt::print("{:<6} {:<11} {:>5} {:>9.1f} {:>9.1f} {:>9} {:>22} {:>22}\n", dtype_name(type), s.name, m,
                   median(gguf_gops), median(packed_gops),
                   amx_gops.empty() ? std::string("n/a") : fmt::format("{:.1f}", median(amx_gops)),
                   ratio_text(packed_over_gguf), ratio_text(amx_over_packed));
      }
    }
  }
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
    for (const std::string& name : split(argv[3])) {
      if (auto t = dtype_from_name(name)) types.push_back(*t);
    }
  }
  std::vector<int64_t> ms = {1, 8, 16, 128, 512};
  if (argc > 4) {
    ms.clear();
    for (const std::string& v : split(argv[4])) ms.push_back(std::atoll(v.c_str()));
  }
  const int rounds = argc > 5 ? std::atoi(argv[5]) : 5;
  const std::string shape_list = argc > 6 ? argv[6] : "all";
  const bool cold = argc > 7 && std::string(argv[7]) == "cold";
  const std::vector<Shape> shapes = select_shapes(shape_list);
  ThreadPool pool(num_threads);
  fmt::print("bench_matmul: {} threads, detected isa {}\n", num_threads, isa_name(detected_isa_level()));
  if (shape_list != "all") {
    gemm_table(types, shapes, ms, rounds, seconds, cold, pool);
    return 0;
  }
  fmt::print("{:<6} {:<7} {:<11} {:>10} {:>9} {:>12}\n", "type", "isa", "shape", "m=1 us",
             "m=1 GB/s", "m=16 GOP/s");
  for (DType type : types) {
    for (const Shape& s : shapes) {
      if (s.cols % dtype_block_size(type) != 0) continue;
      const Weights c = make_case(type, s, /*cold=*/false);
      const std::vector<kernels::WeightMatrix>& w = c.w;
      AlignedVector<float> x(16 * s.cols, 0.5f), y(16 * s.rows);
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 1000) / 500.0f - 1.0f;
      for (int l = static_cast<int>(detected_isa_level()); l >= 0; --l) {
        set_isa_level(static_cast<IsaLevel>(l));
        const double t1 = time_call(w, x, 1, y, pool, l == 0 ? seconds / 3 : seconds);
        const double t16 = time_call(w, x, 16, y, pool, l == 0 ? seconds / 3 : seconds);
        const double gops = 2.0 * 16 * static_cast<double>(s.rows * s.cols) / t16 / 1e9;
        fmt::print("{:<6} {:<7} {:<11} {:>10.1f} {:>9.1f} {:>12.1f}\n", dtype_name(type),
                   isa_name(static_cast<IsaLevel>(l)), s.name, t1 * 1e6,
                   static_cast<double>(w[0].bytes()) / t1 / 1e9, gops);
      }
      set_isa_level(detected_isa_level());
    }
  }
  gemm_table(types, shapes, ms, rounds, seconds, cold, pool);
  return 0;
}
