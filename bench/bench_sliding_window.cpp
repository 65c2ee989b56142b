// Sliding-window KV memory, measured in the engine (issue 24): Gemma-3-270M at an 8,192-token
// context, the same KV budget with the local layers' blocks freed behind their window (the hybrid
// KV cache, the default) vs kept (--disable-hybrid-kv-cache-manager), in one invocation, arms
// interleaved round by round. Per arm:
//   1. one request alone to the full context: the KV bytes it held at its peak (blocks x block
//      bytes), i.e. what a sequence really costs, next to kv-plan's arithmetic for the same file;
//   2. N requests of the full context at once (distinct random prompts, prefix caching off): the
//      most that ran at once (the concurrency the budget buys), preemptions, wall time, tok/s.
// Greedy tokens of the two arms are compared (the layouts must not change outputs).
//
//   build/release/bench/bench_sliding_window [--model models/gemma-3-270m-q4_k_m.gguf]
//       [--kv-cache-mib 256] [--context 8192] [--requests 10] [--output-len 32] [--threads 2] [--rounds 1]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "bench_engine_util.h"
#include <thread>

using namespace tessera;
using namespace tessera::bench;

namespace {

struct Args {
  std::string model = "models/gemma-3-270m-q4_k_m.gguf";
  int64_t kv_mib = 256;
  int32_t context = 8192;
  int32_t requests = 10;
  int32_t output_len = 32;
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
  int32_t peak_running = 0;      // most sequences running at once, N requests
  int64_t preemptions = 0;
  double seconds = 0;            // wall time of the N requests
  double tok_s = 0;              // prompt + output tokens / s
  int64_t window_releases = 0;
  std::vector<std::vector<int32_t>> tokens;
};

std::vector<std::vector<int32_t>> greedy_tokens(Engine& e, const std::vector<std::vector<int32_t>>& prompts,
                                                const SamplingParams& p) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& q : prompts) streams.push_back(*e.submit({q, p, ""}));
  std::vector<std::vector<int32_t>> out;
  for (auto& s : streams) {
    std::vector<int32_t> t;
    while (auto ev = s->next()) t.insert(t.end(), ev->token_ids.begin(), ev->token_ids.end());
    if (static_cast<int32_t>(t.size()) != p.max_tokens) {
      std::fprintf(stderr, "error: a request produced %zu of %d tokens\n", t.size(), p.max_tokens);
      std::exit(1);
    }
    out.push_back(std::move(t));
  }
  return out;
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
  }
  auto e = make(a, hybrid);
  const auto t0 = std::chrono::steady_clock::now();
  r.tokens = greedy_tokens(*e, prompts, p);
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
      std::fprintf(stderr, "round %d %s: alone %.1f MiB, peak running %d, preemptions %lld, %.1f s\n", round,
                   hybrid ? "freed" : "kept", r.bytes_alone / (1 << 20), r.peak_running,
                   static_cast<long long>(r.preemptions), r.seconds);
    }
  }
  const bool same = results[true][0].tokens == results[false][0].tokens;
  std::printf("\n| arm | KV MiB per sequence, alone (measured) | sequences at once (of %d) | preemptions | "
              "wall s | tok/s | window releases |\n| --- | --- | --- | --- | --- | --- | --- |\n",
              a.requests);
  for (bool hybrid : {false, true}) {
    std::vector<double> mib, running, seconds, tok_s;
    for (const ArmResult& r : results[hybrid]) {
      mib.push_back(r.bytes_alone / (1 << 20));
      running.push_back(r.peak_running);
      seconds.push_back(r.seconds);
      tok_s.push_back(r.tok_s);
    }
    std::printf("| %s | %s | %s | %lld | %s | %s | %lld |\n", hybrid ? "windows freed (hybrid)" : "windows kept",
                fmt_summary(summarize(mib)).c_str(), fmt_summary(summarize(running), "%.0f").c_str(),
                static_cast<long long>(results[hybrid][0].preemptions), fmt_summary(summarize(seconds)).c_str(),
                fmt_summary(summarize(tok_s)).c_str(), static_cast<long long>(results[hybrid][0].window_releases));
  }
  std::vector<double> ratio;
  for (size_t i = 0; i < results[true].size(); ++i) {
    ratio.push_back(static_cast<double>(results[true][i].peak_running) / std::max(1, results[false][i].peak_running));
  }
  std::printf("\nsequences at once, freed / kept: %s; KV per sequence, kept / freed: %.2fx; greedy tokens %s\n",
              fmt_summary(summarize(ratio), "%.2f").c_str(), results[false][0].bytes_alone / results[true][0].bytes_alone,
              same ? "identical in both arms" : "DIFFER between the arms");
  return same ? 0 : 1;
}
