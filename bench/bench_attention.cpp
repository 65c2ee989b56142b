// B3: flash vs naive paged attention in one invocation, interleaved round by round.
// For each model shape: decode (1 query row) at depths 1k..16k and prefill (T rows over T keys)
// at 512..16k, one sequence, one layer, f32 (or --f16) KV in blocks of 16. Prints per length: tok/s
// of the flash kernel (pool of --threads threads and 1 thread) and of the naive twin (single-threaded
// by design), the ratio flash/naive (median, min-max over rounds), the peak scratch bytes of each
// and, for decode, the K/V bytes the 1-thread flash kernel streams per second.
// Prefill lengths >= --slice-from (default 8192) time one KV head group only (num_heads/num_kv_heads
// query heads over 1 KV head) on both sides, so the naive twin takes seconds instead of minutes:
// their ratio is measured on identical work; tok/s is scaled by 1/num_kv_heads (rows marked "*").
//   bench_attention [--quick] [--rounds N] [--threads N] [--shape synthetic|smollm2|both]
//                   [--max-prefill T] [--max-decode D] [--slice-from T] [--f16]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/kernels_info.h"
#include "util/thread_pool.h"
#include "util/timer.h"

using namespace tessera;
using namespace tessera::kernels;

namespace {

struct ModelShape {
  const char* name;
  int32_t num_heads, num_kv_heads, head_dim;
};

struct Options {
  bool quick = false;
  int rounds = 3;
  int rounds_long = 1;       // rounds for prefill >= slice_from
  int threads = default_num_threads();
  std::string shape = "both";
  int32_t max_prefill = 16384;
  int32_t max_decode = 16384;
  int32_t slice_from = 8192;
  bool f16 = false;
};

// One sequence of `ctx` tokens in a paged cache, q rows for the last q_len positions.
struct Case {
  KvLayer kv;
  std::vector<uint8_t> k_store, v_store;
  std::vector<int32_t> blocks, qsl, seq_lens, indptr;
  std::vector<int64_t> slots;
  std::vector<float> q, out;
  AttnMetadata md;

