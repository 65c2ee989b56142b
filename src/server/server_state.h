// State shared by the HTTP handlers of one HttpServer, the router and the generate handler
// (internal to src/server).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "server/api_error.h"
#include "server/backend_contract.h"
#include "server/http_exchange.h"
#include "server/http_server.h"

namespace tessera::server {

struct ServerState {
  ServerConfig config;
  std::atomic<bool> draining{false};       // shutting down: new generate requests and /health get 503
  std::atomic<bool> stopping{false};       // connections closing: handlers end now
  std::atomic<int32_t> num_in_flight{0};   // generate requests between accept and last byte
  std::atomic<int64_t> num_http_requests{0};
  std::atomic<int64_t> num_errors_4xx{0};
  std::atomic<int64_t> num_errors_5xx{0};
  std::atomic<int64_t> num_client_disconnects{0};
  std::atomic<uint64_t> next_response_id{0};
  uint64_t id_salt = 0;                    // random per process, mixed into response ids
  ContractRoutes contract;                 // /v1/loads, /server_info, /version (backend_contract.h)

 private:
  std::atomic<Engine*> engine_{nullptr};

 public:

  explicit ServerState(ServerConfig c) : config(std::move(c)) {}

  // The engine, once the model has loaded (HttpServer::attach). Before that route() answers 503
  // "loading" and never reaches a handler, so every handler may call engine() unconditionally.
  bool ready() const { return engine_.load(std::memory_order_acquire) != nullptr; }
  Engine& engine() const { return *engine_.load(std::memory_order_acquire); }
  void attach(Engine& e) { engine_.store(&e, std::memory_order_release); }

  // "cmpl-<16 hex>" / "chatcmpl-<16 hex>".
  std::string make_response_id(const char* prefix);
  ServerCounters counters() const;
};

// Holds one slot of ServerState::num_in_flight for as long as it lives.
class InFlightSlot {
 public:
  explicit InFlightSlot(ServerState& state) : state_(&state) {}
  ~InFlightSlot() { state_->num_in_flight.fetch_sub(1); }
  InFlightSlot(const InFlightSlot&) = delete;
  InFlightSlot& operator=(const InFlightSlot&) = delete;

 private:
  ServerState* state_;
};

// A handler that may block (on the engine, on tokenizing a large body): run off the I/O threads.
using BlockingHandler = std::function<void(const HttpRequest&, Responder&)>;

// What the router makes of a request (routes.cpp): the answer now (small routes, every routing
// and authentication error), or the handler to run on a worker thread.
struct Routed {
  std::optional<HttpResponse> now;
  BlockingHandler later;
};
Routed route(ServerState& state, const HttpRequest& request);

// POST /v1/completions and /v1/chat/completions (generate_handler.cpp).
void handle_generate(ServerState& state, ApiKind kind, const HttpRequest& request, Responder& responder);
// POST /v1/messages (count_only: /v1/messages/count_tokens) (anthropic_write.cpp).
void handle_messages(ServerState& state, bool count_only, const HttpRequest& request, Responder& responder);
// POST /v1/responses (responses_write.cpp).
void handle_responses(ServerState& state, const HttpRequest& request, Responder& responder);

}  // namespace tessera::server
