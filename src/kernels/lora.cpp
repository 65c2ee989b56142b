// lora_apply and its scalar twin lora_apply_ref (see lora.h for the canonical order).
#include "kernels/lora.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "util/check.h"
#include "util/fp16.h"

namespace tessera::kernels {
namespace {

constexpr int64_t kLanes = 16;
constexpr int32_t kMaxRank = 1024;
// Rows whose shrink shares one pass over an A row (their lane sums stay in registers).
constexpr int64_t kBlockRows = 4;
// Outputs per expand item: a multiple of kLanes; rank x 128 floats of Bt stay in L1 for all rows.
constexpr int64_t kExpandRange = 128;
// Jobs planned together (segments x targets sharing an input: 8 adapters x q, k, v = 24); more
// are split into several plans.
constexpr size_t kMaxJobs = 64;

// GCC on x86-64 builds AVX-512 and AVX2 clones of the hot loops next to the baseline one and picks
// one once at load (ifunc); lanes and outputs are independent and nothing is contracted into an
// fma (-ffp-contract=off), so every clone gives the same bits. The scalar-only build
// (TESSERA_FORCE_SCALAR) has the baseline one alone.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(TESSERA_FORCE_SCALAR)
#define TESSERA_LORA_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TESSERA_LORA_CLONES
#endif

// 16 floats as one GCC generic vector: each clone lowers it to its widest registers (one zmm, two
// ymm, four xmm); + and * stay separate lane-wise IEEE operations, the scalar twin's.
// V16u: the same, at any float address (unaligned loads and stores).
typedef float V16 __attribute__((vector_size(64)));
typedef float V16u __attribute__((vector_size(64), aligned(4), may_alias));
static_assert(sizeof(V16) == kLanes * sizeof(float));
#define TESSERA_LOAD16(p) (*reinterpret_cast<const V16u*>(p))

// out[i] = scale * dot16(a, xs[i]) for nb <= kBlockRows rows (lora.h's order; the rows only share
// the loads of a).
TESSERA_LORA_CLONES
void shrink_rows(const float* __restrict a, const float* const* xs, int64_t nb, int64_t n_in, float scale, float* out) {
  const int64_t main = n_in / kLanes * kLanes;
  V16 acc[kBlockRows] = {};
  for (int64_t c = 0; c < main; c += kLanes) {
    const V16 va = TESSERA_LOAD16(a + c);
    for (int64_t r = 0; r < nb; ++r) acc[r] += va * TESSERA_LOAD16(xs[r] + c);
  }
  for (int64_t r = 0; r < nb; ++r) {
    float lane[kLanes];
    std::memcpy(lane, &acc[r], sizeof lane);
    for (int64_t w = kLanes / 2; w >= 1; w /= 2) {
      for (int64_t l = 0; l < w; ++l) lane[l] += lane[l + w];
    }
    float s = lane[0];
    for (int64_t c = main; c < n_in; ++c) s += a[c] * xs[r][c];
    out[r] = scale * s;
  }
}

// y[o] += u[j] * b[j][o] for j = 0 .. rank-1 in order, o in [0, n); b rows `ld` floats apart. Each
// group of 16 outputs stays in a register over the rank (one load and one store of y).
TESSERA_LORA_CLONES
void expand_row(const float* __restrict u, const float* __restrict b, int64_t ld, int32_t rank, float* __restrict y,
                int64_t n) {
  const int64_t main = n / kLanes * kLanes;
  for (int64_t o = 0; o < main; o += kLanes) {
    V16 acc = TESSERA_LOAD16(y + o);
    for (int32_t j = 0; j < rank; ++j) acc += u[j] * TESSERA_LOAD16(b + j * ld + o);
    *reinterpret_cast<V16u*>(y + o) = acc;
  }
  for (int64_t o = main; o < n; ++o) {
    float acc = y[o];
    for (int32_t j = 0; j < rank; ++j) acc += u[j] * b[j * ld + o];
    y[o] = acc;
  }
}

// Row `row` of a [*][cols] f32 or f16 matrix, columns [c0, c0 + n), as f32: the matrix itself
// (f32) or `buf` filled with the exact conversion (f16).
const float* f32_span(const LoraPair& p, const void* m, int64_t cols, int64_t row, int64_t c0, int64_t n, float* buf) {
  if (p.dtype == DType::F32) return static_cast<const float*>(m) + row * cols + c0;
  dequantize_row(DType::F16, static_cast<const uint16_t*>(m) + row * cols + c0, buf, n);
  return buf;
}

void check_job(const LoraJob& job) {
  TESSERA_CHECK(job.pair != nullptr && job.x != nullptr && job.y != nullptr, "LoRA job without a pair, x or y");
  const LoraPair& p = *job.pair;
  TESSERA_CHECK(p.rank > 0 && p.rank <= kMaxRank && p.a != nullptr && p.bt != nullptr && p.n_in > 0 && p.n_out > 0 &&
                    (p.dtype == DType::F32 || p.dtype == DType::F16),
                "LoRA pair: rank {} (1..{}), n_in {}, n_out {}, dtype {}", p.rank, kMaxRank, p.n_in, p.n_out,
                dtype_name(p.dtype));
}

// The item layout of one call: job i's shrink items are [shrink_at[i], shrink_at[i + 1]) (one per
// rank row), its expand items [expand_at[i], expand_at[i + 1]) (one per kExpandRange outputs), its
// u values [u_at[i], u_at[i] + rows * rank) (row-major: u[row][j]).
struct Plan {
  std::span<const LoraJob> jobs;
  int64_t shrink_at[kMaxJobs + 1];
  int64_t expand_at[kMaxJobs + 1];
  int64_t u_at[kMaxJobs + 1];
  float* u;

