#include "cli/offline_bench.h"

#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>

#include "cli/engine_flags.h"
#include "util/check.h"
#include "util/timer.h"

namespace tessera::cli {


namespace {

struct Workload {
  int32_t num_requests = 64;
  int32_t input_len = 128, output_len = 128;
  double input_range = 0.5, output_range = 0.9;  // lengths uniform in len * [1 - r, 1 + r]
  // "uniform": output lengths as above. "geometric": what a constant per-token stop probability
  // (EOS at rate 1 / output_len) gives: 1 + Geometric(1 / output_len), mean output_len, capped
  // at 8 x output_len; chat outputs have this long tail, which is where static batching idles.
  std::string output_dist = "uniform";
  uint64_t seed = 0;
};

struct RunResult {
  double seconds = 0, output_tok_s = 0, total_tok_s = 0, ttft_p50_ms = 0, tpot_p50_ms = 0, occupancy = 0;
  int64_t output_tokens = 0;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(std::min<double>(v.size() - 1, p * (v.size() - 1) + 0.5))];
}

// Prompts of random token ids (avoiding the first 256 ids: control and byte tokens).
std::vector<std::pair<std::vector<int32_t>, int32_t>> make_requests(const Workload& w, int32_t vocab) {
  std::mt19937_64 rng(w.seed);
  auto draw_len = [&](int32_t len, double range) {
    const int32_t lo = std::max(1, static_cast<int32_t>(len * (1.0 - range)));
    const int32_t hi = std::max(lo, static_cast<int32_t>(len * (1.0 + range)));
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
  };
  std::vector<std::pair<std::vector<int32_t>, int32_t>> reqs;
  for (int32_t i = 0; i < w.num_requests; ++i) {
    std::vector<int32_t> ids(static_cast<size_t>(draw_len(w.input_len, w.input_range)));
    for (int32_t& id : ids) id = std::uniform_int_distribution<int32_t>(256, vocab - 1)(rng);
    int32_t out_len = 0;
    if (w.output_dist == "geometric") {
      const double p = 1.0 / std::max(1, w.output_len);
      out_len = std::min(1 + std::geometric_distribution<int32_t>(p)(rng), 8 * w.output_len);
    } else {
      out_len = draw_len(w.output_len, w.output_range);
    }
    reqs.emplace_back(std::move(ids), out_len);
  }
  return reqs;
}

// The workload of round `round`: its own prompts (the seed mixed with the round), the same for
// every engine of that round. The engines live across rounds with the prefix cache on, so a
// repeated prompt would be a cache hit and every round after the first would skip its prefill.
Workload round_workload(Workload w, int32_t round) {
  w.seed += static_cast<uint64_t>(round) * 0x9E3779B97F4A7C15ull;
  return w;
}

RunResult run_once(Engine& engine, const Workload& w) {
  const auto reqs = make_requests(w, engine.model_info().vocab_size);
  const MetricsSnapshot before = engine.metrics();
  const Clock::time_point start = Clock::now();
  // One message for the whole workload: every request is queued before the first step (with one
  // submit() each, a step could start in between and, under the static policy, seal a short
  // first batch).
  std::vector<GenerateRequest> batch;
  for (const auto& [ids, out_len] : reqs) {
    SamplingParams p;
    p.temperature = 0.0f;
    p.max_tokens = out_len;
    p.ignore_eos = true;
    batch.push_back({ids, p, ""});
  }
  auto submitted = engine.submit_all(std::move(batch));
  TESSERA_CHECK(submitted.ok(), "bench request refused: {}", submitted.ok() ? "" : submitted.error().message);
  const std::vector<std::shared_ptr<RequestStream>> streams = std::move(submitted.value());
  std::vector<double> ttft, tpot;
  int64_t out_tokens = 0, in_tokens = 0;
  // One reader thread per stream would cost 64 threads; read them in turn instead, blocking (up to
  // 5 ms) on the first unfinished one: the engine emits a step's tokens together, so one wake-up
  // per step serves them all, where polling on a timer (thousands of wake-ups a second) took a
  // core from the engine on a 2-core box. A token is stamped at most 5 ms late.
  std::vector<double> first(streams.size(), -1), last(streams.size(), 0);
  std::vector<int64_t> count(streams.size(), 0);
  std::vector<bool> done(streams.size(), false);
  size_t remaining = streams.size();
  while (remaining > 0) {
    const size_t first_open = static_cast<size_t>(std::find(done.begin(), done.end(), false) - done.begin());
    for (size_t i = first_open; i < streams.size(); ++i) {
      if (done[i]) continue;
      const auto wait = std::chrono::milliseconds(i == first_open ? 5 : 0);
      for (auto ev = streams[i]->next(wait); ev; ev = streams[i]->next(std::chrono::milliseconds(0))) {
        const double t = ms_since(start);
        if (!ev->token_ids.empty()) {
          if (first[i] < 0) first[i] = t;
          last[i] = t;
          count[i] += static_cast<int64_t>(ev->token_ids.size());
        }
        if (ev->finish_reason != FinishReason::kNone) {
          done[i] = true;
          --remaining;
          break;
        }
      }
    }
  }
  RunResult r;
  r.seconds = ms_since(start) / 1000.0;
  for (size_t i = 0; i < streams.size(); ++i) {
    out_tokens += count[i];
    in_tokens += static_cast<int64_t>(reqs[i].first.size());
    ttft.push_back(first[i]);
    if (count[i] > 1) tpot.push_back((last[i] - first[i]) / static_cast<double>(count[i] - 1));
  }
  const MetricsSnapshot after = engine.metrics();
  r.output_tokens = out_tokens;
  r.output_tok_s = out_tokens / r.seconds;
  r.total_tok_s = (out_tokens + in_tokens) / r.seconds;
  r.ttft_p50_ms = percentile(ttft, 0.5);
  r.tpot_p50_ms = percentile(tpot, 0.5);
  const double used = static_cast<double>(after.lane_steps_used - before.lane_steps_used);
  const double total = static_cast<double>(after.lane_steps_total - before.lane_steps_total);
  r.occupancy = total > 0 ? used / total : 0.0;
  return r;
}

std::unique_ptr<Engine> make_engine(EngineConfig c, const std::string& policy, int32_t max_num_seqs) {
  c.policy = policy;
  c.max_num_seqs = max_num_seqs;
  auto e = Engine::create(c);
  if (!e) {
    std::fprintf(stderr, "tessera bench: error: %s\n", e.error().message.c_str());
    return nullptr;
  }
  return std::move(*e);
}

}  // namespace

