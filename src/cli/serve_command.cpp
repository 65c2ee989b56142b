// `tessera serve`: flags -> EngineConfig + ServerConfig, HttpServer (listening while the model
// loads: /health 503 "loading"), Engine::create, attach, and a signal thread that turns
// SIGINT/SIGTERM into a graceful shutdown (or an immediate exit while still loading).
//
// Drain (first signal): /health and new generate requests get 503 with Retry-After, idle and
// half-sent connections close, in-flight requests finish until --shutdown-grace and are aborted
// after it, then the process exits 0 (within grace + 1 s). A second signal exits at once (130).
//
// KV-cache events (--kv-events ENDPOINT): a kv_events::KvEventPublisher is created before the engine
// (a bad endpoint fails at start-up), the engine hands it one batch per step that changed the prefix
// cache, and its topic "kv@<instance>@<served model name>" is set once the HTTP port is known
// (instance: --kv-events-instance, default host:port of this server).
//
// Signals: SIGINT/SIGTERM (and SIGUSR1, used internally to wake the signal thread) are blocked
// before any thread starts, so every thread inherits the mask and only the signal thread, in
// sigwait(), ever receives them: no async-signal-safety hazards in the handlers.
#include <CLI/CLI.hpp>
#include <pthread.h>
#include <signal.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/progress.h"
#include "kv_events/event_encoder.h"
#include "kv_events/kv_event_publisher.h"
#include "server/http_server.h"
#include "tessera/engine.h"
#include "util/log.h"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;

}  // namespace

