// `tessera serve`: flags -> EngineConfig + ServerConfig, Engine::create, HttpServer, and a signal
// thread that turns SIGINT/SIGTERM into a graceful shutdown.
//
// Signals: SIGINT/SIGTERM (and SIGUSR1, used internally to wake the signal thread) are blocked
// before any thread starts, so every thread inherits the mask and only the signal thread, in
// sigwait(), ever receives them: no async-signal-safety hazards in the handlers.
#include <CLI/CLI.hpp>
#include <pthread.h>
#include <signal.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "server/http_server.h"
#include "server/server_main.h"
#include "tessera/engine.h"
#include "util/log.h"

namespace tessera::server {
namespace {

namespace fs = std::filesystem;

// "512MiB", "2GB", "1g", "1048576" -> bytes; -1 when malformed.
int64_t parse_byte_size(std::string text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) return -1;
  double value = std::strtod(text.substr(0, i).c_str(), nullptr);
  std::string unit;
  for (size_t k = i; k < text.size(); ++k) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[k])));
  const std::pair<const char*, double> units[] = {
      {"", 1.0}, {"b", 1.0}, {"k", 1024.0}, {"kb", 1e3}, {"kib", 1024.0}, {"m", 1048576.0}, {"mb", 1e6},
      {"mib", 1048576.0}, {"g", 1073741824.0}, {"gb", 1e9}, {"gib", 1073741824.0}};
  for (const auto& [name, scale] : units) {
    if (unit == name) return static_cast<int64_t>(value * scale);
  }
  return -1;
}

// $TESSERA_MODEL, else models/SmolLM2-135M-Instruct.Q4_1.gguf in the working directory or in any
// directory above the binary (scripts/setup.sh links it into the repository's models/).
std::string find_default_model() {
  constexpr const char* kFile = "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (const char* env = std::getenv("TESSERA_MODEL"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  if (fs::exists(fs::path("models") / kFile, ec)) return (fs::path("models") / kFile).string();
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
      if (fs::exists(dir / "models" / kFile, ec)) return (dir / "models" / kFile).string();
    }
  }
  return {};
}

}  // namespace