int offline_bench_main(const std::string& mode, int argc, char** argv) {
  CLI::App app{"tessera bench " + mode};
  EngineConfig config;
  std::string kv_cache_text, policy = "both", json_out, plot_out;
  Workload w;
  int32_t rounds = 3;
  std::vector<int32_t> sweep = {1, 2, 4, 8, 16, 32};
  add_engine_flags(app, config, kv_cache_text);
  app.add_option("--num-prompts", w.num_requests, "requests in the workload");
  app.add_option("--input-len", w.input_len, "mean prompt tokens");
  app.add_option("--output-len", w.output_len, "mean output tokens");
  app.add_option("--input-range", w.input_range, "prompt lengths uniform in len*(1 +- range)");
  app.add_option("--output-range", w.output_range, "output lengths uniform in len*(1 +- range)");
  app.add_option("--output-dist", w.output_dist, "output lengths: uniform (--output-range) or geometric (mean --output-len)")
      ->check(CLI::IsMember({"uniform", "geometric"}));
  app.add_option("--seed", w.seed, "workload seed (each round draws its own prompts from it)");
  app.add_option("--rounds", rounds, "interleaved rounds");
  app.add_option("--compare-policy", policy, "throughput: continuous, static, or both (interleaved)");
  app.add_option("--sweep", sweep, "sweep: max_num_seqs values");
  app.add_option("--json-out", json_out, "write results as JSON");
  app.add_option("--plot-out", plot_out, "sweep: write the throughput/TPOT curve as PNG (matplotlib)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (const std::string err = finish_engine_flags(config, kv_cache_text); !err.empty()) {
    std::fprintf(stderr, "tessera bench: error: %s\n", err.c_str());
    return 1;
  }
  nlohmann::json results = nlohmann::json::array();
  if (mode == "throughput") {
    std::vector<std::string> policies = policy == "both" ? std::vector<std::string>{"continuous", "static"}
                                                         : std::vector<std::string>{policy};
    std::vector<std::unique_ptr<Engine>> engines;
    for (const auto& p : policies) {
      engines.push_back(make_engine(config, p, config.max_num_seqs));
      if (!engines.back()) return 1;
    }
    std::vector<std::vector<RunResult>> runs(policies.size());
    for (int32_t r = 0; r < rounds; ++r) {
      for (size_t i = 0; i < policies.size(); ++i) runs[i].push_back(run_once(*engines[i], round_workload(w, r)));
    }
    const std::string output_shape = w.output_dist == "geometric"
                                         ? "geometric, mean"
                                         : "+-" + std::to_string(static_cast<int>(w.output_range * 100)) + "%";
    std::printf("workload: %d requests, input %d (+-%.0f%%), output %d (%s), max_num_seqs %d, %d rounds\n",
                w.num_requests, w.input_len, w.input_range * 100, w.output_len, output_shape.c_str(),
                config.max_num_seqs, rounds);
    std::printf("%-11s %12s %12s %12s %12s %10s\n", "policy", "out tok/s", "total tok/s", "TTFT p50 ms",
                "TPOT p50 ms", "occupancy");
    std::vector<double> medians;
    for (size_t i = 0; i < policies.size(); ++i) {
      std::vector<double> tps;
      for (const RunResult& x : runs[i]) tps.push_back(x.output_tok_s);
      const RunResult& mid = runs[i][runs[i].size() / 2];
      medians.push_back(percentile(tps, 0.5));
      std::printf("%-11s %12.1f %12.1f %12.1f %12.2f %9.1f%%\n", policies[i].c_str(), medians.back(),
                  mid.total_tok_s, mid.ttft_p50_ms, mid.tpot_p50_ms, mid.occupancy * 100);
      for (const RunResult& x : runs[i]) {
        results.push_back({{"policy", policies[i]}, {"output_tok_s", x.output_tok_s}, {"ttft_p50_ms", x.ttft_p50_ms},
                           {"tpot_p50_ms", x.tpot_p50_ms}, {"occupancy", x.occupancy}});
      }
    }
    if (policies.size() == 2) {
      std::vector<double> ratios;
      for (int32_t r = 0; r < rounds; ++r) ratios.push_back(runs[0][r].output_tok_s / runs[1][r].output_tok_s);
      std::printf("continuous / static output tok/s: %.2fx (min %.2fx, max %.2fx)\n", percentile(ratios, 0.5),
                  *std::min_element(ratios.begin(), ratios.end()), *std::max_element(ratios.begin(), ratios.end()));
    }
  } else {
    std::printf("%-12s %12s %12s %12s %10s\n", "max_num_seqs", "out tok/s", "TPOT p50 ms", "TTFT p50 ms", "occupancy");
    for (int32_t b : sweep) {
      auto engine = make_engine(config, "continuous", b);
      if (!engine) return 1;
      std::vector<RunResult> runs;
      for (int32_t r = 0; r < rounds; ++r) runs.push_back(run_once(*engine, round_workload(w, r)));
      std::sort(runs.begin(), runs.end(), [](const RunResult& a, const RunResult& c) { return a.output_tok_s < c.output_tok_s; });
      const RunResult& mid = runs[runs.size() / 2];
      std::printf("%-12d %12.1f %12.2f %12.1f %9.1f%%\n", b, mid.output_tok_s, mid.tpot_p50_ms, mid.ttft_p50_ms,
                  mid.occupancy * 100);
      std::fflush(stdout);
      results.push_back({{"max_num_seqs", b}, {"output_tok_s", mid.output_tok_s}, {"tpot_p50_ms", mid.tpot_p50_ms},
                         {"ttft_p50_ms", mid.ttft_p50_ms}, {"occupancy", mid.occupancy}});
    }
  }
  if (!json_out.empty() || !plot_out.empty()) {
    const std::string path = json_out.empty() ? plot_out + ".json" : json_out;
    std::ofstream(path) << results.dump(1) << "\n";
    if (!plot_out.empty()) {
      const std::string cmd = "python3 scripts/plot_sweep.py " + path + " " + plot_out;
      if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "tessera bench: plotting failed (is matplotlib installed?)\n");
    }
  }
  return 0;
}

}  // namespace tessera::cli