int serve_main(int argc, char** argv) {
  CLI::App app{"OpenAI-compatible HTTP server: /v1/completions, /v1/chat/completions, /v1/models, "
               "/health, /metrics, /tokenize, /detokenize; a chat page at /"};
  app.name(argc > 0 ? argv[0] : "tessera serve");
  EngineConfig ec;
  server::ServerConfig sc;
  std::string kv_cache_text;
  int32_t shutdown_grace_s = 10;
  int32_t max_n = sc.limits.max_n;
  int64_t max_body_bytes = static_cast<int64_t>(sc.max_body_bytes);
  app.add_option("--host", sc.host, "address to bind (default 127.0.0.1: loopback only)");
  app.add_option("--port", sc.port, "TCP port (0 = any free port, printed at start-up)")->check(CLI::Range(0, 65535));
  app.add_option("--api-key", sc.api_key, "require 'Authorization: Bearer <key>' on every route but /health (env TESSERA_API_KEY)")
      ->envname("TESSERA_API_KEY");
  std::string api_key_file;
  app.add_option("--api-key-file", api_key_file, "read the API key from this file (keeps it out of the process list)");
  app.add_flag("--public-metrics", sc.metrics_without_key, "serve /metrics without the API key (for a scraper)");
  bool no_webui = false;
  app.add_flag("--no-webui", no_webui, "do not serve the chat page at / (then / is a 404)");
  app.add_option("--served-model-name", sc.served_model_name, "model name clients use (default: the GGUF file's stem)");
  add_engine_flags(app, ec, kv_cache_text);
  std::vector<std::string> lora_modules;
  app.add_option("--lora-modules", lora_modules,
                 "LoRA adapters served as model ids of their own: NAME=FILE ... (llama.cpp-format adapter GGUFs)");
  app.add_option("--max-body-bytes", max_body_bytes, "largest request body accepted (413 past it)")->check(CLI::PositiveNumber);
  app.add_option("--max-queued-requests", sc.max_queued_requests, "generate requests in flight at most (429 past it)")
      ->check(CLI::PositiveNumber);
  app.add_option("--max-n", max_n, "largest n (samples per prompt) accepted")->check(CLI::Range(1, 128));
  app.add_option("--http-threads", sc.num_http_threads,
                 "handler threads at most (a generate request holds one while it runs; idle connections hold none)")
      ->check(CLI::Range(2, 4096));
  app.add_option("--shutdown-grace", shutdown_grace_s, "seconds in-flight requests get to finish on SIGINT/SIGTERM")
      ->check(CLI::NonNegativeNumber);
  std::string kv_events_endpoint;
  std::string kv_events_instance;
  app.add_option("--kv-events", kv_events_endpoint,
                 "publish KV-cache events (vLLM's ZeroMQ + msgpack format) to this ZeroMQ endpoint: "
                 "tcp://HOST:PORT connects to a subscriber that bound it, tcp://*:PORT binds (default: off)");
  app.add_option("--kv-events-instance", kv_events_instance,
                 "instance name in the KV-event topic kv@<instance>@<model> (default: HOST:PORT of this server)");
  app.add_flag("-v,--verbose", ec.verbose, "start-up summary on stderr");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  sc.max_body_bytes = static_cast<size_t>(max_body_bytes);
  sc.webui = !no_webui;
  if (!api_key_file.empty()) {
    std::ifstream in(api_key_file);
    std::string key;
    if (!in || !std::getline(in, key) || key.empty()) {
      std::fprintf(stderr, "tessera serve: error: cannot read an API key from '%s'\n", api_key_file.c_str());
      return 1;
    }
    while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back()))) key.pop_back();
    sc.api_key = key;
  }
  sc.limits.max_n = max_n;
  if (const std::string err = finish_engine_flags(ec, kv_cache_text); !err.empty()) {
    std::fprintf(stderr, "tessera serve: error: %s\n", err.c_str());
    return 1;
  }
  if (const std::string err = parse_lora_modules(lora_modules, ec); !err.empty()) {
    std::fprintf(stderr, "tessera serve: error: %s\n", err.c_str());
    return 1;
  }
  if (sc.served_model_name.empty()) sc.served_model_name = fs::path(ec.model_path).stem().string();

  // Block the shutdown signals before any thread exists (the engine starts its own).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::unique_ptr<kv_events::KvEventPublisher> kv_publisher;
  if (!kv_events_endpoint.empty()) {
    Result<std::unique_ptr<kv_events::KvEventPublisher>> p = kv_events::KvEventPublisher::create(kv_events_endpoint);
    if (!p.ok()) {
      std::fprintf(stderr, "tessera serve: error: %s\n", p.error().message.c_str());
      return 1;
    }
    kv_publisher = std::move(p).value();
    ec.on_kv_events = [pub = kv_publisher.get()](KvEventBatch&& batch) { pub->publish(std::move(batch)); };
  }

  ec.verbose = true;  // the start-up summary (budget, blocks, concurrency) belongs in a server log
  ec.on_load_progress = load_progress_reporter(ec.model_path);
  // The port is open while the model loads: /health answers 503 "loading" (a gateway or an
  // orchestrator sees a replica that is starting, not one that is down), 200 once attached.
  server::HttpServer server(sc);
  Result<int> port = server.bind();
  if (!port.ok()) {
    std::fprintf(stderr, "tessera serve: %s\n", port.error().message.c_str());
    return 2;
  }
  std::fprintf(stderr, "tessera serve: listening on http://%s:%d%s; loading %s\n", sc.host.c_str(), port.value(),
               sc.api_key.empty() ? "" : " (API key required on every route but /health and the chat page)", ec.model_path.c_str());
  if (kv_publisher) {
    if (kv_events_instance.empty()) kv_events_instance = sc.host + ":" + std::to_string(port.value());
    const std::string topic = kv_events::event_topic(kv_events_instance, sc.served_model_name);
    kv_publisher->set_topic(topic);
    std::fprintf(stderr, "tessera serve: KV-cache events on %s, topic %s\n", kv_events_endpoint.c_str(),
                 topic.c_str());
  }
  std::fflush(stderr);
  std::thread listener([&] { server.listen(); });

  std::atomic<bool> loading{true};
  std::atomic<bool> serving{true};
  std::thread drain_thread;
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig == SIGUSR1 || !serving.load()) return;  // woken because the server stopped by itself
    if (loading.load()) {  // nothing was admitted yet, so there is nothing to drain
      std::fprintf(stderr, "tessera serve: %s received while loading; exiting\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
      std::fflush(stderr);
      std::_Exit(sig == SIGINT ? 130 : 0);
    }
    std::fprintf(stderr, "tessera serve: %s received; draining (grace %d s)\n",
                 sig == SIGINT ? "SIGINT" : "SIGTERM", shutdown_grace_s);
    drain_thread = std::thread([&] { server.shutdown(std::chrono::seconds(shutdown_grace_s)); });
    // The drain ends by itself within grace + ~0.6 s (HttpServer::shutdown closes idle and
    // trickling connections and cuts slow readers), and listen() returns. A second signal exits now.
    timespec limit{static_cast<time_t>(shutdown_grace_s) + 5, 0};
    const int next = sigtimedwait(&signals, nullptr, &limit);
    if (next == SIGUSR1) return;  // listen() returned: the drain finished
    if (next >= 0) {
      std::fprintf(stderr, "tessera serve: second signal; exiting now\n");
      std::fflush(stderr);
      std::_Exit(130);
    }
    // Not expected (the drain is bounded): a last resort, reported as the bug it would be.
    std::fprintf(stderr, "tessera serve: the drain did not finish within grace + 5 s (%d requests in flight); exiting\n",
                 server.counters().num_requests_in_flight);
    std::fflush(stderr);
    std::_Exit(3);
  });
  auto stop_signal_thread = [&] {
    serving.store(false);
    pthread_kill(signal_thread.native_handle(), SIGUSR1);
    signal_thread.join();
  };

  // Test hook (tests/e2e/test_backend_contract.py): with TESSERA_TEST_HOLD_LOAD=<file> the load
  // starts once <file> exists, so a test sees the loading state (/health 503, a signal that exits
  // at once) for as long as it needs on any host, instead of racing a load of a few seconds.
  if (const char* hold = std::getenv("TESSERA_TEST_HOLD_LOAD"); hold != nullptr && *hold != '\0') {
    std::fprintf(stderr, "tessera serve: load held until %s exists (TESSERA_TEST_HOLD_LOAD)\n", hold);
    std::fflush(stderr);
    while (!fs::exists(hold)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Result<std::unique_ptr<Engine>> engine = Engine::create(ec);
  if (!engine.ok()) {
    std::fprintf(stderr, "tessera serve: %s\n", engine.error().message.c_str());
    server.stop();
    listener.join();
    stop_signal_thread();
    return 1;
  }
  server.attach(*engine.value());
  loading.store(false);
  const ModelInfo& info = engine.value()->model_info();
  std::fprintf(stderr, "tessera serve: model %s as '%s' (context %d, %d KV blocks of %d tokens); ready\n",
               ec.model_path.c_str(), sc.served_model_name.c_str(), info.context_length, info.num_kv_blocks,
               info.block_size);
  if (sc.webui) std::fprintf(stderr, "tessera serve: chat page at http://%s:%d/\n", sc.host.c_str(), port.value());
  std::fflush(stderr);

  listener.join();
  stop_signal_thread();
  if (drain_thread.joinable()) drain_thread.join();
  engine.value()->shutdown(std::chrono::milliseconds(0));  // no-op after a graceful drain
  if (kv_publisher) {
    kv_publisher->shutdown();  // the engine thread, its only caller, has stopped
    const kv_events::PublisherCounters c = kv_publisher->counters();
    std::fprintf(stderr, "tessera serve: KV-cache events: %llu batches sent, %llu dropped\n",
                 static_cast<unsigned long long>(c.num_batches_sent),
                 static_cast<unsigned long long>(c.num_batches_dropped));
  }
  std::fprintf(stderr, "tessera serve: stopped\n");
  return 0;
}

}  // namespace tessera::cli
