// probe_amx_overlap: can this core run the AMX tile unit and the AVX-512 float units at once?
// The AMX matmul kernel (src/kernels/x86/matmul_packed_amx.cpp) spends, per 16x16x32 block, one
// tile multiply and one tile store on the tile unit and the canonical float step (16 x cvt, mul,
// fma, fma) on the vector units; it is software-pipelined so that the two could overlap. This
// probe times each part alone and interleaved, on data that stays in L1 and with no dependency
// between the parts, in ns per block (one thread):
//   dots    tile loads of A (16 x 32 B) and B (8 x 64 B), tilezero, tdpbsud (two C tiles in turn)
//   store   one tilestored of a 16 x 64 B C tile
//   float   the float step of one block (16 rows, Q4_1 form) from an int32 buffer
// If the units overlapped, "dots + store + float" would take max(dots + store, float); on the
// machines measured it takes more than their sum (bench/LOG.md, B4).
// Usage: probe_amx_overlap [blocks=5000000]
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <fmt/format.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "util/cpu_features.h"
#include "util/timer.h"

namespace {

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

alignas(64) int8_t g_a[2][16 * 32];    // activation tiles
alignas(64) uint8_t g_b[2][8 * 64];    // weight tiles
alignas(64) int32_t g_c[2][16 * 16];   // where the dots are stored
alignas(64) int32_t g_dots[2][16 * 16];  // what the float step reads (never written by the tiles)
alignas(64) float g_scales[2][16];     // per row: d of the activation block, d * sum(q)

enum Part : unsigned { kDots = 1, kStore = 2, kFloat = 4 };

template <unsigned P>
__attribute__((target("avx512f,avx512dq,amx-tile,amx-int8"), noinline)) double run(int64_t blocks, float* sink) {
  __m512 y[16];
  for (auto& v : y) v = _mm512_setzero_ps();
  const __m512 dw = _mm512_set1_ps(1.0001f), mw = _mm512_set1_ps(0.5f);
  const tessera::Stopwatch timer;
  for (int64_t k = 0; k < blocks; ++k) {
    const int p = static_cast<int>(k & 1);
    if constexpr ((P & kDots) != 0) {
      // The tile intrinsics are macros around asm statements (tile numbers must be literals).
      if (p != 0) {
        _tile_loadd(3, g_a[1], 32);
        _tile_loadd(5, g_b[1], 64);
        _tile_zero(1);
        _tile_dpbsud(1, 3, 5);
      } else {
        _tile_loadd(2, g_a[0], 32);
        _tile_loadd(4, g_b[0], 64);
        _tile_zero(0);
        _tile_dpbsud(0, 2, 4);
      }
    }
    if constexpr ((P & kStore) != 0) {
      if (p != 0) {
        _tile_stored(1, g_c[1], 64);
      } else {
        _tile_stored(0, g_c[0], 64);
      }
    }
    if constexpr ((P & kFloat) != 0) {
      const int32_t* c = g_dots[p];
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        const __m512 isum = _mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * j));
        y[j] = _mm512_fmadd_ps(isum, _mm512_mul_ps(dw, _mm512_set1_ps(g_scales[0][j])), y[j]);
        y[j] = _mm512_fmadd_ps(mw, _mm512_set1_ps(g_scales[1][j]), y[j]);
      }
    }
  }
  const double ns = timer.elapsed_ms() * 1e6 / static_cast<double>(blocks);
  float total = 0.0f;
  for (auto& v : y) total += _mm512_reduce_add_ps(v);
  *sink += total;
  return ns;
}

__attribute__((target("amx-tile"))) void configure() {
  // Static: GCC 12 does not see ldtilecfg read a local, and drops the stores that fill it.
  static TileConfig cfg;
  for (int t : {0, 1}) cfg.rows[t] = 16, cfg.colsb[t] = 64;  // C
  for (int t : {2, 3}) cfg.rows[t] = 16, cfg.colsb[t] = 32;  // A
  for (int t : {4, 5}) cfg.rows[t] = 8, cfg.colsb[t] = 64;   // B
  _tile_loadconfig(&cfg);
}

__attribute__((target("amx-tile"))) void release() { _tile_release(); }

}  // namespace

int main(int argc, char** argv) {
  const int64_t blocks = argc > 1 ? std::max<int64_t>(1000, std::atoll(argv[1])) : 5'000'000;
  if (!tessera::amx_tiles_usable()) {
    fmt::print("probe_amx_overlap: AMX tiles are not usable on this machine (CPU or OS)\n");
    return 0;
  }
  configure();
  float sink = 0.0f;
  // The best of three rounds of each: other tenants of a shared machine only ever slow a run.
  auto best = [&](auto fn) { return std::min({fn(), fn(), fn()}); };
  const double dots = best([&] { return run<kDots>(blocks, &sink); });
  const double store = best([&] { return run<kStore>(blocks, &sink); });
  const double flt = best([&] { return run<kFloat>(blocks, &sink); });
  const double dots_store = best([&] { return run<kDots | kStore>(blocks, &sink); });
  const double dots_float = best([&] { return run<kDots | kFloat>(blocks, &sink); });
  const double store_float = best([&] { return run<kStore | kFloat>(blocks, &sink); });
  const double all = best([&] { return run<kDots | kStore | kFloat>(blocks, &sink); });
  release();
  fmt::print("probe_amx_overlap: ns per 16x16x32 block, one thread, best of 3 ({} blocks)\n", blocks);
  fmt::print("  {:<22} {:>7}  {:>16}  {:>16}\n", "parts", "alone", "sum of parts", "if they overlap");
  fmt::print("  {:<22} {:>7.2f}\n", "dots", dots);
  fmt::print("  {:<22} {:>7.2f}\n", "store", store);
  fmt::print("  {:<22} {:>7.2f}\n", "float", flt);
  fmt::print("  {:<22} {:>7.2f}  {:>16.2f}  {:>16.2f}\n", "dots + store", dots_store, dots + store,
             std::max(dots, store));
  fmt::print("  {:<22} {:>7.2f}  {:>16.2f}  {:>16.2f}\n", "dots + float", dots_float, dots + flt, std::max(dots, flt));
  fmt::print("  {:<22} {:>7.2f}  {:>16.2f}  {:>16.2f}\n", "store + float", store_float, store + flt,
             std::max(store, flt));
  fmt::print("  {:<22} {:>7.2f}  {:>16.2f}  {:>16.2f}\n", "dots + store + float", all, dots_store + flt,
             std::max(dots_store, flt));
  if (sink == 1.2345f) fmt::print("\n");  // keeps the float step's results alive
  return 0;
}
