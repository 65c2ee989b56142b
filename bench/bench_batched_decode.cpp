// B4 batched decode: B = 1, 2, 4, 8, 16, 32 sequences of 128 prompt tokens decode 128 tokens each
// (greedy, EOS ignored) through the Engine. The whole batch's prefill fits one step (token budget
// = 32 x 128), so every sequence gets its first token in the same step; aggregate decode tok/s is
// B x (out - 1) / (last token - first token). Scaling S(B)/S(1) from the per-round medians.
// A second table gives the same decode tokens per CPU second of the process (all threads), which
// a loaded machine moves much less than wall time: the measure for A/B runs of kernel changes.
// The peer (llama.cpp batched decode through llama-cpp-python, bench/llama_batched_decode.py) runs
// interleaved with ours, round by round; when it cannot run, its column says so.
//
//   build-x/bench/bench_batched_decode [--model M] [--rounds 3] [--threads 2] [--batches 1,2,4,...]
//                                      [--kv-dtype f16|f32|q8] (our KV cache; the peer's stays f16)
//                                      [--profile] (per-op ms per decode step and per prefill step for
//                                      each B, last round)
//                                      [--loras F1,F2,...] [--adapter-counts 0,1,2,4,8]: LoRA mixed
//                                      batches instead: each B with its requests spread round-robin
//                                      over the first k adapters (0 = all on the base model), rounds
//                                      interleaved; tok/s and tok per CPU s, and each vs k = 0 per round
//                                      [--json-out FILE]: also write every round's decode tok/s and tok
//                                      per CPU s per B as JSON (for bench/bench_roofline.py)
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <cstdlib>
#include <map>
#include <sstream>

#include "bench_engine_util.h"
#include "util/op_profile.h"

using namespace tessera;
using namespace tessera::bench;

namespace {

// Runs the peer once; returns its decode tok/s or a negative value when it failed.
double run_peer(const std::string& model, int32_t b, int32_t in, int32_t out, int32_t threads) {
  const std::string cmd = "python3 bench/llama_batched_decode.py " + model + " --batch " + std::to_string(b) +
                          " --input-len " + std::to_string(in) + " --output-len " + std::to_string(out) +
                          " --threads " + std::to_string(threads) + " 2>/dev/null";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return -1;
  char line[512];
  std::string text;
  while (std::fgets(line, sizeof line, f)) text += line;
  if (pclose(f) != 0) return -1;
  const auto at = text.find("\"decode_tok_s\": ");
  return at == std::string::npos ? -1 : std::atof(text.c_str() + at + 16);
}

// One phase of the op profile as text: one line per op with its ms per step of that phase (the
// prefill phase is the one step that prefills every sequence's prompt: B x input-len tokens).
std::string profile_table(profile::Phase phase) {
  const profile::Profile& p = profile::global();
  const double steps = static_cast<double>(p.steps[static_cast<int>(phase)]);
  if (steps == 0) return "  (no steps)\n";
  std::vector<profile::OpRow> ops;
  const double rest = profile::phase_rows(phase, ops);
  std::string out;
  char line[128];
  for (const profile::OpRow& r : ops) {
    std::snprintf(line, sizeof line, "  %-24s %8.3f\n", profile::op_name(r.op), r.ms / steps);
    out += line;
  }
  std::snprintf(line, sizeof line, "  %-24s %8.3f\n", "runner, other", rest / steps);
  return out + line;
}

// --loras' i-th file is served as "l<i>".
std::string adapter_name(int32_t i) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "l%d", i);
  return buf;
}

// The decode phase of one set: B x (out - 1) tokens from the moment the last sequence got its
// first token to the last token; {tok/s, tok per CPU second}.
std::pair<double, double> decode_rates(const std::vector<Timed>& t, int32_t b, int32_t out) {
  double first = 0, last = 0, first_cpu = 0, last_cpu = 0;
  for (const Timed& x : t) {
    if (x.first_ms > first) first = x.first_ms, first_cpu = x.first_cpu_s;
    if (x.last_ms > last) last = x.last_ms, last_cpu = x.last_cpu_s;
  }
  return {b * (out - 1) / ((last - first) / 1000.0), b * (out - 1) / (last_cpu - first_cpu)};
}

