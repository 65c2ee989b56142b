// HttpServer: the OpenAI-compatible HTTP front of an Engine (Boost.Beast over asio underneath).
//
//   POST /v1/completions, /v1/chat/completions   generate (JSON or SSE stream)
//   GET  /v1/models, /v1/models/{id}              the served model
//   GET  /health, /metrics                        liveness, Prometheus text (tessera: and vllm: series)
//   GET  /v1/loads, /loads, /server_info, /version what a gateway reads (backend_contract.h)
//   POST /tokenize, /detokenize, /apply-template  the model's tokenizer and chat template
//   GET  /, /index.html                           the chat page (webui.h; no API key needed)
//
// Threads: num_io_threads run every connection with asynchronous I/O, so an idle, slow or
// half-sent connection holds no thread; requests on one connection are answered in order
// (pipelining). Handlers that may block (generate, tokenize) run on a worker pool of up to
// num_http_threads threads: they parse, validate, tokenize and submit, then wait on their request's
// RequestStream; the engine thread never waits on a client. A client that goes away while its
// request runs (noticed by a read kept pending on the socket, or a failed write) has its engine
// request aborted within one poll. Limits: headers within header_timeout_ms, 16 KiB and 100
// fields (431), bodies within max_body_bytes for every framing (413, before the body is buffered).
// With an api_key every request but GET /health, the chat page (and /metrics when
// metrics_without_key) needs "Authorization: Bearer <key>". Every error leaves through the one
// table in api_error.h.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "server/prometheus.h"
#include "server/protocol.h"
#include "tessera/engine.h"
#include "util/status.h"

namespace tessera::server {

struct ServerConfig {
  std::string host = "127.0.0.1";       // loopback unless told otherwise
  int32_t port = 8000;                  // 0 = any free port (see HttpServer::bind)
  std::string api_key;                  // "" = no authentication; else required on every route but /health and /
  bool metrics_without_key = false;     // /metrics open even with an api_key (a scraper without the key)
  std::string served_model_name;        // the only model name requests may use
  bool webui = true;                    // GET / serves the chat page (webui.h); off: / is a 404
  size_t max_body_bytes = 8u << 20;     // larger bodies get 413
  int32_t max_queued_requests = 256;    // generate requests in flight; 429 past it
  int32_t num_http_threads = 320;       // handler threads at most, started on demand (a generate request
                                        // holds one while it runs; idle connections hold none)
  int32_t num_io_threads = 2;           // threads running the connections' asynchronous I/O
  int32_t header_timeout_ms = 10000;    // a request's headers must arrive within this (slowloris)
  int32_t body_timeout_ms = 30000;      // and its body within this after them (408 past it)
  int32_t stream_poll_ms = 50;          // how long a stream waits for engine output per pull
  int32_t keep_alive_interval_ms = 1000;  // SSE comment after this much silence (detects gone clients)
  ProtocolLimits limits;
};

class HttpServer {
 public:
  // Serves `engine` from the start.
  HttpServer(Engine& engine, ServerConfig config);
  // Serves before the model has loaded: /health answers 503 {"status":"loading"} and every other
  // route 503 with Retry-After (a gateway keeps the replica out of rotation) until attach().
  explicit HttpServer(ServerConfig config);
  // The model is ready: every route answers from now on. Once, from any thread.
  void attach(Engine& engine);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket and returns the bound port (the chosen one when port is 0).
  // Also sets SIGPIPE to ignored: a write to a gone client must fail, not kill the process.
  Result<int> bind();
  // Serves until shutdown()/stop(); blocks the calling thread. Requires bind().
  void listen();
  // Drain: new generate requests and /health get 503 with Retry-After, idle and half-sent
  // connections close, the engine finishes in-flight requests for up to `grace` and aborts the
  // rest (Engine::shutdown), their answers flush (at most 0.5 s more), then stop(). Returns within
  // grace + ~0.6 s whatever the clients do.
  void shutdown(std::chrono::milliseconds grace);
  // Immediate stop: the listener and every connection close, handlers end (streams with an error
  // event), listen() returns; the engine is left alone. Returns once listen() has.
  void stop();

  ServerCounters counters() const;
  const ServerConfig& config() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::server
