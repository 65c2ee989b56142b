// `tessera bench serve`: flags -> LoadConfig, one run per --request-rate, a table on stdout, JSON
// (--json-out) and a PNG of throughput and latency across rates (--plot-out, via
// scripts/plot_serve.py and matplotlib; skipped with a note when matplotlib cannot be had).
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cli/commands.h"
#include "cli/load_gen.h"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;

std::string find_plot_script() {
  std::vector<fs::path> candidates = {fs::path("scripts") / "plot_serve.py"};
#ifdef TESSERA_SOURCE_DIR
  candidates.push_back(fs::path(TESSERA_SOURCE_DIR) / "scripts" / "plot_serve.py");
#endif
  std::error_code ec;
  for (const fs::path& p : candidates) {
    if (fs::exists(p, ec)) return p.string();
  }
  return {};
}

bool have_matplotlib() { return std::system("python3 -c 'import matplotlib' >/dev/null 2>&1") == 0; }

void plot(const std::string& json_path, const std::string& png_path) {
  const std::string script = find_plot_script();
  if (script.empty()) {
    std::fprintf(stderr, "note: scripts/plot_serve.py not found; no plot\n");
    return;
  }
  if (!have_matplotlib()) {
    std::fprintf(stderr, "note: installing matplotlib for the plot (pip)\n");
    if (std::system("python3 -m pip install -q matplotlib >/dev/null 2>&1") != 0 || !have_matplotlib()) {
      std::fprintf(stderr, "note: matplotlib is not available; skipping the plot (the JSON has the numbers)\n");
      return;
    }
  }
  const std::string cmd = "python3 '" + script + "' '" + json_path + "' '" + png_path + "'";
  if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "note: the plot script failed\n");
}

void print_summary(const nlohmann::json& s) {
  auto f = [&](const char* metric, const char* stat) { return s[metric][stat].get<double>(); };
  std::printf("rate %-6s  done %lld/%lld  req/s %.2f  out tok/s %.1f  total tok/s %.1f\n",
              s["request_rate"].dump().c_str(), static_cast<long long>(s["completed"].get<int64_t>()),
              static_cast<long long>(s["num_requests"].get<int64_t>()), s["request_throughput"].get<double>(),
              s["output_throughput"].get<double>(), s["total_token_throughput"].get<double>());
  for (const char* metric : {"ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"}) {
    std::printf("  %-8s mean %9.2f  median %9.2f  p90 %9.2f  p99 %9.2f\n", metric, f(metric, "mean"),
                f(metric, "median"), f(metric, "p90"), f(metric, "p99"));
  }
  if (s.contains("goodput")) std::printf("  goodput  %.2f req/s\n", s["goodput"].get<double>());
  if (!s["errors"].empty()) std::printf("  errors   %s\n", s["errors"].dump().c_str());
  std::fflush(stdout);
}

}  // namespace