// --loras: each B with its requests spread over k adapters, k = 0 (the base model) first in every
// round; the ratios to k = 0 are taken round by round.
int run_lora_mix(Engine& e, const SamplingParams& p, const std::vector<int32_t>& batches,
                 const std::vector<int32_t>& counts, int32_t num_loras, int32_t rounds, int32_t in, int32_t out) {
  std::map<std::pair<int32_t, int32_t>, std::vector<std::pair<double, double>>> rate;  // (B, k) -> per round
  for (int32_t r = 0; r < rounds; ++r) {
    for (int32_t b : batches) {
      const auto prompts = random_prompts(b, in, e.model_info().vocab_size, 1000 + r * 64 + b);
      for (int32_t k : counts) {
        std::vector<std::string> names(static_cast<size_t>(b));
        for (int32_t i = 0; i < b && k > 0; ++i) names[static_cast<size_t>(i)] = adapter_name(i % std::min(k, num_loras));
        rate[{b, k}].push_back(decode_rates(run_set(e, prompts, p, names), b, out));
        std::fprintf(stderr, "round %d B=%d adapters=%d: %.1f tok/s (%.1f tok per CPU s)\n", r, b, k,
                     rate[{b, k}].back().first, rate[{b, k}].back().second);
      }
    }
  }
  std::printf("LoRA mixed batches: %d in / %d out, %d rounds (median (min-max); ratios per round vs the base model)\n",
              in, out, rounds);
  std::printf("%4s %9s %24s %20s %24s %20s\n", "B", "adapters", "decode tok/s", "vs base", "tok per CPU s", "vs base");
  for (int32_t b : batches) {
    const auto& base = rate[{b, counts.front()}];
    for (int32_t k : counts) {
      std::vector<double> wall, cpu, wall_r, cpu_r;
      const auto& v = rate[{b, k}];
      for (size_t i = 0; i < v.size(); ++i) {
        wall.push_back(v[i].first);
        cpu.push_back(v[i].second);
        wall_r.push_back(v[i].first / base[i].first);
        cpu_r.push_back(v[i].second / base[i].second);
      }
      std::printf("%4d %9d %24s %20s %24s %20s\n", b, k, fmt_summary(summarize(wall)).c_str(),
                  fmt_summary(summarize(wall_r), "%.2f").c_str(), fmt_summary(summarize(cpu)).c_str(),
                  fmt_summary(summarize(cpu_r), "%.2f").c_str());
    }
  }
  return 0;
}

