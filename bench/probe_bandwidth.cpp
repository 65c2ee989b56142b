// probe_bandwidth: sustained multi-threaded read bandwidth (GB/s) of a buffer far larger than the
// caches, the speed of light that bench_matmul's m = 1 GB/s is compared with.
// Usage: probe_bandwidth [MiB=0: max(512, 4 x L3)] [threads=all] [seconds=1]
// The default buffer is 4x the last-level cache where that is larger than 512 MiB: hosts with a
// 260 MiB L3 (Intel Emerald Rapids) served ~22 GB/s from a 96 MiB buffer and 10-14 from 1 GiB.
#include <fmt/format.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "util/cpu_features.h"
#include "util/thread_pool.h"
#include "util/timer.h"

namespace {

__attribute__((target("avx2"))) uint64_t read_avx2(const uint8_t* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 128 <= n; i += 128) {
    a0 = _mm256_xor_si256(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_xor_si256(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_xor_si256(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_xor_si256(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i x = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
  return static_cast<uint64_t>(_mm256_extract_epi64(x, 0) ^ _mm256_extract_epi64(x, 3));
}

uint64_t read_scalar(const uint8_t* p, size_t n) {
  uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  const auto* q = reinterpret_cast<const uint64_t*>(p);
  for (size_t i = 0; i + 4 <= n / 8; i += 4) a0 ^= q[i], a1 ^= q[i + 1], a2 ^= q[i + 2], a3 ^= q[i + 3];
  return a0 ^ a1 ^ a2 ^ a3;
}

// The last-level cache in MiB (sysfs' index3 "size", e.g. "260M" or "32768K"); 0 when unknown.
size_t l3_mib() {
  std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index3/size");
  std::string v;
  if (!(f >> v) || v.empty()) return 0;
  const size_t n = std::strtoull(v.c_str(), nullptr, 10);
  return v.back() == 'K' ? n >> 10 : v.back() == 'M' ? n : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t l3 = l3_mib();
  const size_t asked = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 0;  // 0: the default
  const size_t mib = asked > 0 ? asked : std::max<size_t>(512, 4 * l3);
  const int num_threads = argc > 2 ? std::atoi(argv[2]) : tessera::default_num_threads();
  const double seconds = argc > 3 ? std::atof(argv[3]) : 1.0;
  const size_t bytes = mib << 20;
  auto* buf = static_cast<uint8_t*>(std::aligned_alloc(64, bytes));
  std::memset(buf, 1, bytes);
  tessera::ThreadPool pool(num_threads);
  const bool avx2 = tessera::isa_level() >= tessera::IsaLevel::kAvx2;
  std::vector<uint64_t> sink(static_cast<size_t>(num_threads) * 8);
  auto pass = [&] {
    pool.run([&](int index, int count) {
      const size_t per = (bytes / static_cast<size_t>(count)) & ~size_t{127};
      const uint8_t* p = buf + per * static_cast<size_t>(index);
      sink[static_cast<size_t>(index) * 8] ^= avx2 ? read_avx2(p, per) : read_scalar(p, per);
    });
  };
  pass();  // warm-up (page faults)
  tessera::Stopwatch sw;
  int passes = 0;
  while (sw.elapsed_ms() < seconds * 1000.0) {
    pass();
    ++passes;
  }
  const double gbps = static_cast<double>(bytes) * passes / (sw.elapsed_ms() * 1e6);
  fmt::print("probe_bandwidth: {:.1f} GB/s read ({} MiB x {} passes, {} threads, {}, L3 {} MiB)\n", gbps, mib,
             passes, num_threads, avx2 ? "avx2" : "scalar", l3);
  std::free(buf);
  return sink[0] == 0xdeadbeef ? 1 : 0;
}