int bench_serve_main(int argc, char** argv) {
  CLI::App app{"Load generator for any OpenAI-compatible server (tessera, llama.cpp server, vLLM)"};
  app.name(argc > 0 ? argv[0] : "tessera bench serve");
  LoadConfig c;
  std::vector<std::string> rates = {"inf"};
  std::vector<std::string> goodput;
  std::string json_out, plot_out, label;
  app.add_option("--base-url", c.base_url, "server root, e.g. http://127.0.0.1:8000");
  app.add_option("--endpoint", c.endpoint, "/v1/completions or /v1/chat/completions");
  app.add_option("--model", c.model, "model name to send (default: the first of GET /v1/models)");
  app.add_option("--api-key", c.api_key, "bearer key (env OPENAI_API_KEY)")->envname("OPENAI_API_KEY");
  app.add_option("--num-prompts", c.num_prompts, "requests per rate")->check(CLI::PositiveNumber);
  app.add_option("--request-rate", rates, "requests/s; a list sweeps (inf = all at once)")->delimiter(',');
  app.add_option("--burstiness", c.burstiness, "gamma shape of inter-arrivals (1 = Poisson)")->check(CLI::PositiveNumber);
  app.add_option("--max-concurrency", c.max_concurrency, "requests in flight at most (0 = unlimited)");
  app.add_option("--input-len", c.input_len, "prompt words (about tokens)")->check(CLI::PositiveNumber);
  app.add_option("--input-len-range", c.input_len_range, "+- fraction of --input-len")->check(CLI::Range(0.0, 1.0));
  app.add_option("--output-len", c.output_len, "max_tokens (sent with ignore_eos)")->check(CLI::PositiveNumber);
  app.add_option("--output-len-range", c.output_len_range, "+- fraction of --output-len (mixed lengths)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--prefix-len", c.prefix_len, "shared-prefix words per group")->check(CLI::NonNegativeNumber);
  app.add_option("--num-prefix-groups", c.num_prefix_groups, "groups sharing a prefix")->check(CLI::PositiveNumber);
  app.add_option("--workload", c.workload, "random | multi-tenant (sessions: shared system prompts, multi-turn chats)")
      ->check(CLI::IsMember({"random", "multi-tenant"}));
  app.add_option("--num-sessions", c.num_sessions, "multi-tenant: conversations")->check(CLI::PositiveNumber);
  app.add_option("--num-turns", c.num_turns, "multi-tenant: turns per conversation")->check(CLI::PositiveNumber);
  app.add_option("--num-system-prompts", c.num_system_prompts, "multi-tenant: distinct system prompts (tenants)")
      ->check(CLI::PositiveNumber);
  app.add_option("--system-prompt-len", c.system_prompt_len, "multi-tenant: system prompt words (about tokens)")
      ->check(CLI::PositiveNumber);
  app.add_option("--session-header", c.session_header, "multi-tenant: header naming the session (routing key)");
  app.add_option("--seed", c.seed, "workload and arrival seed (each later rate of a sweep draws its own prompts from it)");
  app.add_option("--goodput", goodput, "SLOs, e.g. ttft_ms:2000 tpot_ms:100 e2el_ms:10000");
  app.add_option("--timeout", c.timeout_s, "seconds per request")->check(CLI::PositiveNumber);
  std::string extra_body;
  app.add_option("--extra-body", extra_body, "JSON object merged into every request, e.g. '{\"top_k\": 1}'");
  app.add_option("--label", label, "name of this server in the JSON and the plot legend");
  app.add_option("--json-out", json_out, "write the results as JSON");
  app.add_option("--plot-out", plot_out, "write a PNG of throughput and latency across rates");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  std::vector<double> rate_values;
  for (const std::string& r : rates) {
    char* end = nullptr;
    const double v = (r == "inf" || r == "INF") ? INFINITY : std::strtod(r.c_str(), &end);
    if (!(v > 0.0) || (end != nullptr && *end != '\0')) {
      std::fprintf(stderr, "--request-rate: '%s' is not a positive number or inf\n", r.c_str());
      return 1;
    }
    rate_values.push_back(v);
  }
  for (const std::string& g : goodput) {
    const size_t colon = g.find(':');
    const std::string key = g.substr(0, colon);
    if (colon == std::string::npos || (key != "ttft_ms" && key != "tpot_ms" && key != "e2el_ms")) {
      std::fprintf(stderr, "--goodput: '%s' must be ttft_ms:N, tpot_ms:N or e2el_ms:N\n", g.c_str());
      return 1;
    }
    c.slo_ms[key.substr(0, key.size() - 3)] = std::strtod(g.c_str() + colon + 1, nullptr);
  }
  if (!extra_body.empty()) {
    c.extra_body = nlohmann::json::parse(extra_body, nullptr, false);
    if (!c.extra_body.is_object()) {
      std::fprintf(stderr, "--extra-body: '%s' is not a JSON object\n", extra_body.c_str());
      return 1;
    }
  }
  if (c.workload == "multi-tenant") {
    c.endpoint = "/v1/chat/completions";
    c.num_prompts = c.num_sessions * c.num_turns;
  }
  if (c.model.empty()) {
    c.model = discover_model(c);
    if (c.model.empty()) {
      std::fprintf(stderr, "cannot reach %s/v1/models (and no --model given)\n", c.base_url.c_str());
      return 1;
    }
  }
  nlohmann::json results = nlohmann::json::array();
  for (size_t i = 0; i < rate_values.size(); ++i) {
    LoadConfig run = c;
    run.request_rate = rate_values[i];
    run.seed = sweep_seed(c.seed, i);  // fresh prompts per rate: no rate replays another's
    double duration_s = 0.0;
    const std::vector<RequestRecord> records = run_load(run, make_dataset(run), &duration_s);
    nlohmann::json summary = summarize(records, duration_s, run);
    summary["seed"] = run.seed;
    print_summary(summary);
    results.push_back(std::move(summary));
  }
  const nlohmann::json out = {
      {"config", {{"base_url", c.base_url}, {"endpoint", c.endpoint}, {"model", c.model},
                  {"num_prompts", c.num_prompts}, {"input_len", c.input_len}, {"input_len_range", c.input_len_range},
                  {"output_len", c.output_len}, {"output_len_range", c.output_len_range}, {"prefix_len", c.prefix_len},
                  {"num_prefix_groups", c.num_prefix_groups}, {"seed", c.seed}, {"burstiness", c.burstiness},
                  {"max_concurrency", c.max_concurrency}, {"extra_body", c.extra_body}, {"workload", c.workload},
                  {"num_sessions", c.num_sessions}, {"num_turns", c.num_turns},
                  {"num_system_prompts", c.num_system_prompts}, {"system_prompt_len", c.system_prompt_len},
                  {"session_header", c.session_header},
                  {"label", label.empty() ? c.base_url : label}}},
      {"results", results}};
  std::string json_path = json_out;
  if (json_path.empty() && !plot_out.empty()) json_path = plot_out + ".json";
  if (!json_path.empty()) {
    std::ofstream(json_path) << out.dump(2) << "\n";
    std::printf("results: %s\n", json_path.c_str());
  }
  if (!plot_out.empty()) plot(json_path, plot_out);
  return 0;
}

}  // namespace tessera::cli