  static size_t job_of(const int64_t* at, size_t n, int64_t item) {
    size_t i = 0;
    while (i + 1 < n && at[i + 1] <= item) ++i;
    return i;
  }

  void shrink(int64_t k0, int64_t k1, std::vector<float>& buf) const {
    for (int64_t k = k0; k < k1; ++k) {
      const size_t i = job_of(shrink_at, jobs.size(), k);
      const LoraJob& job = jobs[i];
      const LoraPair& p = *job.pair;
      const int64_t j = k - shrink_at[i];
      if (buf.size() < static_cast<size_t>(p.n_in)) buf.resize(static_cast<size_t>(p.n_in));
      const float* a = f32_span(p, p.a, p.n_in, j, 0, p.n_in, buf.data());
      const auto n = static_cast<int64_t>(job.rows.size());
      for (int64_t r0 = 0; r0 < n; r0 += kBlockRows) {
        const int64_t nb = std::min(kBlockRows, n - r0);
        const float* xs[kBlockRows];
        float out[kBlockRows];
        for (int64_t r = 0; r < nb; ++r) xs[r] = job.x + int64_t{job.rows[static_cast<size_t>(r0 + r)]} * p.n_in;
        shrink_rows(a, xs, nb, p.n_in, p.scale, out);
        for (int64_t r = 0; r < nb; ++r) u[u_at[i] + (r0 + r) * p.rank + j] = out[r];
      }
    }
  }

