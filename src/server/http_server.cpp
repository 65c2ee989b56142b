// Routing, authentication, limits and the small endpoints; the generate flow is in
// generate_handler.cpp. See http_server.h for the contract.
#include "server/http_server.h"

#include <httplib.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "server/protocol_response.h"
#include "server/server_state.h"
#include "util/log.h"

namespace tessera::server {
namespace {

using json = nlohmann::json;

// Compares without an early exit, so the key cannot be found byte by byte from timings.
bool constant_time_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

void set_json(httplib::Response& res, const json& body) {
  res.status = 200;
  res.set_content(dump_json(body), "application/json");
}

json model_card(const ServerState& state) {
  const ModelInfo& info = state.engine.model_info();
  return json{{"id", state.config.served_model_name}, {"object", "model"}, {"created", 0},
              {"owned_by", "tessera"},
              // The file name only: the absolute path tells clients about the host's layout.
              {"root", std::filesystem::path(info.path).filename().string()}, {"max_model_len", info.context_length}};
}

// NOTE(server): the packaged cpp-httplib listens with a backlog of 5. Under a burst of connections
// (64 clients at once) the accept queue overflows and clients see reset connections, so the
// bound socket is put back into listen() with a real backlog (Linux updates it in place).
class Listener : public httplib::Server {
 public:
  bool widen_backlog(int backlog) { return ::listen(svr_sock_, backlog) == 0; }
  // Closes a bound socket whose accept loop never ran (httplib's stop() only stops a running one).
  void close_unused_socket() {
    const int fd = svr_sock_.exchange(-1);
    if (fd >= 0) {
      ::shutdown(fd, SHUT_RDWR);
      ::close(fd);
    }
  }
};

}  // namespace

void set_error(httplib::Response& res, const ApiError& error) {
  res.status = http_status(error.type);
  res.set_content(error_body(error), "application/json");
}

struct HttpServer::Impl {
  ServerState state;
  Listener http;
  int bound_port = -1;
  std::mutex listen_mu;                  // orders listen() against stop()
  std::atomic<bool> listen_active{false};  // listen() is inside (or about to enter) the accept loop

  Impl(Engine& engine, ServerConfig config) : state(engine, std::move(config)) {
    state.id_salt = std::random_device{}() * 0x100000001B3ull ^ std::random_device{}();
    const size_t num_threads = static_cast<size_t>(std::max(2, state.config.num_http_threads));
    http.new_task_queue = [num_threads] { return new httplib::ThreadPool(num_threads); };
    http.set_payload_max_length(state.config.max_body_bytes);
    http.set_keep_alive_timeout(5);
    http.set_read_timeout(30);
    http.set_write_timeout(30);
    install_routes();
  }

