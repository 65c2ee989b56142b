// B8 prefix cache, through the Engine on SmolLM2 (interleaved rounds, cache on vs cache off):
//  1. TTFT of one request whose prefix of P = 512, 1024, 2048 tokens is cached (cache on: the
//     prefix was served once before with another suffix) vs the same request with the cache off;
//     16-token suffixes, 1 output token, the request alone. Target: >= 20x lower at P = 2048.
//  2. Throughput at 0% hit rate: 16 requests of 128 unique random tokens, 64 output tokens each,
//     all at once, cache on vs off. Target: <= 1% loss.
//  3. What the cache costs when nothing is shared, measured directly: at 0% hit the only extra
//     work is bookkeeping (hash every full block, look it up, keep freed blocks' hashes, evict
//     them LRU). The real Scheduler + KvCacheManager run part 2's workload shape with a fake
//     runner (no model), cache on vs off, alternating, many rounds; the extra microseconds per
//     step, divided by the real engine's step time from part 2, bound the throughput loss far
//     more tightly than end-to-end timing on a noisy 2-core machine can.
//
//   build-x/bench/bench_prefix_cache [--model M] [--rounds 3] [--tp-rounds 6] [--threads 2]
#include <cstdio>
#include <cstdlib>
#include <map>

#include "bench_engine_util.h"
#include "sched/scheduler.h"

using namespace tessera;
using namespace tessera::bench;

namespace {

std::unique_ptr<Engine> make(const std::string& model, int32_t threads, bool cache) {
  EngineConfig c;
  c.model_path = model;
  c.num_threads = threads;
  c.enable_prefix_caching = cache;
  c.max_model_len = 2048 + 64;
  c.max_num_batched_tokens = 512;
  c.max_num_seqs = 32;
  c.kv_cache_bytes = int64_t{512} << 20;
  auto e = Engine::create(c);
  if (!e) {
    std::fprintf(stderr, "error: %s\n", e.error().message.c_str());
    std::exit(1);
  }
  return std::move(*e);
}

// Part 3: microseconds of scheduler + KV bookkeeping per step over `rounds` workloads of
// 16 x (128 unique random tokens in, 64 out), one long-lived scheduler (as in the engine, so
// freed blocks stay cached and later allocations evict them). Same pool as make(): 512 MiB at
// SmolLM2's 23,040 bytes per token = 1,456 blocks of 16.
double bookkeeping_us_per_step(bool cache, int32_t rounds, int32_t vocab, int64_t& steps_out) {
  sched::SchedulerConfig c;
  c.max_num_seqs = 32;
  c.max_num_batched_tokens = 512;
  c.max_model_len = 2048 + 64;
  c.block_size = 16;
  c.num_blocks = static_cast<int32_t>((int64_t{512} << 20) / (int64_t{23040} * 16)) + 1;
  c.enable_prefix_caching = cache;
  c.check_integrity_every_step = false;
  sched::Scheduler s(c);
  int64_t next_id = 0, steps = 0;
  double us = 0;
  for (int32_t r = 0; r < rounds; ++r) {
    const auto prompts = random_prompts(16, 128, vocab, 70000 + static_cast<uint64_t>(r));
    for (const auto& p : prompts) {
      sched::NewRequest q;
      q.id = next_id++;
      q.prompt = std::make_shared<const std::vector<int32_t>>(p);
      q.stop.max_tokens = 64;
      const Status st = s.add_request(q);
      TESSERA_CHECK(st.ok(), "bookkeeping bench: request refused");
    }
    while (s.has_unfinished_requests()) {
      const auto t0 = std::chrono::steady_clock::now();
      const sched::SchedulerOutput out = s.schedule();
      sched::ModelRunnerOutput run;  // the fake runner: one fixed non-EOS token per sequence
      for (const sched::ScheduledSeq& q : out.seqs) run.sampled_token_ids.push_back(
          q.needs_logits ? std::vector<int32_t>(static_cast<size_t>(q.num_samples), 1000) : std::vector<int32_t>{});
      s.update_from_output(out, run);
      us += ms_since(t0) * 1000.0;
      steps += out.seqs.empty() ? 0 : 1;
    }
  }
  steps_out = steps;
  return us / static_cast<double>(steps);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = default_model_path();
  int32_t rounds = 3, threads = 2, tp_rounds = 6;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--model") model = argv[i + 1];
    else if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--tp-rounds") tp_rounds = std::atoi(argv[i + 1]);
  }
  auto on = make(model, threads, true);
  auto off = make(model, threads, false);
  const int32_t vocab = on->model_info().vocab_size;
  const std::vector<int32_t> prefix_lens = {512, 1024, 2048};
  const auto prefixes = random_prompts(static_cast<int32_t>(prefix_lens.size()), 2048, vocab, 8);