  Case(const ModelShape& sh, int32_t ctx, int32_t q_len, bool f16) {
    const int32_t block_size = 16;
    const int32_t num_blocks = (ctx + block_size - 1) / block_size;
    const int32_t row_kv = sh.num_kv_heads * sh.head_dim;
    kv = KvLayer{nullptr, nullptr, f16 ? KvDType::kF16 : KvDType::kF32, num_blocks, block_size,
                 sh.num_kv_heads, sh.head_dim};
    const size_t bytes = size_t(num_blocks) * block_size * row_kv * (f16 ? 2 : 4);
    k_store.resize(bytes);
    v_store.resize(bytes);
    kv.k = k_store.data();
    kv.v = v_store.data();
    for (int32_t b = 0; b < num_blocks; ++b) blocks.push_back((b * 7 + 1) % num_blocks == b ? b : b);
    std::mt19937 rng(42);
    std::shuffle(blocks.begin(), blocks.end(), rng);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    // Write all ctx rows (as one prefill would).
    std::vector<float> k(size_t(ctx) * row_kv), v(k.size());
    for (float& x : k) x = u(rng);
    for (float& x : v) x = u(rng);
    for (int32_t p = 0; p < ctx; ++p) slots.push_back(int64_t{blocks[p / block_size]} * block_size + p % block_size);
    qsl = {0, ctx};
    seq_lens = {ctx};
    indptr = {0, num_blocks};
    md = AttnMetadata{1, ctx, qsl.data(), seq_lens.data(), indptr.data(), blocks.data(), slots.data()};
    write_kv(kv, md, k.data(), v.data());
    // The step: the last q_len positions.
    qsl = {0, q_len};
    md.num_tokens = q_len;
    md.slot_mapping = slots.data() + (ctx - q_len);
    q.resize(size_t(q_len) * sh.num_heads * sh.head_dim);
    for (float& x : q) x = u(rng);
    out.resize(q.size());
  }
};

struct Row {
  std::string label;
  double flash_tps = 0, flash1_tps = 0, naive_tps = 0;
  double ratio_med = 0, ratio_min = 0, ratio_max = 0, ratio1_med = 0;
  size_t flash_bytes = 0, naive_bytes = 0;
  double max_abs_diff = 0;
  double gbps1 = 0;     // decode: K/V bytes per second of the 1-thread flash kernel
  bool sliced = false;  // one KV head group timed, tok/s scaled
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Seconds per call, repeating the call until min_ms has passed (at least once).
template <typename Fn>
double time_call(Fn&& fn, double min_ms) {
  int reps = 0;
  Stopwatch sw;
  do {
    fn();
    ++reps;
  } while (sw.elapsed_ms() < min_ms);
  return sw.elapsed_ms() / 1000.0 / reps;
}

Row measure(const ModelShape& full, int32_t ctx, int32_t q_len, const Options& opt, ThreadPool& pool,
            ThreadPool& pool1, int rounds) {
  const bool sliced = q_len > 1 && q_len >= opt.slice_from && full.num_kv_heads > 1;
  const ModelShape sh = sliced ? ModelShape{full.name, full.num_heads / full.num_kv_heads, 1, full.head_dim} : full;
  const double scale_tps = double(sh.num_kv_heads) / full.num_kv_heads;  // sliced: 1/num_kv_heads
  Case c(sh, ctx, q_len, opt.f16);
  const float scale = 1.0f / std::sqrt(float(sh.head_dim));
  AttnWorkspace ws_flash, ws_flash1, ws_naive;
  std::vector<float> naive_out(c.out.size());
  const double min_ms = opt.quick ? 20 : 200;
  auto flash = [&] { paged_attention(c.kv, c.md, c.q.data(), sh.num_heads, scale, c.out.data(), pool, ws_flash); };
  auto flash1 = [&] { paged_attention(c.kv, c.md, c.q.data(), sh.num_heads, scale, c.out.data(), pool1, ws_flash1); };
  auto naive = [&] { paged_attention_naive(c.kv, c.md, c.q.data(), sh.num_heads, scale, naive_out.data(), ws_naive); };
  flash();  // sizes the workspaces (and checks the answer below)
  flash1();
  if (size_t(q_len) * ctx <= (size_t(1) << 26)) naive();  // warm-up unless it takes minutes
  std::vector<double> t_flash, t_flash1, t_naive, ratio, ratio1;
  for (int r = 0; r < rounds; ++r) {  // interleaved: each round times all three back to back
    t_flash.push_back(time_call(flash, min_ms));
    t_naive.push_back(time_call(naive, min_ms));
    t_flash1.push_back(time_call(flash1, min_ms));
    ratio.push_back(t_naive.back() / t_flash.back());
    ratio1.push_back(t_naive.back() / t_flash1.back());
  }
  Row row;
  row.sliced = sliced;
  row.flash_tps = scale_tps * q_len / median(t_flash);
  row.flash1_tps = scale_tps * q_len / median(t_flash1);
  row.naive_tps = scale_tps * q_len / median(t_naive);
  if (q_len == 1) {
    const double kv_bytes = 2.0 * ctx * sh.num_kv_heads * sh.head_dim * (opt.f16 ? 2 : 4);
    row.gbps1 = kv_bytes / median(t_flash1) / 1e9;
  }
  row.ratio_med = median(ratio);
  row.ratio_min = *std::min_element(ratio.begin(), ratio.end());
  row.ratio_max = *std::max_element(ratio.begin(), ratio.end());
  row.ratio1_med = median(ratio1);
  row.flash_bytes = ws_flash.peak_bytes_flash();
  row.naive_bytes = ws_naive.peak_bytes_naive();
  for (size_t i = 0; i < c.out.size(); ++i)
    row.max_abs_diff = std::max(row.max_abs_diff, double(std::fabs(c.out[i] - naive_out[i])));
  return row;
}

std::string human_bytes(size_t b) {
  char buf[32];
  if (b >= (size_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(1 << 30));
  else if (b >= (size_t(1) << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", b / double(1 << 20));
  else std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  return buf;
}

void print_row(const char* kind, int32_t len, const Row& r) {
  char gbps[16] = "-";
  if (r.gbps1 > 0) std::snprintf(gbps, sizeof gbps, "%.2f", r.gbps1);
  std::printf("| %-7s | %6d%s | %12.1f | %12.1f | %12.1f | %5.2fx [%5.2f-%5.2f] | %5.2fx | %6s | %10s | %10s | %.1e |\n",
              kind, len, r.sliced ? "*" : " ", r.flash_tps, r.flash1_tps, r.naive_tps, r.ratio_med,
              r.ratio_min, r.ratio_max, r.ratio1_med, gbps, human_bytes(r.flash_bytes).c_str(),
              human_bytes(r.naive_bytes).c_str(), r.max_abs_diff);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--quick") opt.quick = true;
    else if (a == "--rounds") opt.rounds = std::atoi(next().c_str());
    else if (a == "--rounds-long") opt.rounds_long = std::atoi(next().c_str());
    else if (a == "--threads") opt.threads = std::atoi(next().c_str());
    else if (a == "--shape") opt.shape = next();
    else if (a == "--max-prefill") opt.max_prefill = std::atoi(next().c_str());
    else if (a == "--max-decode") opt.max_decode = std::atoi(next().c_str());
    else if (a == "--slice-from") opt.slice_from = std::atoi(next().c_str());
    else if (a == "--f16") opt.f16 = true;
    else {
      std::fprintf(stderr, "usage: bench_attention [--quick] [--rounds N] [--rounds-long N] [--threads N] "
                           "[--shape synthetic|smollm2|both] [--max-prefill T] [--max-decode D] [--slice-from T] [--f16]\n");
      return 2;
    }
  }
  if (opt.quick) {
    opt.rounds = 1;
    opt.rounds_long = 1;
    opt.max_prefill = std::min(opt.max_prefill, 1024);
    opt.max_decode = std::min(opt.max_decode, 2048);
  }
  std::vector<ModelShape> shapes;
  if (opt.shape == "synthetic" || opt.shape == "both") shapes.push_back({"synthetic 32q/4kv hd64", 32, 4, 64});
  if (opt.shape == "smollm2" || opt.shape == "both") shapes.push_back({"SmolLM2 9q/3kv hd64", 9, 3, 64});
  ThreadPool pool(opt.threads);
  ThreadPool pool1(1);
  std::printf("bench_attention (B3): isa=%s threads=%d rounds=%d (prefill >= slice: %d) kv=%s block_size=16, one layer\n",
              std::string(active_isa()).c_str(), opt.threads, opt.rounds, opt.rounds_long, opt.f16 ? "f16" : "f32");
  std::printf("tok/s: decode = steps/s of one sequence; prefill = prompt tokens/s. ratio = naive time / flash time.\n"
              "1t GB/s: K/V bytes read per second by the 1-thread flash decode. *: one KV head group of %d+ token\n"
              "prefills timed on both sides (same work), tok/s scaled by 1/num_kv_heads; peaks are that slice's.\n",
              opt.slice_from);
  for (const ModelShape& sh : shapes) {
    std::printf("\n%s\n", sh.name);
    std::printf("| kind    | length  | flash tok/s  | flash1t tok/s| naive tok/s  | flash/naive (med [min-max]) | 1t/naive | 1t GB/s | flash peak | naive peak | max|diff| |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int32_t depth = 1024; depth <= opt.max_decode; depth *= 2)
      print_row("decode", depth, measure(sh, depth, 1, opt, pool, pool1, opt.rounds));
    for (int32_t len = 512; len <= opt.max_prefill; len *= 2)
      print_row("prefill", len, measure(sh, len, len, opt, pool, pool1, len >= opt.slice_from ? opt.rounds_long : opt.rounds));
  }
  return 0;
}
