// Shared helpers of the engine benchmarks (bench_batched_decode, bench_prefix_cache): run a set of
// requests through an Engine, polling every stream so each event is timestamped when it arrives,
// and summarize rounds as median (min-max).
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <time.h>
#include <vector>

#include "tessera/engine.h"

namespace tessera::bench {

struct Timed {
  double first_ms = -1;    // first token, ms after submission of the set
  double last_ms = 0;      // last token
  int64_t num_tokens = 0;  // generated tokens
  // The process's CPU seconds (every thread: the engine's, the pool's workers, this reader) when
  // the first and the last token arrived: CPU time holds still on a loaded machine where wall
  // time does not.
  double first_cpu_s = 0, last_cpu_s = 0;
};

inline double process_cpu_s() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

inline double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// Submits every request, then reads all streams until each has finished. The reader blocks on
// one unfinished stream (the engine emits every sequence's token of a step together, so one
// wake-up per step serves them all) instead of polling on a timer: on a 2-core machine a polling
// client wakes 10,000 times a second and takes a core from the engine each time.
// lora_names: request i's adapter (empty, or "" for a request: the base model).
inline std::vector<Timed> run_set(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                  const SamplingParams& params, const std::vector<std::string>& lora_names = {}) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto s = engine.submit({prompts[i], params, "", i < lora_names.size() ? lora_names[i] : ""});
    if (!s.ok()) {
      std::fprintf(stderr, "request refused: %s\n", s.error().message.c_str());
      std::exit(1);
    }
    streams.push_back(*s);
  }
  std::vector<Timed> out(streams.size());
  std::vector<bool> done(streams.size(), false);
  size_t remaining = streams.size();
  while (remaining > 0) {
    const size_t first = static_cast<size_t>(std::find(done.begin(), done.end(), false) - done.begin());
    for (size_t i = first; i < streams.size(); ++i) {
      if (done[i]) continue;
      // The first unfinished stream is waited on (up to 5 ms), the others only drained.
      const auto wait = std::chrono::milliseconds(i == first ? 5 : 0);
      for (auto ev = streams[i]->next(wait); ev; ev = streams[i]->next(std::chrono::milliseconds(0))) {
        const double t = ms_since(start);
        if (!ev->token_ids.empty()) {
          const double cpu = process_cpu_s();
          if (out[i].first_ms < 0) out[i].first_ms = t, out[i].first_cpu_s = cpu;
          out[i].last_ms = t, out[i].last_cpu_s = cpu;
          out[i].num_tokens += static_cast<int64_t>(ev->token_ids.size());
        }
        if (streams[i]->finished()) {
          done[i] = true;
          --remaining;
          break;
        }
      }
    }
  }
  return out;
}

inline std::vector<std::vector<int32_t>> random_prompts(int32_t num, int32_t len, int32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> id(256, vocab - 1);
  std::vector<std::vector<int32_t>> p(static_cast<size_t>(num), std::vector<int32_t>(static_cast<size_t>(len)));
  for (auto& v : p) {
    for (int32_t& t : v) t = id(rng);
  }
  return p;
}

struct Summary {
  double median = 0, min = 0, max = 0;
};

inline Summary summarize(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

inline std::string fmt_summary(const Summary& s, const char* f = "%.1f") {
  char a[64], b[64], c[64];
  std::snprintf(a, sizeof a, f, s.median);
  std::snprintf(b, sizeof b, f, s.min);
  std::snprintf(c, sizeof c, f, s.max);
  return std::string(a) + " (" + b + "-" + c + ")";
}

inline std::string default_model_path() {
  if (const char* env = std::getenv("TESSERA_MODEL"); env && *env) return env;
  return "models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

}  // namespace tessera::bench