  SamplingParams one;
  one.temperature = 0.0f;
  one.max_tokens = 1;
  one.ignore_eos = true;
  // Warm: each prefix once through the cache-on engine (a different suffix from the measured ones).
  for (size_t k = 0; k < prefix_lens.size(); ++k) {
    std::vector<int32_t> p(prefixes[k].begin(), prefixes[k].begin() + prefix_lens[k]);
    const auto sfx = random_prompts(1, 16, vocab, 900 + k)[0];
    p.insert(p.end(), sfx.begin(), sfx.end());
    run_set(*on, {p}, one);
  }
  std::map<int32_t, std::vector<double>> ttft_on, ttft_off;
  int64_t hits_before = on->metrics().prefix_cache_hits;
  int64_t hit_tokens = 0;
  for (int32_t r = 0; r < rounds; ++r) {
    for (size_t k = 0; k < prefix_lens.size(); ++k) {
      std::vector<int32_t> p(prefixes[k].begin(), prefixes[k].begin() + prefix_lens[k]);
      const auto sfx = random_prompts(1, 16, vocab, 100 + r * 8 + k)[0];
      p.insert(p.end(), sfx.begin(), sfx.end());
      // Alternate which side goes first, so a drift in the machine's load favours neither.
      if (r % 2 == 0) {
        ttft_on[prefix_lens[k]].push_back(run_set(*on, {p}, one)[0].first_ms);
        ttft_off[prefix_lens[k]].push_back(run_set(*off, {p}, one)[0].first_ms);
      } else {
        ttft_off[prefix_lens[k]].push_back(run_set(*off, {p}, one)[0].first_ms);
        ttft_on[prefix_lens[k]].push_back(run_set(*on, {p}, one)[0].first_ms);
      }
    }
  }
  hit_tokens = on->metrics().prefix_cache_hits - hits_before;

  SamplingParams gen;
  gen.temperature = 0.0f;
  gen.max_tokens = 64;
  gen.ignore_eos = true;
  std::vector<double> tps_on, tps_off;
  double tp_seconds = 0;
  int64_t tp_steps = 0;
  for (int32_t r = 0; r < tp_rounds; ++r) {
    // Fresh random prompts every round: nothing to hit (0% hit rate). Alternating order.
    const auto prompts = random_prompts(16, 128, vocab, 5000 + r);
    for (bool cache : {r % 2 == 0, r % 2 != 0}) {
      Engine& engine = cache ? *on : *off;
      const int64_t steps_before = engine.metrics().num_steps;
      const auto t0 = std::chrono::steady_clock::now();
      const auto t = run_set(engine, prompts, gen);
      const double s = ms_since(t0) / 1000.0;
      tp_seconds += s;
      tp_steps += engine.metrics().num_steps - steps_before;
      int64_t n = 0;
      for (const Timed& x : t) n += x.num_tokens;
      (cache ? tps_on : tps_off).push_back(static_cast<double>(n) / s);
    }
  }

  std::printf("B8 prefix cache: %s, %d threads, %d rounds (median (min-max))\n", model.c_str(), threads, rounds);
  std::printf("TTFT of one request: cached prefix (cache on) vs cache off; 16-token suffix\n");
  std::printf("%8s %24s %24s %22s\n", "prefix", "TTFT on ms", "TTFT off ms", "off/on");
  for (int32_t P : prefix_lens) {
    std::vector<double> ratios;
    for (size_t i = 0; i < ttft_on[P].size(); ++i) ratios.push_back(ttft_off[P][i] / ttft_on[P][i]);
    std::printf("%8d %24s %24s %22s\n", P, fmt_summary(summarize(ttft_on[P])).c_str(),
                fmt_summary(summarize(ttft_off[P])).c_str(), fmt_summary(summarize(ratios), "%.1fx").c_str());
  }
  std::printf("prefix-cache hit tokens over the measured requests: %lld\n", static_cast<long long>(hit_tokens));
  std::vector<double> ratios;
  for (size_t i = 0; i < tps_on.size(); ++i) ratios.push_back(tps_on[i] / tps_off[i]);
  std::printf("0%% hit rate, 16 x (128 in, 64 out), %d rounds: output tok/s cache on %s, off %s, on/off %s\n",
              tp_rounds, fmt_summary(summarize(tps_on)).c_str(), fmt_summary(summarize(tps_off)).c_str(),
              fmt_summary(summarize(ratios), "%.3f").c_str());

  // Part 3, alternating on/off in blocks of 20 workloads so drift hits both alike.
  std::vector<double> us_on, us_off;
  int64_t steps_on = 0, steps_off = 0;
  for (int32_t r = 0; r < 10; ++r) {
    for (bool cache : {r % 2 == 0, r % 2 != 0}) {
      int64_t n = 0;
      const double us = bookkeeping_us_per_step(cache, 20, vocab, n);
      (cache ? us_on : us_off).push_back(us);
      (cache ? steps_on : steps_off) = n;
    }
  }
  const Summary on_us = summarize(us_on), off_us = summarize(us_off);
  const double step_ms = tp_seconds * 1000.0 / static_cast<double>(std::max<int64_t>(tp_steps, 1));
  std::printf("0%% hit bookkeeping (real scheduler + KV manager, fake runner, 10 x 20 workloads of part 2's shape,\n"
              "  %lld steps each side): cache on %.2f us/step (%.2f-%.2f), off %.2f us/step (%.2f-%.2f);\n"
              "  extra %.2f us per step = %.4f%% of the engine's mean step of %.2f ms in part 2\n",
              static_cast<long long>(steps_on), on_us.median, on_us.min, on_us.max, off_us.median, off_us.min,
              off_us.max, on_us.median - off_us.median,
              100.0 * (on_us.median - off_us.median) / (step_ms * 1000.0), step_ms);
  return 0;
}
