// B-grammar: structured-output costs per vocabulary. For each GGUF given: the compile time
// (front end + parse + per-position token classes) of every schema of
// tests/data/grammar/schemas.json on a cold cache, and the per-token mask time (fill_mask, p50 /
// p99 / max) over random walks through those grammars. Wall and this thread's CPU time both: on
// a loaded host the wall figures include other processes' turns.
//   bench_grammar [--schemas FILE] [--walks N] [--steps N] MODEL.gguf...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <ctime>
#include <sstream>

#include "structured/structured_outputs.h"
#include "gguf/gguf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

using namespace tessera;

namespace {

// CPU time of this thread: on a shared host, wall time also counts the other processes' turns.
double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  std::string schemas_path = std::string(TESSERA_SOURCE_DIR) + "/tests/data/grammar/schemas.json";
  int walks = 2, steps = 48;
  std::vector<std::string> models;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--schemas" && i + 1 < argc) schemas_path = argv[++i];
    else if (a == "--walks" && i + 1 < argc) walks = std::atoi(argv[++i]);
    else if (a == "--steps" && i + 1 < argc) steps = std::atoi(argv[++i]);
    else models.push_back(a);
  }
  std::ifstream in(schemas_path);
  const auto suite = nlohmann::ordered_json::parse(in);
  for (const std::string& path : models) {
    auto file = gguf::GgufFile::open(path);
    if (!file.ok()) return std::fprintf(stderr, "%s\n", file.error().message.c_str()), 1;
    auto tok = tokenizer::Tokenizer::from_gguf(file.value());
    if (!tok.ok()) return std::fprintf(stderr, "%s\n", tok.error().message.c_str()), 1;
    const auto t0 = std::chrono::steady_clock::now();
    auto tokens = std::make_shared<const grammar::TokenTable>(structured::grammar_vocabulary(tok.value()));
    const double table_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s: vocab %d, token table %.1f ms\n", path.c_str(), tokens->vocab_size(), table_ms);
    std::vector<double> compile_ms, compile_cpu_ms, mask_us, mask_cpu_us;
    std::mt19937_64 rng(7);
    std::vector<uint64_t> mask(grammar::mask_words(tokens->vocab_size()));
    for (const auto& entry : suite) {
      const auto c0 = std::chrono::steady_clock::now();
      const double cpu0 = thread_cpu_ms();
      auto text = grammar::json_schema_to_grammar(entry["schema"].dump());
      if (!text.ok()) return std::fprintf(stderr, "%s\n", text.error().message.c_str()), 1;
      auto compiled = grammar::compile_grammar(text.value(), tokens);
      if (!compiled.ok()) return std::fprintf(stderr, "%s\n", compiled.error().message.c_str()), 1;
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count();
      compile_ms.push_back(ms);
      compile_cpu_ms.push_back(thread_cpu_ms() - cpu0);
      const auto& stats = *compiled.value();
      std::printf("  compile %-20s %7.1f ms cpu %7.1f ms (level 1 %.1f ms; %d -> %d positions, %zu re-walked, %zu uncertain)\n",
                  entry["name"].get<std::string>().c_str(), ms, compile_cpu_ms.back(), stats.level1_seconds * 1e3,
                  stats.source->num_positions(), stats.grammar->num_positions(), stats.num_rewalked,
                  stats.num_uncertain);
      if (std::getenv("BENCH_GRAMMAR_VERBOSE")) {
        const auto& cg = *compiled.value();
        std::vector<std::pair<size_t, int32_t>> worst;
        for (int32_t p = 0; p < cg.grammar->num_positions(); ++p) worst.push_back({cg.positions[p].uncertain.size(), p});
        std::sort(worst.rbegin(), worst.rend());
        for (int k = 0; k < 4 && k < static_cast<int>(worst.size()); ++k) {
          int32_t q = worst[k].second;
          while (cg.grammar->elements[q].kind != grammar::Element::kEnd) ++q;
          std::printf("    pos %d (rule %s): %zu uncertain\n", worst[k].second,
                      cg.grammar->rule_names[cg.grammar->elements[q].index].c_str(), worst[k].first);
        }
      }
      for (int w = 0; w < walks; ++w) {
        grammar::GrammarMatcher m(compiled.value());
        for (int s = 0; s < steps && !m.is_complete(); ++s) {
          const auto m0 = std::chrono::steady_clock::now();
          const double cpu0 = thread_cpu_ms();
          m.fill_mask(mask);
          mask_cpu_us.push_back((thread_cpu_ms() - cpu0) * 1e3);
          mask_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - m0).count());
          std::vector<int32_t> allowed;
          for (int32_t id = 0; id < tokens->vocab_size(); ++id) {
            if (grammar::mask_test(mask, id) && !tokens->is_stop(id)) allowed.push_back(id);
          }
          if (allowed.empty()) break;
          m.accept_token(allowed[rng() % allowed.size()]);
        }
      }
    }
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) < 1) load[0] = -1;
    std::printf("%s: compile ms p50 %.1f max %.1f (cpu p50 %.1f max %.1f; %zu schemas); mask us p50 %.1f p99 %.1f max %.1f (cpu p50 %.1f p99 %.1f max %.1f; %zu masks); load %.2f\n",
                path.c_str(), percentile(compile_ms, 0.5), percentile(compile_ms, 1.0),
                percentile(compile_cpu_ms, 0.5), percentile(compile_cpu_ms, 1.0), compile_ms.size(),
                percentile(mask_us, 0.5), percentile(mask_us, 0.99), percentile(mask_us, 1.0),
                percentile(mask_cpu_us, 0.5), percentile(mask_cpu_us, 0.99), percentile(mask_cpu_us, 1.0), mask_us.size(),
                load[0]);
  }
  return 0;
}
