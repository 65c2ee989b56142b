// B8 prefix cache, through the Engine on SmolLM2 (interleaved rounds, cache on vs cache off):
//  1. TTFT of one request whose prefix of P = 512, 1024, 2048 tokens is cached (cache on: the
//     prefix was served once before with another suffix) vs the same request with the cache off;
//     16-token suffixes, 1 output token, the request alone. Target: >= 20x lower at P = 2048.
//  2. Throughput at 0% hit rate: 16 requests of 128 unique random tokens, 64 output tokens each,
//     all at once, cache on vs off. Target: <= 1% loss.
//
//   build-x/bench/bench_prefix_cache [--model M] [--rounds 3] [--tp-rounds 6] [--threads 2]
#include <cstdio>
#include <cstdlib>
#include <map>

#include "bench_engine_util.h"

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
  for (int32_t r = 0; r < tp_rounds; ++r) {
    // Fresh random prompts every round: nothing to hit (0% hit rate). Alternating order.
    const auto prompts = random_prompts(16, 128, vocab, 5000 + r);
    for (bool cache : {r % 2 == 0, r % 2 != 0}) {
      const auto t0 = std::chrono::steady_clock::now();
      const auto t = run_set(cache ? *on : *off, prompts, gen);
      const double s = ms_since(t0) / 1000.0;
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
  return 0;
}
