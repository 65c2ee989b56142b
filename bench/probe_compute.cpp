// probe_compute: peak f32 FMA GFLOP/s and int8 dot-product GOP/s (AMX-INT8 tdpbssd where the CPU
// and OS allow the tiles, AVX-512 VNNI vpdpbusd, AVX2 maddubs) per thread and for all threads: the
// compute roof next to probe_bandwidth's. The int8 peak of a host is its largest int8 line.
// Usage: probe_compute [threads=all]
// NOTE(quant): GCC 12's avx512fintrin.h reduce/cast helpers trip -Wuninitialized (their upper
// halves are undefined on purpose).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <fmt/format.h>
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "util/cpu_features.h"
#include "util/thread_pool.h"
#include "util/timer.h"

namespace {

constexpr int64_t kIters = 20'000'000;

// 10 independent chains hide the FMA latency. Returns flops.
__attribute__((target("avx2,fma"))) double fma_avx2(float* sink) {
  __m256 a[10];
  for (int k = 0; k < 10; ++k) a[k] = _mm256_set1_ps(static_cast<float>(k));
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < kIters; ++i) {
    for (int k = 0; k < 10; ++k) a[k] = _mm256_fmadd_ps(a[k], m, c);
  }
  __m256 s = a[0];
  for (int k = 1; k < 10; ++k) s = _mm256_add_ps(s, a[k]);
  *sink = _mm256_cvtss_f32(s);
  return 2.0 * 8 * 10 * kIters;
}

__attribute__((target("avx512f"))) double fma_avx512(float* sink) {
  __m512 a[10];
  for (int k = 0; k < 10; ++k) a[k] = _mm512_set1_ps(static_cast<float>(k));
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < kIters; ++i) {
    for (int k = 0; k < 10; ++k) a[k] = _mm512_fmadd_ps(a[k], m, c);
  }
  for (int k = 1; k < 10; ++k) a[0] = _mm512_add_ps(a[0], a[k]);  // every chain is live
  *sink = _mm512_reduce_add_ps(a[0]);
  return 2.0 * 16 * 10 * kIters;
}

// int8 ops: each of 64 u8 x s8 products counts as 2 ops (multiply, add).
__attribute__((target("avx512f,avx512vnni"))) double int8_vnni(float* sink) {
  __m512i a[10];
  for (int k = 0; k < 10; ++k) a[k] = _mm512_set1_epi32(k);
  const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
  for (int64_t i = 0; i < kIters; ++i) {
    for (int k = 0; k < 10; ++k) a[k] = _mm512_dpbusd_epi32(a[k], u, s);
  }
  for (int k = 1; k < 10; ++k) a[0] = _mm512_add_epi32(a[0], a[k]);  // every chain is live
  *sink = static_cast<float>(_mm512_reduce_add_epi32(a[0]));
  return 2.0 * 64 * 10 * kIters;
}

__attribute__((target("avx2"))) double int8_avx2(float* sink) {
  __m256i a[10];
  for (int k = 0; k < 10; ++k) a[k] = _mm256_set1_epi32(k);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i s[10];  // a different operand per chain, so no product is shared (common-subexpression)
  for (int k = 0; k < 10; ++k) s[k] = _mm256_set1_epi8(static_cast<char>(k - 5));
  __m256i uu = _mm256_set1_epi8(3);
  for (int64_t i = 0; i < kIters; ++i) {
    __asm__ volatile("" : "+x"(uu));  // opaque each step: the products cannot be hoisted
    for (int k = 0; k < 10; ++k) {
      a[k] = _mm256_add_epi32(a[k], _mm256_madd_epi16(_mm256_maddubs_epi16(uu, s[k]), ones));
    }
  }
  for (int k = 1; k < 10; ++k) a[0] = _mm256_add_epi32(a[0], a[k]);  // every chain is live
  *sink = static_cast<float>(_mm256_extract_epi32(a[0], 0) + _mm256_extract_epi32(a[0], 7));
  return 2.0 * 32 * 10 * kIters;
}

// AMX-INT8: C0..C3 (16 x 16 int32) += A0/A1 (16 rows x 64 int8) x B0/B1 (16 rows x 64: K = 64 by
// 16 columns), the 2 x 2 blocking that keeps the tile unit busy while tiles load; each tdpbssd is
// 16 x 16 x 64 multiply-adds. The operands stay in the tiles (no loads in the loop): the peak.
struct alignas(64) AmxConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

__attribute__((target("amx-tile,amx-int8"), noinline)) double int8_amx(float* sink) {
  static thread_local AmxConfig cfg;  // static: GCC 12 does not see ldtilecfg read a local
  for (int t = 0; t < 8; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
  _tile_loadconfig(&cfg);
  alignas(64) static thread_local int8_t operand[16 * 64];
  for (int i = 0; i < 16 * 64; ++i) operand[i] = static_cast<int8_t>(i % 7 - 3);
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const int64_t steps = kIters / 8;
  for (int64_t i = 0; i < steps; ++i) {
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  }
  alignas(64) static thread_local int32_t c[16 * 16];
  _tile_stored(0, c, 64);
  _tile_release();
  *sink = static_cast<float>(c[0]);
  return 2.0 * 16 * 16 * 64 * 4 * steps;
}

double measure(tessera::ThreadPool& pool, double (*fn)(float*)) {
  std::vector<float> sinks(static_cast<size_t>(pool.num_threads()) * 16);
  double ops = 0.0;
  tessera::Stopwatch sw;
  pool.run([&](int index, int) {
    const double o = fn(&sinks[static_cast<size_t>(index) * 16]);
    if (index == 0) ops = o;
  });
  return ops * pool.num_threads() / (sw.elapsed_ms() * 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  const int num_threads = argc > 1 ? std::atoi(argv[1]) : tessera::default_num_threads();
  const auto& f = tessera::cpu_features();
  for (int threads : {1, num_threads}) {
    tessera::ThreadPool pool(threads);
    if (f.avx512f) {
      fmt::print("probe_compute: f32 fma avx512   {:8.1f} GFLOP/s ({} threads)\n", measure(pool, fma_avx512), threads);
    }
    if (f.avx2 && f.fma) {
      fmt::print("probe_compute: f32 fma avx2     {:8.1f} GFLOP/s ({} threads)\n", measure(pool, fma_avx2), threads);
    }
    if (tessera::amx_tiles_usable()) {
      fmt::print("probe_compute: int8 amx tdpbssd {:8.1f} GOP/s   ({} threads)\n", measure(pool, int8_amx), threads);
    }
    if (f.avx512vnni) {
      fmt::print("probe_compute: int8 vnni512     {:8.1f} GOP/s   ({} threads)\n", measure(pool, int8_vnni), threads);
    }
    if (f.avx2) {
      fmt::print("probe_compute: int8 avx2 maddubs {:7.1f} GOP/s   ({} threads)\n", measure(pool, int8_avx2), threads);
    }
    if (threads == num_threads) break;
  }
  return 0;
}