int serve_main(int argc, char** argv) {
  CLI::App app{"OpenAI-compatible HTTP server: /v1/completions, /v1/chat/completions, /v1/models, "
               "/health, /metrics, /tokenize, /detokenize"};
  app.name(argc > 0 ? argv[0] : "tessera serve");
  EngineConfig ec;
  ServerConfig sc;
  std::string kv_cache_text;
  int32_t shutdown_grace_s = 10;
  int32_t max_n = sc.limits.max_n;
  int64_t max_body_bytes = static_cast<int64_t>(sc.max_body_bytes);
  app.add_option("-m,--model", ec.model_path, "GGUF model file (default: SmolLM2-135M-Instruct Q4_1)");
  app.add_option("--host", sc.host, "address to bind (default 127.0.0.1: loopback only)");
  app.add_option("--port", sc.port, "TCP port (0 = any free port, printed at start-up)")->check(CLI::Range(0, 65535));
  app.add_option("--api-key", sc.api_key, "require 'Authorization: Bearer <key>' on /v1/* (env TESSERA_API_KEY)")
      ->envname("TESSERA_API_KEY");
  app.add_option("--served-model-name", sc.served_model_name, "model name clients use (default: the GGUF file's stem)");
  app.add_option("-t,--threads", ec.num_threads, "compute threads (default: every core)");
  app.add_option("--kv-cache", kv_cache_text, "KV cache budget, e.g. 512MiB or 2GB (default: a fraction of free memory)");
  app.add_option("--kv-cache-fraction", ec.kv_cache_memory_fraction, "KV budget as a fraction of available memory");
  app.add_option("--block-size", ec.block_size, "tokens per KV block");
  app.add_option("--kv-dtype", ec.kv_dtype, "KV cache element type: f16 or f32");
  app.add_flag("--no-prefix-caching{false},--prefix-caching{true}", ec.enable_prefix_caching,
               "automatic prefix caching (on by default)");
  app.add_option("--max-num-seqs", ec.max_num_seqs, "sequences per step at most");
  app.add_option("--max-num-batched-tokens", ec.max_num_batched_tokens, "tokens per step at most (the token budget)");
  app.add_option("--long-prefill-token-threshold", ec.long_prefill_token_threshold,
                 "prefill chunk per request per step at most (0 = the whole budget)");
  app.add_flag("--no-chunked-prefill{false},--chunked-prefill{true}", ec.enable_chunked_prefill,
               "chunked prefill (on by default)");
  app.add_option("--max-model-len", ec.max_model_len, "context per request (default: the model's, at most 8192)");
  app.add_option("--policy", ec.policy, "batching policy: continuous or static");
  app.add_option("--speculative", ec.speculative, "speculative decoding: ngram or draft (default off)");
  app.add_option("--draft-model", ec.draft_model_path, "draft GGUF for --speculative draft");
  app.add_option("--num-speculative-tokens", ec.num_speculative_tokens, "draft tokens per step at most (k)");
  app.add_option("--engine-seed", ec.seed, "seed for requests that carry none");
  app.add_option("--max-body-bytes", max_body_bytes, "largest request body accepted (413 past it)")->check(CLI::PositiveNumber);
  app.add_option("--max-queued-requests", sc.max_queued_requests, "generate requests in flight at most (429 past it)")
      ->check(CLI::PositiveNumber);
  app.add_option("--max-n", max_n, "largest n (samples per prompt) accepted")->check(CLI::Range(1, 128));
  app.add_option("--http-threads", sc.num_http_threads, "HTTP worker threads (one per open connection)")
      ->check(CLI::Range(2, 4096));
  app.add_option("--shutdown-grace", shutdown_grace_s, "seconds in-flight requests get to finish on SIGINT/SIGTERM")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("-v,--verbose", ec.verbose, "start-up summary on stderr");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  sc.max_body_bytes = static_cast<size_t>(max_body_bytes);
  sc.limits.max_n = max_n;
  if (ec.model_path.empty()) {
    ec.model_path = find_default_model();
    if (ec.model_path.empty()) {
      std::fprintf(stderr, "tessera serve: no --model given and the default model was not found: run "
                           "scripts/setup.sh or set TESSERA_MODEL\n");
      return 1;
    }
  }
  if (!kv_cache_text.empty()) {
    ec.kv_cache_bytes = parse_byte_size(kv_cache_text);
    if (ec.kv_cache_bytes <= 0) {
      std::fprintf(stderr, "tessera serve: --kv-cache: cannot read '%s' as a size\n", kv_cache_text.c_str());
      return 1;
    }
  }
  if (sc.served_model_name.empty()) sc.served_model_name = fs::path(ec.model_path).stem().string();

  // Block the shutdown signals before any thread exists (the engine starts its own).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  ec.verbose = true;  // the start-up summary (budget, blocks, concurrency) belongs in a server log
  Result<std::unique_ptr<Engine>> engine = Engine::create(ec);
  if (!engine.ok()) {
    std::fprintf(stderr, "tessera serve: %s\n", engine.error().message.c_str());
    return 1;
  }
  HttpServer server(*engine.value(), sc);
  Result<int> port = server.bind();
  if (!port.ok()) {
    std::fprintf(stderr, "tessera serve: %s\n", port.error().message.c_str());
    engine.value()->shutdown(std::chrono::milliseconds(0));
    return 2;
  }
  const ModelInfo& info = engine.value()->model_info();
  std::fprintf(stderr, "tessera serve: model %s as '%s' (context %d, %d KV blocks of %d tokens)\n",
               ec.model_path.c_str(), sc.served_model_name.c_str(), info.context_length, info.num_kv_blocks,
               info.block_size);
  std::fprintf(stderr, "tessera serve: listening on http://%s:%d%s\n", sc.host.c_str(), port.value(),
               sc.api_key.empty() ? "" : " (API key required on /v1/*)");
  std::fflush(stderr);

  std::atomic<bool> serving{true};
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig == SIGUSR1 || !serving.load()) return;  // woken because the server stopped by itself
    std::fprintf(stderr, "tessera serve: %s received; draining (grace %d s)\n",
                 sig == SIGINT ? "SIGINT" : "SIGTERM", shutdown_grace_s);
    server.shutdown(std::chrono::seconds(shutdown_grace_s));
  });
  server.listen();
  serving.store(false);
  pthread_kill(signal_thread.native_handle(), SIGUSR1);
  signal_thread.join();
  engine.value()->shutdown(std::chrono::milliseconds(0));  // no-op after a graceful drain
  std::fprintf(stderr, "tessera serve: stopped\n");
  return 0;
}

}  // namespace tessera::server