  // Returns Handled (with the error set) when the request may not proceed.
  httplib::Server::HandlerResponse pre_route(const httplib::Request& req, httplib::Response& res) {
    state.num_http_requests.fetch_add(1);
    const bool open_route = req.path == "/health" || (req.path == "/metrics" && state.config.metrics_without_key);
    if (!state.config.api_key.empty() && !open_route) {
      const std::string auth = req.get_header_value("Authorization");
      const std::string want = "Bearer " + state.config.api_key;
      if (auth.empty() || !constant_time_equal(auth, want)) {
        set_error(res, ApiError{ErrorType::kAuthentication,
                                auth.empty() ? "Missing API key: send 'Authorization: Bearer <key>'"
                                             : "Incorrect API key provided",
                                ""});
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  }

  void install_routes() {
    http.set_pre_routing_handler(
        [this](const httplib::Request& req, httplib::Response& res) { return pre_route(req, res); });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      handle_generate(state, ApiKind::kCompletion, req, res);
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      handle_generate(state, ApiKind::kChat, req, res);
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      set_json(res, json{{"object", "list"}, {"data", json::array({model_card(state)})}});
    });
    http.Get("/v1/models/(.+)", [this](const httplib::Request& req, httplib::Response& res) {
      const std::string id = req.matches[1];
      if (id != state.config.served_model_name) {
        return set_error(res, ApiError{ErrorType::kModelNotFound,
                                       fmt::format("The model `{}` does not exist.", id), "model"});
      }
      set_json(res, model_card(state));
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      if (state.draining.load()) {
        return set_error(res, ApiError{ErrorType::kUnavailable, "The server is shutting down", ""});
      }
      set_json(res, json{{"status", "ok"}});
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.status = 200;
      res.set_content(render_prometheus(state.engine.metrics(), counters(), state.config.served_model_name),
                      "text/plain; version=0.0.4; charset=utf-8");
    });
    http.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) { tokenize(req, res); });
    http.Post("/apply-template", [this](const httplib::Request& req, httplib::Response& res) {
      apply_template(req, res);
    });
    http.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
      detokenize(req, res);
    });
    // Known paths with the wrong method: 405, not 404.
    for (const char* path : {"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"}) {
      http.Get(path, [this](const httplib::Request& req, httplib::Response& res) { wrong_method(req, res); });
    }
    for (const char* path : {"/v1/models", "/health", "/metrics"}) {
      http.Post(path, [this](const httplib::Request& req, httplib::Response& res) { wrong_method(req, res); });
    }
    http.set_error_handler(httplib::Server::HandlerWithResponse(
        [this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // already ours
      if (res.status == 413) {
        set_error(res, ApiError{ErrorType::kPayloadTooLarge,
                                fmt::format("Request body too large (limit {} bytes)", state.config.max_body_bytes),
                                ""});
      } else if (res.status == 404) {
        set_error(res, ApiError{ErrorType::kNotFound,
                                fmt::format("Unknown route: {} {}", req.method, req.path), ""});
      } else {
        const int status = res.status;
        set_error(res, ApiError{status >= 500 ? ErrorType::kInternal : ErrorType::kInvalidRequest,
                                fmt::format("HTTP error {}", status), ""});
        res.status = status;
      }
      return httplib::Server::HandlerResponse::Handled;
    }));
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown exception";
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      set_error(res, ApiError{ErrorType::kInternal, "Internal server error: " + what, ""});
    });
    http.set_logger([this](const httplib::Request&, const httplib::Response& res) {
      if (res.status >= 500) state.num_errors_5xx.fetch_add(1);
      else if (res.status >= 400) state.num_errors_4xx.fetch_add(1);
    });
  }

  void wrong_method(const httplib::Request& req, httplib::Response& res) {
    set_error(res, ApiError{ErrorType::kMethodNotAllowed,
                            fmt::format("Method {} is not allowed on {}", req.method, req.path), ""});
  }

  std::optional<ApiError> check_model(const std::string& model) const {
    if (model.empty() || model == state.config.served_model_name) return std::nullopt;
    return ApiError{ErrorType::kModelNotFound, fmt::format("The model `{}` does not exist.", model), "model"};
  }

  void tokenize(const httplib::Request& req, httplib::Response& res) {
    TokenizeSpec spec;
    if (auto e = parse_tokenize_request(req.body, state.config.limits, &spec)) return set_error(res, *e);
    if (auto e = check_model(spec.model)) return set_error(res, *e);
    const Engine& engine = state.engine;
    const ModelInfo& info = engine.model_info();
    std::vector<int32_t> ids;
    if (spec.messages.empty()) {
      ids = engine.tokenize(spec.prompt, spec.add_special_tokens && info.add_bos, /*parse_special=*/true);
    } else {
      Result<std::string> text = engine.apply_chat_template(spec.messages, true);
      if (!text.ok()) return set_error(res, from_engine_error(text.error()));
      // As the generate path does: the model's BOS, never twice.
      ids = engine.tokenize(text.value(), spec.add_special_tokens && info.add_bos, /*parse_special=*/true);
      if (ids.size() >= 2 && info.bos_id >= 0 && ids[0] == info.bos_id && ids[1] == info.bos_id) {
        ids.erase(ids.begin());
      }
    }
    set_json(res, json{{"tokens", ids}, {"count", ids.size()}, {"max_model_len", info.context_length}});
  }

  // What the model is fed for a chat request: the body of /v1/chat/completions (messages, tools,
  // tool_choice, chat_template_kwargs...) -> {"prompt": the rendered template, "tokens": its ids}.
  void apply_template(const httplib::Request& req, httplib::Response& res) {
    GenerateSpec spec;
    if (auto e = parse_generate_request(ApiKind::kChat, req.body, state.config.limits, &spec)) return set_error(res, *e);
    if (auto e = check_model(spec.model)) return set_error(res, *e);
    const Engine& engine = state.engine;
    const ModelInfo& info = engine.model_info();
    ChatTemplateInput input{spec.chat.messages_json, spec.chat.tool_choice == ToolChoice::kNone ? "" : spec.chat.tools_json,
                            spec.chat.template_kwargs_json, /*add_generation_prompt=*/true};
    Result<std::string> text = engine.render_chat(input);
    if (!text.ok()) {
      ApiError e = from_engine_error(text.error());
      e.message = "Cannot apply the chat template: " + e.message;
      e.param = "messages";
      if (e.type == ErrorType::kInternal) e.type = ErrorType::kInvalidRequest;
      return set_error(res, e);
    }
    std::vector<int32_t> ids = engine.tokenize(text.value(), info.add_bos, /*parse_special=*/true);
    if (ids.size() >= 2 && info.bos_id >= 0 && ids[0] == info.bos_id && ids[1] == info.bos_id) ids.erase(ids.begin());
    set_json(res, json{{"prompt", text.value()}, {"tokens", ids}, {"count", ids.size()}});
  }

  void detokenize(const httplib::Request& req, httplib::Response& res) {
    DetokenizeSpec spec;
    if (auto e = parse_detokenize_request(req.body, &spec)) return set_error(res, *e);
    if (auto e = check_model(spec.model)) return set_error(res, *e);
    const int32_t vocab = state.engine.model_info().vocab_size;
    for (int32_t id : spec.tokens) {
      if (id >= vocab) {
        return set_error(res, ApiError{ErrorType::kInvalidRequest,
                                       fmt::format("token id {} is out of range (vocabulary size {})", id, vocab),
                                       "tokens"});
      }
    }
    set_json(res, json{{"prompt", state.engine.detokenize(spec.tokens)}});
  }

  ServerCounters counters() const {
    ServerCounters c;
    c.num_http_requests = state.num_http_requests.load();
    c.num_http_errors_4xx = state.num_errors_4xx.load();
    c.num_http_errors_5xx = state.num_errors_5xx.load();
    c.num_client_disconnects = state.num_client_disconnects.load();
    c.num_requests_in_flight = state.num_in_flight.load();
    return c;
  }
};

