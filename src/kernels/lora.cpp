// lora_apply and its scalar twin lora_apply_ref (see lora.h for the canonical order).
#include "kernels/lora.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "kernels/matmul.h"
#include "util/check.h"
#include "util/cpu_features.h"
#include "util/fp16.h"
#ifndef TESSERA_FORCE_SCALAR
#include "kernels/x86/lora_simd.h"
#endif

namespace tessera::kernels {
namespace {

constexpr int64_t kLanes = 16;
constexpr int32_t kMaxRank = 1024;
// Rows whose shrink shares one pass over an A row, and whose expand shares each load of Bt.
constexpr int64_t kBlockRows = 4;
// Outputs per expand item: a multiple of kLanes; rank x 128 floats of Bt stay in L1 for all rows.
constexpr int64_t kExpandRange = 128;
// Jobs planned together (segments x targets sharing an input: 8 adapters x q, k, v = 24); more
// are split into several plans.
constexpr size_t kMaxJobs = 64;

// The scalar loops (any CPU, and TESSERA_ISA=scalar): lora.h's order, a block of rows at a time.
// std::fma is the same correctly rounded operation as the SIMD files' fused multiply-add.
inline float elem(const void* m, bool half, int64_t i) {
  return half ? fp16_to_fp32(static_cast<const uint16_t*>(m)[i]) : static_cast<const float*>(m)[i];
}

void shrink_rows_scalar(const void* a, bool half, const float* const* xs, int64_t nb, int64_t n_in, float scale,
                        float* out) {
  const int64_t main = n_in / kLanes * kLanes;
  for (int64_t r = 0; r < nb; ++r) {
    float lane[kLanes] = {};
    for (int64_t c = 0; c < main; ++c) lane[c % kLanes] = std::fma(elem(a, half, c), xs[r][c], lane[c % kLanes]);
    for (int64_t w = kLanes / 2; w >= 1; w /= 2) {
      for (int64_t l = 0; l < w; ++l) lane[l] += lane[l + w];
    }
    float s = lane[0];
    for (int64_t c = main; c < n_in; ++c) s = std::fma(elem(a, half, c), xs[r][c], s);
    out[r] = scale * s;
  }
}

void expand_rows_scalar(const float* const* us, int64_t nb, const void* bt, bool half, int64_t n_out, int64_t o0,
                        int64_t len, int32_t rank, float* const* ys) {
  for (int64_t r = 0; r < nb; ++r) {
    for (int64_t o = 0; o < len; ++o) {
      float acc = ys[r][o];
      for (int32_t j = 0; j < rank; ++j) acc = std::fma(us[r][j], elem(bt, half, j * n_out + o0 + o), acc);
      ys[r][o] = acc;
    }
  }
}

using ShrinkFn = void (*)(const void*, bool, const float* const*, int64_t, int64_t, float, float*);
using ExpandFn = void (*)(const float* const*, int64_t, const void*, bool, int64_t, int64_t, int64_t, int32_t,
                          float* const*);

// The loops for isa_level() (read per call: tests switch levels).
std::pair<ShrinkFn, ExpandFn> loops() {
#ifndef TESSERA_FORCE_SCALAR
  switch (isa_level()) {
    case IsaLevel::kAvx512: return {avx512::lora_shrink_rows, avx512::lora_expand_rows};
    case IsaLevel::kAvx2: return {avx2::lora_shrink_rows, avx2::lora_expand_rows};
    case IsaLevel::kScalar: break;
  }
#endif
  return {shrink_rows_scalar, expand_rows_scalar};
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
  ShrinkFn shrink_fn;
  ExpandFn expand_fn;

  static size_t job_of(const int64_t* at, size_t n, int64_t item) {
    size_t i = 0;
    while (i + 1 < n && at[i + 1] <= item) ++i;
    return i;
  }

  void shrink(int64_t k0, int64_t k1) const {
    for (int64_t k = k0; k < k1; ++k) {
      const size_t i = job_of(shrink_at, jobs.size(), k);
      const LoraJob& job = jobs[i];
      const LoraPair& p = *job.pair;
      const int64_t j = k - shrink_at[i];
      const bool half = p.dtype == DType::F16;
      const void* a = static_cast<const char*>(p.a) + j * p.n_in * (half ? 2 : 4);
      const auto n = static_cast<int64_t>(job.rows.size());
      for (int64_t r0 = 0; r0 < n; r0 += kBlockRows) {
        const int64_t nb = std::min(kBlockRows, n - r0);
        const float* xs[kBlockRows];
        float out[kBlockRows];
        for (int64_t r = 0; r < nb; ++r) xs[r] = job.x + int64_t{job.rows[static_cast<size_t>(r0 + r)]} * p.n_in;
        shrink_fn(a, half, xs, nb, p.n_in, p.scale, out);
        for (int64_t r = 0; r < nb; ++r) u[u_at[i] + (r0 + r) * p.rank + j] = out[r];
      }
    }
  }

  void expand(int64_t k0, int64_t k1) const {
    for (int64_t k = k0; k < k1; ++k) {
      const size_t i = job_of(expand_at, jobs.size(), k);
      const LoraJob& job = jobs[i];
      const LoraPair& p = *job.pair;
      const int64_t o0 = (k - expand_at[i]) * kExpandRange, len = std::min(kExpandRange, p.n_out - o0);
      const auto n = static_cast<int64_t>(job.rows.size());
      for (int64_t r0 = 0; r0 < n; r0 += kBlockRows) {
        const int64_t nb = std::min(kBlockRows, n - r0);
        const float* us[kBlockRows];
        float* ys[kBlockRows];
        for (int64_t r = 0; r < nb; ++r) {
          us[r] = u + u_at[i] + (r0 + r) * p.rank;
          ys[r] = job.y + int64_t{job.rows[static_cast<size_t>(r0 + r)]} * p.n_out + o0;
        }
        expand_fn(us, nb, p.bt, p.dtype == DType::F16, p.n_out, o0, len, p.rank, ys);
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
  const auto [shrink_fn, expand_fn] = loops();
  Plan plan{jobs, {}, {}, {}, nullptr, shrink_fn, expand_fn};
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
    plan.shrink(0, shrink_items);
    plan.expand(0, expand_items);
    return;
  }
  // Dynamic chunks of a few items: the items differ in size (n_in, rows), and a thread slowed by
  // its neighbour hands its share over.
  pool.for_chunks(shrink_items, std::max<int64_t>(1, shrink_items / (4 * threads)),
                  [&](int64_t k0, int64_t k1) { plan.shrink(k0, k1); });
  pool.for_chunks(expand_items, std::max<int64_t>(1, expand_items / (4 * threads)),
                  [&](int64_t k0, int64_t k1) { plan.expand(k0, k1); });
}

void lora_apply_ref(const LoraJob& job) {
  check_job(job);
  const LoraPair& p = *job.pair;
  const bool half = p.dtype == DType::F16;
  std::vector<float> u(static_cast<size_t>(p.rank));
  for (const int32_t t : job.rows) {
    const float* xt = job.x + t * p.n_in;
    float* yt = job.y + t * p.n_out;
    for (int32_t j = 0; j < p.rank; ++j) {  // shrink: 16 fused lane sums, folded pairwise, then the tail
      float lane[kLanes] = {};
      const int64_t main = p.n_in / kLanes * kLanes;
      for (int64_t c = 0; c < main; ++c) {
        lane[c % kLanes] = std::fma(elem(p.a, half, j * p.n_in + c), xt[c], lane[c % kLanes]);
      }
      for (int64_t w = kLanes / 2; w >= 1; w /= 2) {
        for (int64_t l = 0; l < w; ++l) lane[l] += lane[l + w];
      }
      float s = lane[0];
      for (int64_t c = main; c < p.n_in; ++c) s = std::fma(elem(p.a, half, j * p.n_in + c), xt[c], s);
      u[static_cast<size_t>(j)] = p.scale * s;
    }
    for (int32_t j = 0; j < p.rank; ++j) {  // expand: rank-ordered fused sums into the output
      for (int64_t o = 0; o < p.n_out; ++o) yt[o] = std::fma(u[static_cast<size_t>(j)], elem(p.bt, half, j * p.n_out + o), yt[o]);
    }
  }
}

}  // namespace tessera::kernels
