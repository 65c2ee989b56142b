// lora_apply and its scalar twin lora_apply_ref (see lora.h for the canonical order).
#include "kernels/lora.h"

#include <algorithm>
#include <vector>

#include "kernels/matmul.h"
#include "util/check.h"

namespace tessera::kernels {
namespace {

constexpr int64_t kLanes = 16;
constexpr int32_t kMaxRank = 1024;  // the u[] of one row lives on the stack

// GCC on x86-64 builds an AVX2 clone of the hot loops next to the baseline one and pick it
// once at load (ifunc); lanes and outputs are independent, so both clones give the same bits. The
// scalar-only build (TESSERA_FORCE_SCALAR) has the baseline one alone.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(TESSERA_FORCE_SCALAR)
#define TESSERA_LORA_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TESSERA_LORA_CLONES
#endif

// u = scale * dot16(a, x): 16 lane sums, folded pairwise, then the tail (lora.h).
TESSERA_LORA_CLONES
float shrink_one(const float* __restrict a, const float* __restrict x, int64_t n_in, float scale) {
  const int64_t main = n_in / kLanes * kLanes;
  float acc[kLanes] = {};
  for (int64_t c = 0; c < main; c += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) acc[l] += a[c + l] * x[c + l];
  }
  for (int64_t w = kLanes / 2; w >= 1; w /= 2) {
    for (int64_t l = 0; l < w; ++l) acc[l] += acc[l + w];
  }
  float s = acc[0];
  for (int64_t c = main; c < n_in; ++c) s += a[c] * x[c];
  return scale * s;
}

// y[o] += sum_j u[j] * bt[j][o] for o in [o0, o1), j ascending.
TESSERA_LORA_CLONES
void expand_range(const float* __restrict u, const float* __restrict bt, int32_t rank, int64_t n_out, int64_t o0,
                  int64_t o1, float* __restrict y) {
  for (int32_t j = 0; j < rank; ++j) {
    const float uj = u[j];
    const float* __restrict b = bt + static_cast<int64_t>(j) * n_out;
    for (int64_t o = o0; o < o1; ++o) y[o] += uj * b[o];
  }
}

// Up to kBlockRows rows at once: each A row and each B row is read once for the block, and every
// row's sums run in the order of lora.h (shrink_one, expand_range): the same bits; the rows only
// share the loads.
constexpr int64_t kBlockRows = 4;

TESSERA_LORA_CLONES
void apply_block(const LoraPair& p, const float* const* xs, float* const* ys, int64_t nb) {
  float u[kBlockRows][kMaxRank];
  const int64_t main = p.n_in / kLanes * kLanes;
  for (int32_t j = 0; j < p.rank; ++j) {
    const float* __restrict a = p.a + static_cast<int64_t>(j) * p.n_in;
    float acc[kBlockRows][kLanes] = {};
    for (int64_t c = 0; c < main; c += kLanes) {
      for (int64_t r = 0; r < nb; ++r) {
        const float* __restrict x = xs[r];
        for (int64_t l = 0; l < kLanes; ++l) acc[r][l] += a[c + l] * x[c + l];
      }
    }
    for (int64_t r = 0; r < nb; ++r) {
      for (int64_t w = kLanes / 2; w >= 1; w /= 2) {
        for (int64_t l = 0; l < w; ++l) acc[r][l] += acc[r][l + w];
      }
      float s = acc[r][0];
      for (int64_t c = main; c < p.n_in; ++c) s += a[c] * xs[r][c];
      u[r][j] = p.scale * s;
    }
  }
  for (int32_t j = 0; j < p.rank; ++j) {
    const float* __restrict b = p.bt + static_cast<int64_t>(j) * p.n_out;
    for (int64_t r = 0; r < nb; ++r) {
      const float uj = u[r][j];
      float* __restrict y = ys[r];
      for (int64_t o = 0; o < p.n_out; ++o) y[o] += uj * b[o];
    }
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
    for (int64_t i = i0; i < i1; i += kBlockRows) {
      const float* xs[kBlockRows];
      float* ys[kBlockRows];
      const int64_t nb = std::min(kBlockRows, i1 - i);
      for (int64_t r = 0; r < nb; ++r) {
        const int64_t t = rows[static_cast<size_t>(i + r)];
        xs[r] = x + t * p.n_in;
        ys[r] = y + t * p.n_out;
      }
      apply_block(p, xs, ys, nb);
    }
  };
  const auto n = static_cast<int64_t>(rows.size());
  const int64_t threads = pool.num_threads();
  // The adapter's bytes times the rows, against the same threshold the matmul uses.
  const int64_t bytes = static_cast<int64_t>(p.rank) * (p.n_in + p.n_out) * 4;
  if (bytes * n <= kMatmulInlineBytes || threads == 1) {
    run(0, n);
  } else if (n >= 2 * threads) {
    pool.for_chunks(n, (n + threads - 1) / threads, run);
  } else {
    // Few rows (decode at small batch): split each row's work instead, the shrink over (row, j)
    // and the expand over ranges of outputs. Every u[j] and y[o] is computed by the same code in
    // the same order as in apply_block: the same bits.
    thread_local std::vector<float> u;
    if (u.size() < static_cast<size_t>(n * p.rank)) u.resize(static_cast<size_t>(n * p.rank));
    float* ud = u.data();
    const int64_t items = n * p.rank;
    pool.for_chunks(items, (items + threads - 1) / threads, [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k) {
        const int64_t i = k / p.rank, j = k % p.rank;
        ud[k] = shrink_one(p.a + j * p.n_in, x + int64_t{rows[static_cast<size_t>(i)]} * p.n_in, p.n_in, p.scale);
      }
    });
    const int64_t per = (p.n_out + threads - 1) / threads;
    const int64_t chunk = (per + kLanes - 1) / kLanes * kLanes;  // whole 16-float groups per range
    pool.for_chunks(p.n_out, chunk, [&](int64_t o0, int64_t o1) {
      for (int64_t i = 0; i < n; ++i) {
        expand_range(ud + i * p.rank, p.bt, p.rank, p.n_out, o0, o1, y + int64_t{rows[static_cast<size_t>(i)]} * p.n_out);
      }
    });
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