HttpServer::HttpServer(Engine& engine, ServerConfig config)
    : impl_(std::make_unique<Impl>(engine, std::move(config))) {
  if (impl_->state.config.served_model_name.empty()) {
    impl_->state.config.served_model_name = engine.model_info().name;
  }
}

HttpServer::~HttpServer() { stop(); }

Result<int> HttpServer::bind() {
  ::signal(SIGPIPE, SIG_IGN);
  const ServerConfig& c = impl_->state.config;
  int port = c.port;
  if (c.port == 0) {
    port = impl_->http.bind_to_any_port(c.host);
    if (port <= 0) return make_error(ErrorCode::kIo, "cannot bind {} to any port", c.host);
  } else if (!impl_->http.bind_to_port(c.host, c.port)) {
    return make_error(ErrorCode::kIo, "cannot bind {}:{} (in use, or not a local address?)", c.host, c.port);
  }
  if (!impl_->http.widen_backlog(1024)) TESSERA_LOG_WARN("server: could not widen the listen backlog");
  impl_->bound_port = port;
  return port;
}

void HttpServer::listen() {
  TESSERA_CHECK(impl_->bound_port > 0, "HttpServer::listen() before bind()");
  {
    std::lock_guard<std::mutex> lock(impl_->listen_mu);
    if (impl_->state.stopping.load()) return;
    impl_->listen_active.store(true);
  }
  impl_->http.listen_after_bind();
  impl_->listen_active.store(false);
}

void HttpServer::shutdown(std::chrono::milliseconds grace) {
  ServerState& s = impl_->state;
  s.draining.store(true);
  s.engine.shutdown(grace);
  // Let handlers write the last events of what finished or was aborted.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (s.num_in_flight.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop();
}

void HttpServer::stop() {
  {
    std::lock_guard<std::mutex> lock(impl_->listen_mu);
    impl_->state.stopping.store(true);
  }
  // NOTE(server): httplib's stop() does nothing until the accept loop runs; wait for it to start.
  while (impl_->listen_active.load() && !impl_->http.is_running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (impl_->listen_active.load()) {
    impl_->http.stop();
  } else {
    impl_->http.close_unused_socket();
  }
}

ServerCounters HttpServer::counters() const { return impl_->counters(); }
const ServerConfig& HttpServer::config() const { return impl_->state.config; }

}  // namespace tessera::server