// --json-out: {"model", "input_len", "output_len", "threads", "tok_per_s": {"B": [per round]},
// "tok_per_cpu_s": {"B": [per round]}} (aggregate decode tokens/s, as in the tables).
bool write_json(const std::string& path, const std::string& model, int32_t in, int32_t out, int32_t threads,
                const std::map<int32_t, std::vector<double>>& wall, const std::map<int32_t, std::vector<double>>& cpu) {
  auto series = [](const std::map<int32_t, std::vector<double>>& m) {
    std::string s = "{";
    for (const auto& [b, v] : m) {
      s += (s.size() > 1 ? ", \"" : "\"") + std::to_string(b) + "\": [";
      for (size_t i = 0; i < v.size(); ++i) {
        char num[32];
        std::snprintf(num, sizeof num, "%s%.3f", i ? ", " : "", v[i]);
        s += num;
      }
      s += "]";
    }
    return s + "}";
  };
  std::string escaped;
  for (char ch : model) {
    if (ch == '"' || ch == '\\') escaped += '\\';
    escaped += ch;
  }
  std::ofstream f(path);
  f << "{\"model\": \"" << escaped << "\", \"input_len\": " << in << ", \"output_len\": " << out
    << ", \"threads\": " << threads << ", \"tok_per_s\": " << series(wall) << ", \"tok_per_cpu_s\": " << series(cpu)
    << "}\n";
  return static_cast<bool>(f);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = default_model_path();
  int32_t rounds = 3, threads = 2, in = 128, out = 128;
  bool peer = true, profile_ops = false;
  std::string kv_dtype = "f16", json_out;
  int32_t block_size = 16;
  std::vector<int32_t> batches = {1, 2, 4, 8, 16, 32};
  std::vector<std::string> loras;
  std::vector<int32_t> adapter_counts = {0, 1, 2, 4, 8};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return std::string(i + 1 < argc ? argv[++i] : ""); };
    if (a == "--model") model = next();
    else if (a == "--rounds") rounds = std::atoi(next().c_str());
    else if (a == "--threads") threads = std::atoi(next().c_str());
    else if (a == "--input-len") in = std::atoi(next().c_str());
    else if (a == "--output-len") out = std::atoi(next().c_str());
    else if (a == "--no-peer") peer = false;
    else if (a == "--kv-dtype") kv_dtype = next();
    else if (a == "--profile") profile_ops = true;
    else if (a == "--block-size") block_size = std::atoi(next().c_str());
    else if (a == "--json-out") json_out = next();
    else if (a == "--loras") {
      std::stringstream ss(next());
      for (std::string x; std::getline(ss, x, ',');) loras.push_back(x);
    } else if (a == "--adapter-counts") {
      adapter_counts.clear();
      std::stringstream ss(next());
      for (std::string x; std::getline(ss, x, ',');) adapter_counts.push_back(std::atoi(x.c_str()));
    } else if (a == "--batches") {
      batches.clear();
      std::stringstream ss(next());
      for (std::string x; std::getline(ss, x, ',');) batches.push_back(std::atoi(x.c_str()));
    } else {
      std::fprintf(stderr, "usage: bench_batched_decode [--model M] [--rounds N] [--threads T] [--batches 1,2,4]"
                           " [--input-len 128] [--output-len 128] [--no-peer] [--kv-dtype f16|f32|q8] [--block-size 16] [--profile]"
                           " [--json-out FILE] [--loras F1,F2,... [--adapter-counts 0,1,2,4,8]]\n");
      return 2;
    }
  }
  const int32_t max_b = *std::max_element(batches.begin(), batches.end());
  EngineConfig c;
  c.model_path = model;
  c.num_threads = threads;
  c.max_num_seqs = max_b;
  c.max_num_batched_tokens = std::max(512, max_b * in);
  c.max_model_len = in + out + 16;
  c.kv_cache_bytes = int64_t{512} << 20;
  c.enable_prefix_caching = false;
  c.kv_dtype = kv_dtype;
  c.block_size = block_size;
  for (size_t i = 0; i < loras.size(); ++i) c.lora_modules.push_back({adapter_name(static_cast<int32_t>(i)), loras[i]});
  c.max_loras = std::max<int32_t>(1, static_cast<int32_t>(loras.size()));
  auto engine = Engine::create(c);
  if (!engine) {
    std::fprintf(stderr, "error: %s\n", engine.error().message.c_str());
    return 1;
  }
  Engine& e = **engine;
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = out;
  p.ignore_eos = true;
  if (!loras.empty()) return run_lora_mix(e, p, batches, adapter_counts, static_cast<int32_t>(loras.size()), rounds, in, out);
  std::map<int32_t, std::vector<double>> ours, theirs;
  std::map<int32_t, std::vector<double>> ours_cpu;  // decode tokens per CPU second of the process
  std::map<int32_t, std::string> profiles;  // B -> the decode op table of the last round
  std::map<int32_t, std::string> prefill_profiles;  // B -> the prefill step's op table, last round
  // B -> per round: (engine loop outside the runner, runner step) ms per decode step.
  std::map<int32_t, std::vector<std::pair<double, double>>> engine_steps;
  if (profile_ops) profile::global().enabled.store(true);
  bool peer_ok = peer;
  for (int32_t r = 0; r < rounds; ++r) {
    for (int32_t b : batches) {
      const auto prompts = random_prompts(b, in, e.model_info().vocab_size, 1000 + r * 64 + b);
      profile::reset();
      const auto t = run_set(e, prompts, p);
      if (profile_ops) {
        profiles[b] = profile_table(profile::Phase::kDecode);
        prefill_profiles[b] = profile_table(profile::Phase::kPrefill);
        const profile::Profile& pr = profile::global();
        const auto dec = static_cast<size_t>(profile::Phase::kDecode);
        const double steps = static_cast<double>(std::max<int64_t>(1, pr.steps[dec]));
        const double runner_ms = pr.ms[dec][static_cast<size_t>(profile::Op::kStep)] / steps;
        const auto loop = static_cast<size_t>(profile::Op::kEngineLoop);
        engine_steps[b].push_back(
            {pr.ms[dec][loop] / static_cast<double>(std::max<int64_t>(1, pr.calls[dec][loop])), runner_ms});
      }
      // The decode phase: from the moment the last sequence got its first token to the last token.
      double first = 0, last = 0, first_cpu = 0, last_cpu = 0;
      for (const Timed& x : t) {
        if (x.first_ms > first) first = x.first_ms, first_cpu = x.first_cpu_s;
        if (x.last_ms > last) last = x.last_ms, last_cpu = x.last_cpu_s;
      }
      ours[b].push_back(b * (out - 1) / ((last - first) / 1000.0));
      ours_cpu[b].push_back(b * (out - 1) / (last_cpu - first_cpu));
      if (peer_ok) {
        const double tps = run_peer(model, b, in, out, threads);
        if (tps < 0) peer_ok = false;
        else theirs[b].push_back(tps);
      }
      std::fprintf(stderr, "round %d B=%d: ours %.1f tok/s (%.1f tok per CPU s)%s\n", r, b, ours[b].back(), ours_cpu[b].back(),
                   peer_ok ? (", llama.cpp " + std::to_string(theirs[b].back())).c_str() : "");
    }
  }
  std::printf("B4 batched decode: %s, %d in / %d out, %d threads, kv %s, %d rounds (median (min-max))\n",
              model.c_str(), in, out, threads, kv_dtype.c_str(), rounds);
  if (!peer) std::printf("llama.cpp peer: skipped (--no-peer)\n");
  else if (!peer_ok) std::printf("llama.cpp peer: unavailable (bench/llama_batched_decode.py failed; see bench/README.md)\n");
  std::printf("%4s %26s %10s %26s %22s\n", "B", "tessera decode tok/s", "S(B)/S(1)", "llama.cpp tok/s",
              "tessera/llama.cpp");
  const double s1 = summarize(ours[batches.front()]).median;
  for (int32_t b : batches) {
    const Summary o = summarize(ours[b]);
    std::string peer_col = "n/a", ratio_col = "n/a";
    if (peer_ok && theirs[b].size() == ours[b].size()) {
      peer_col = fmt_summary(summarize(theirs[b]));
      std::vector<double> ratios;
      for (size_t i = 0; i < ours[b].size(); ++i) ratios.push_back(ours[b][i] / theirs[b][i]);
      ratio_col = fmt_summary(summarize(ratios), "%.2f");
    }
    std::printf("%4d %26s %9.2fx %26s %22s\n", b, fmt_summary(o).c_str(), o.median / s1, peer_col.c_str(),
                ratio_col.c_str());
  }
  // CPU time: what the matmul kernels cost on a machine too loaded for wall time to say (both
  // threads' seconds; a worker's spin between jobs counts too).
  std::printf("\n%4s %26s %14s\n", "B", "tessera tok per CPU s", "CPU ms/step");
  for (int32_t b : batches) {
    const Summary c = summarize(ours_cpu[b]);
    std::printf("%4d %26s %14.2f\n", b, fmt_summary(c).c_str(), 1000.0 * b / c.median);
  }
  for (const auto& [b, table] : profiles) std::printf("\ndecode steps at B = %d (ms per step):\n%s", b, table.c_str());
  if (!engine_steps.empty()) {
    // The engine loop's own cost per decode step (schedule, views, managers, outputs, metrics):
    // EngineImpl::step's wall time less the runner's part (profile::LoopScope), and its share of
    // the whole step; the round with the smallest overhead (a loaded machine only adds to it).
    std::printf("\nengine loop per decode step (min-overhead round of %d):\n%4s %16s %16s %8s\n", rounds, "B",
                "runner step ms", "engine loop ms", "share");
    for (const auto& [b, v] : engine_steps) {
      auto best = std::min_element(v.begin(), v.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
      std::printf("%4d %16.3f %16.4f %7.2f%%\n", b, best->second, best->first,
                  100.0 * best->first / (best->first + best->second));
    }
  }
  for (const auto& [b, table] : prefill_profiles) {
    std::printf("\nprefill at B = %d (%d tokens; ms per prefill step):\n%s", b, b * in, table.c_str());
  }
  if (!json_out.empty() && !write_json(json_out, model, in, out, threads, ours, ours_cpu)) {
    std::fprintf(stderr, "error: cannot write %s\n", json_out.c_str());
    return 1;
  }
  return 0;
}
