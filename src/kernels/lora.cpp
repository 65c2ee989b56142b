// lora_apply and its scalar twin lora_apply_ref (see lora.h for the canonical order).
#include "kernels/lora.h"

#include <vector>

#include "kernels/matmul.h"
#include "util/check.h"

namespace tessera::kernels {
namespace {

constexpr int64_t kLanes = 16;
constexpr int32_t kMaxRank = 1024;  // the u[] of one row lives on the stack

// GCC/Clang on x86-64 build an AVX2 clone of the hot loops next to the baseline one and pick it
// once at load (ifunc); lanes and outputs are independent, so both clones give the same bits.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TESSERA_LORA_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TESSERA_LORA_CLONES
#endif

TESSERA_LORA_CLONES
void apply_row(const LoraPair& p, const float* __restrict x, float* __restrict y) {
  float u[kMaxRank];
  const int64_t main = p.n_in / kLanes * kLanes;
  for (int32_t j = 0; j < p.rank; ++j) {
    const float* __restrict a = p.a + static_cast<int64_t>(j) * p.n_in;
    float acc[kLanes] = {};
    for (int64_t c = 0; c < main; c += kLanes) {
      for (int64_t l = 0; l < kLanes; ++l) acc[l] += a[c + l] * x[c + l];
    }
    for (int64_t w = kLanes / 2; w >= 1; w /= 2) {
      for (int64_t l = 0; l < w; ++l) acc[l] += acc[l + w];
    }
    float s = acc[0];
    for (int64_t c = main; c < p.n_in; ++c) s += a[c] * x[c];
    u[j] = p.scale * s;
  }
  for (int32_t j = 0; j < p.rank; ++j) {
    const float uj = u[j];
    const float* __restrict bt = p.bt + static_cast<int64_t>(j) * p.n_out;
    for (int64_t o = 0; o < p.n_out; ++o) y[o] += uj * bt[o];
  }
}

void check_pair(const LoraPair& p) {
  TESSERA_CHECK(p.rank > 0 && p.rank <= kMaxRank && p.a != nullptr && p.bt != nullptr && p.n_in > 0 && p.n_out > 0,
                "LoRA pair: rank {} (1..{}), n_in {}, n_out {}", p.rank, kMaxRank, p.n_in, p.n_out);
}

}  // namespace

void lora_apply(const LoraPair& p, const float* x, std::span<const int32_t> rows, float* y, ThreadPool& pool) {
  if (rows.empty()) return;
  check_pair(p);
  auto run = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = rows[static_cast<size_t>(i)];
      apply_row(p, x + t * p.n_in, y + t * p.n_out);
    }
  };
  const auto n = static_cast<int64_t>(rows.size());
  // The adapter's bytes times the rows, against the same threshold the matmul uses.
  const int64_t bytes = static_cast<int64_t>(p.rank) * (p.n_in + p.n_out) * 4;
  if (n == 1 || bytes * n <= kMatmulInlineBytes) {
    run(0, n);
  } else {
    pool.for_chunks(n, (n + pool.num_threads() - 1) / pool.num_threads(), run);
  }
}

void lora_apply_ref(const LoraPair& p, const float* x, std::span<const int32_t> rows, float* y) {
  check_pair(p);
  std::vector<float> u(static_cast<size_t>(p.rank));
  for (const int32_t t : rows) {
    const float* xt = x + t * p.n_in;
    float* yt = y + t * p.n_out;
    for (int32_t j = 0; j < p.rank; ++j) {  // shrink: 16 lane sums, folded pairwise, then the tail
      const float* a = p.a + static_cast<int64_t>(j) * p.n_in;
      float lane[kLanes] = {};
      const int64_t main = p.n_in / kLanes * kLanes;
      for (int64_t c = 0; c < main; ++c) lane[c % kLanes] += a[c] * xt[c];
      for (int64_t w = kLanes / 2; w >= 1; w /= 2) {
        for (int64_t l = 0; l < w; ++l) lane[l] += lane[l + w];
      }
      float s = lane[0];
      for (int64_t c = main; c < p.n_in; ++c) s += a[c] * xt[c];
      u[static_cast<size_t>(j)] = p.scale * s;
    }
    for (int32_t j = 0; j < p.rank; ++j) {  // expand: rank-ordered sums into the output
      for (int64_t o = 0; o < p.n_out; ++o) yt[o] += u[static_cast<size_t>(j)] * p.bt[j * p.n_out + o];
    }
  }
}

}  // namespace tessera::kernels
