// Sliding-window KV memory, measured in the engine (issue 24): Gemma-3-270M at an 8,192-token
// context, the same KV budget with the local layers' blocks freed behind their window (the hybrid
// KV cache, the default) vs kept (--disable-hybrid-kv-cache-manager), in one invocation, arms
// interleaved round by round. Per arm:
//   1. one request alone to the full context: the KV bytes it held at its peak (blocks x block
//      bytes), i.e. what a sequence really costs, next to kv-plan's arithmetic for the same file;
//   2. N requests of the full context at once (distinct random prompts, prefix caching off): the
//      most that ran at once (the concurrency the budget buys), preemptions, wall time, tok/s.
//      Each request is a long prompt and a long output (default 7,936 + 256): chunked prefill takes
//      the prompts one after another (N x 7,936 / 512 = 62 steps for 4), so the output must outlast
//      every later prompt's prefill for the requests to overlap at all; with 256 decode steps each
//      they all meet in the decode phase, near the full context, and the KV budget alone decides how
//      many run at once. (With 32-token outputs, the first version, at most ~3 overlapped in either
//      arm: the pipeline, not memory, set the count.)
// Greedy tokens of the two arms are compared (the layouts must not change outputs).
//
//   build/release/bench/bench_sliding_window [--model models/gemma-3-270m-q4_k_m.gguf]
//       [--kv-cache-mib 150] [--context 8192] [--requests 4] [--output-len 256] [--threads 2] [--rounds 1]
//   150 MiB holds 1.04 sequences of 8,192 tokens with every block kept (144 MiB each) and 4.73 with
//   the windows freed (31.7 MiB each, kv-plan's figure). The requests are as many as the freed
//   layout holds: one more than fits makes the scheduler admit it into the last free blocks, run
//   out mid-prefill, preempt it and admit it again (recompute thrash: 15 preemptions and 3x the
//   time in a 6-in-160-MiB trial), which measures the preemption policy rather than the layout.
//   Kept, the 6 MiB left beside the one sequence are less than one 512-token chunk, so the second
//   request waits instead of thrashing.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

#include "bench_engine_util.h"

using namespace tessera;
using namespace tessera::bench;

