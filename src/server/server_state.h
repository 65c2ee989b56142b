// State shared by the HTTP handlers of one HttpServer (internal to src/server).
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

#include "server/api_error.h"
#include "server/http_server.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace tessera::server {

struct ServerState {
  Engine& engine;
  ServerConfig config;
  std::atomic<bool> draining{false};       // shutting down: new generate requests get 503
  std::atomic<bool> stopping{false};       // listener closing: streams end now
  std::atomic<int32_t> num_in_flight{0};   // generate requests between accept and last byte
  std::atomic<int64_t> num_http_requests{0};
  std::atomic<int64_t> num_errors_4xx{0};
  std::atomic<int64_t> num_errors_5xx{0};
  std::atomic<int64_t> num_client_disconnects{0};
  std::atomic<uint64_t> next_response_id{0};
  uint64_t id_salt = 0;                    // random per process, mixed into response ids

  ServerState(Engine& e, ServerConfig c) : engine(e), config(std::move(c)) {}

  // "cmpl-<16 hex>" / "chatcmpl-<16 hex>".
  std::string make_response_id(const char* prefix);
};

// Sets `res` to the error's status and OpenAI JSON body.
void set_error(httplib::Response& res, const ApiError& error);

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

// POST /v1/completions and /v1/chat/completions (generate_handler.cpp).
void handle_generate(ServerState& state, ApiKind kind, const httplib::Request& req,
                     httplib::Response& res);

}  // namespace tessera::server