  // buf: the f16 pairs' Bt columns of one item as f32 ([rank][kExpandRange]).
  void expand(int64_t k0, int64_t k1, std::vector<float>& buf) const {
    for (int64_t k = k0; k < k1; ++k) {
      const size_t i = job_of(expand_at, jobs.size(), k);
      const LoraJob& job = jobs[i];
      const LoraPair& p = *job.pair;
      const int64_t o0 = (k - expand_at[i]) * kExpandRange, len = std::min(kExpandRange, p.n_out - o0);
      const float* b = nullptr;
      int64_t ld = p.n_out;
      if (p.dtype == DType::F32) {
        b = static_cast<const float*>(p.bt) + o0;
      } else {
        if (buf.size() < static_cast<size_t>(p.rank * kExpandRange)) buf.resize(static_cast<size_t>(p.rank * kExpandRange));
        for (int64_t j = 0; j < p.rank; ++j) f32_span(p, p.bt, p.n_out, j, o0, len, buf.data() + j * len);
        b = buf.data();
        ld = len;
      }
      for (size_t r = 0; r < job.rows.size(); ++r) {
        expand_row(u + u_at[i] + static_cast<int64_t>(r) * p.rank, b, ld, p.rank, job.y + int64_t{job.rows[r]} * p.n_out + o0,
                   len);
      }
    }
  }
};

}  // namespace

void lora_apply(std::span<const LoraJob> jobs, ThreadPool& pool) {
  if (jobs.empty()) return;
  if (jobs.size() > kMaxJobs) {  // many adapters in one step: a few calls of kMaxJobs jobs
    lora_apply(jobs.first(kMaxJobs), pool);
    return lora_apply(jobs.subspan(kMaxJobs), pool);
  }
  thread_local std::vector<float> u;
  Plan plan{jobs, {}, {}, {}, nullptr};
  int64_t work_bytes = 0;  // adapter bytes times rows: what a single thread would stream
  for (size_t i = 0; i < jobs.size(); ++i) {
    check_job(jobs[i]);
    const LoraPair& p = *jobs[i].pair;
    const auto rows = static_cast<int64_t>(jobs[i].rows.size());
    plan.shrink_at[i + 1] = plan.shrink_at[i] + (rows > 0 ? p.rank : 0);
    plan.expand_at[i + 1] = plan.expand_at[i] + (rows > 0 ? (p.n_out + kExpandRange - 1) / kExpandRange : 0);
    plan.u_at[i + 1] = plan.u_at[i] + rows * p.rank;
    work_bytes += rows * p.rank * (p.n_in + p.n_out) * static_cast<int64_t>(dtype_block_bytes(p.dtype));
  }
  const size_t n = jobs.size();
  if (u.size() < static_cast<size_t>(plan.u_at[n])) u.resize(static_cast<size_t>(plan.u_at[n]));
  plan.u = u.data();
  const int64_t shrink_items = plan.shrink_at[n], expand_items = plan.expand_at[n];
  const int threads = pool.num_threads();
  if (threads == 1 || work_bytes <= kMatmulInlineBytes) {
    thread_local std::vector<float> buf;
    plan.shrink(0, shrink_items, buf);
    plan.expand(0, expand_items, buf);
    return;
  }
  // Dynamic chunks of a few items: the items differ in size (n_in, rows), and a thread slowed by
  // its neighbour hands its share over.
  pool.for_chunks(shrink_items, std::max<int64_t>(1, shrink_items / (4 * threads)), [&](int64_t k0, int64_t k1) {
    thread_local std::vector<float> buf;
    plan.shrink(k0, k1, buf);
  });
  pool.for_chunks(expand_items, std::max<int64_t>(1, expand_items / (4 * threads)), [&](int64_t k0, int64_t k1) {
    thread_local std::vector<float> buf;
    plan.expand(k0, k1, buf);
  });
}

void lora_apply_ref(const LoraJob& job) {
  check_job(job);
  const LoraPair& p = *job.pair;
  auto at = [&](const void* m, int64_t i) {
    return p.dtype == DType::F32 ? static_cast<const float*>(m)[i] : fp16_to_fp32(static_cast<const uint16_t*>(m)[i]);
  };
  std::vector<float> u(static_cast<size_t>(p.rank));
  for (const int32_t t : job.rows) {
    const float* xt = job.x + t * p.n_in;
    float* yt = job.y + t * p.n_out;
    for (int32_t j = 0; j < p.rank; ++j) {  // shrink: 16 lane sums, folded pairwise, then the tail
      float lane[kLanes] = {};
      const int64_t main = p.n_in / kLanes * kLanes;
      for (int64_t c = 0; c < main; ++c) lane[c % kLanes] += at(p.a, j * p.n_in + c) * xt[c];
      for (int64_t w = kLanes / 2; w >= 1; w /= 2) {
        for (int64_t l = 0; l < w; ++l) lane[l] += lane[l + w];
      }
      float s = lane[0];
      for (int64_t c = main; c < p.n_in; ++c) s += at(p.a, j * p.n_in + c) * xt[c];
      u[static_cast<size_t>(j)] = p.scale * s;
    }
    for (int32_t j = 0; j < p.rank; ++j) {  // expand: rank-ordered sums into the output
      for (int64_t o = 0; o < p.n_out; ++o) yt[o] += u[static_cast<size_t>(j)] * at(p.bt, j * p.n_out + o);
    }
  }
}

}  // namespace tessera::kernels