namespace {

struct Args {
  std::string model = "models/gemma-3-270m-q4_k_m.gguf";
  int64_t kv_mib = 150;
  int32_t context = 8192;
  int32_t requests = 4;
  int32_t output_len = 256;
  int32_t threads = 2;
  int32_t rounds = 1;
};

std::unique_ptr<Engine> make(const Args& a, bool hybrid) {
  EngineConfig c;
  c.model_path = a.model;
  c.num_threads = a.threads;
  c.kv_cache_bytes = a.kv_mib << 20;
  c.max_model_len = a.context;
  c.max_num_seqs = a.requests;
  c.enable_prefix_caching = false;  // distinct prompts anyway; no cached blocks to count
  c.hybrid_kv_cache = hybrid;
  auto e = Engine::create(c);
  if (!e) {
    std::fprintf(stderr, "error: %s\n", e.error().message.c_str());
    std::exit(1);
  }
  return std::move(*e);
}

MetricsSnapshot settled(Engine& e) {  // the last step's metrics are published after its outputs
  for (int i = 0; i < 200 && (e.num_unfinished_requests() > 0 || e.metrics().num_requests_running > 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return e.metrics();
}

struct ArmResult {
  double bytes_alone = 0;        // peak KV bytes of one full-context request alone
  int32_t peak_running = 0;      // most sequences the scheduler ran at once (prefilling or decoding)
  int32_t decoding_at_once = 0;  // most requests between their first and last token at once
  int64_t preemptions = 0;
  double seconds = 0;            // wall time of the N requests
  double tok_s = 0;              // prompt + output tokens / s
  int64_t window_releases = 0;
  double planned = 0;            // full-context sequences the budget holds, by the engine's own sizing
  std::vector<std::vector<int32_t>> tokens;
};

// The greedy tokens of each prompt, all submitted at once, and the most requests that were decoding
// at the same moment: each stream is read on its own thread, a request decodes from its first
// token to its last, and the count is the deepest overlap of those intervals. A request that is
// still prefilling (or recomputing after a preemption) before its first token is not counted: the
// concurrency a KV budget buys is how many sequences it holds while they generate.
struct GreedyRun {
  std::vector<std::vector<int32_t>> tokens;
  int32_t decoding_at_once = 0;
};

GreedyRun greedy_tokens(Engine& e, const std::vector<std::vector<int32_t>>& prompts, const SamplingParams& p) {
  using Clock = std::chrono::steady_clock;
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& q : prompts) streams.push_back(*e.submit({q, p, ""}));
  GreedyRun run;
  run.tokens.resize(streams.size());
  std::vector<Clock::time_point> first(streams.size()), last(streams.size());
  std::vector<std::thread> readers;
  for (size_t i = 0; i < streams.size(); ++i) {
    readers.emplace_back([&, i] {
      bool seen = false;
      while (auto ev = streams[i]->next()) {
        if (ev->token_ids.empty()) continue;
        if (!seen) first[i] = Clock::now();
        seen = true;
        last[i] = Clock::now();
        run.tokens[i].insert(run.tokens[i].end(), ev->token_ids.begin(), ev->token_ids.end());
      }
    });
  }
  for (auto& t : readers) t.join();
  std::vector<std::pair<Clock::time_point, int>> edges;  // +1 at a first token, -1 after a last
  for (size_t i = 0; i < streams.size(); ++i) {
    if (static_cast<int32_t>(run.tokens[i].size()) != p.max_tokens) {
      std::fprintf(stderr, "error: a request produced %zu of %d tokens\n", run.tokens[i].size(), p.max_tokens);
      std::exit(1);
    }
    edges.push_back({first[i], +1});
    edges.push_back({last[i], -1});
  }
  std::sort(edges.begin(), edges.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second > b.second;  // ties: start before end
  });
  int32_t now = 0;
  for (const auto& [t, delta] : edges) run.decoding_at_once = std::max(run.decoding_at_once, now += delta);
  return run;
}

ArmResult run_arm(const Args& a, bool hybrid, const std::vector<std::vector<int32_t>>& prompts) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = a.output_len;
  p.ignore_eos = true;
  ArmResult r;
  {
    auto e = make(a, hybrid);
    greedy_tokens(*e, {prompts[0]}, p);
    const MetricsSnapshot m = settled(*e);
    const double block_bytes = static_cast<double>(e->model_info().kv_cache_bytes) / e->model_info().num_kv_blocks;
    r.bytes_alone = m.peak_num_kv_blocks_used * block_bytes;
    r.planned = e->model_info().max_concurrency;
  }
  auto e = make(a, hybrid);
  const auto t0 = std::chrono::steady_clock::now();
  GreedyRun run = greedy_tokens(*e, prompts, p);
  r.tokens = std::move(run.tokens);
  r.decoding_at_once = run.decoding_at_once;
  r.seconds = ms_since(t0) / 1000.0;
  const MetricsSnapshot m = settled(*e);
  r.peak_running = m.peak_num_requests_running;
  r.preemptions = m.num_preemptions;
  r.window_releases = m.num_kv_window_releases;
  r.tok_s = static_cast<double>(m.prompt_tokens + m.generation_tokens) / r.seconds;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--model") a.model = v;
    else if (k == "--kv-cache-mib") a.kv_mib = std::atoll(v);
    else if (k == "--context") a.context = std::atoi(v);
    else if (k == "--requests") a.requests = std::atoi(v);
    else if (k == "--output-len") a.output_len = std::atoi(v);
    else if (k == "--threads") a.threads = std::atoi(v);
    else if (k == "--rounds") a.rounds = std::atoi(v);
    else {
      std::fprintf(stderr, "unknown flag %s\n", k.c_str());
      return 2;
    }
  }
  auto probe = make(a, true);
  const ModelInfo info = probe->model_info();
  std::string windows;
  for (int32_t w : info.kv_cache_group_windows) windows += (windows.empty() ? "" : ",") + std::to_string(w);
  std::printf("model %s: %d layers, KV-cache groups (windows) [%s], %d layers per block; KV budget %lld MiB; "
              "context %d; %d requests x (%d prompt + %d out); %d threads\n",
              info.name.c_str(), info.num_layers, windows.c_str(), info.kv_layers_per_block,
              static_cast<long long>(a.kv_mib), a.context, a.requests, a.context - a.output_len, a.output_len,
              a.threads);
  probe.reset();
  const auto prompts = random_prompts(a.requests, a.context - a.output_len, info.vocab_size, 24);

  std::map<bool, std::vector<ArmResult>> results;
  for (int32_t round = 0; round < a.rounds; ++round) {
    for (bool hybrid : round % 2 == 0 ? std::vector<bool>{true, false} : std::vector<bool>{false, true}) {
      results[hybrid].push_back(run_arm(a, hybrid, prompts));
      const ArmResult& r = results[hybrid].back();
      std::fprintf(stderr, "round %d %s: alone %.1f MiB, decoding at once %d, peak running %d, preemptions %lld, %.1f s\n",
                   round, hybrid ? "freed" : "kept", r.bytes_alone / (1 << 20), r.decoding_at_once, r.peak_running,
                   static_cast<long long>(r.preemptions), r.seconds);
    }
  }
  const bool same = results[true][0].tokens == results[false][0].tokens;
  std::printf("\n| arm | KV MiB per sequence, alone (measured) | sequences the budget holds (planned) | "
              "decoding at once (of %d) | scheduler's peak running | preemptions | wall s | tok/s | window releases |\n"
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
              a.requests);
  for (bool hybrid : {false, true}) {
    std::vector<double> mib, decoding, running, seconds, tok_s;
    for (const ArmResult& r : results[hybrid]) {
      mib.push_back(r.bytes_alone / (1 << 20));
      decoding.push_back(r.decoding_at_once);
      running.push_back(r.peak_running);
      seconds.push_back(r.seconds);
      tok_s.push_back(r.tok_s);
    }
    std::printf("| %s | %s | %.1f | %s | %s | %lld | %s | %s | %lld |\n", hybrid ? "windows freed (hybrid)" : "windows kept",
                fmt_summary(summarize(mib)).c_str(), results[hybrid][0].planned, fmt_summary(summarize(decoding), "%.0f").c_str(),
                fmt_summary(summarize(running), "%.0f").c_str(),
                static_cast<long long>(results[hybrid][0].preemptions), fmt_summary(summarize(seconds)).c_str(),
                fmt_summary(summarize(tok_s)).c_str(), static_cast<long long>(results[hybrid][0].window_releases));
  }
  std::vector<double> ratio;
  for (size_t i = 0; i < results[true].size(); ++i) {
    ratio.push_back(static_cast<double>(results[true][i].decoding_at_once) /
                    std::max(1, results[false][i].decoding_at_once));
  }
  std::printf("\nsequences decoding at once, freed / kept: %s; KV per sequence, kept / freed: %.2fx; greedy tokens %s\n",
              fmt_summary(summarize(ratio), "%.2f").c_str(), results[false][0].bytes_alone / results[true][0].bytes_alone,
              same ? "identical in both arms" : "DIFFER between the arms");
  return same ? 0 : 1;
}
