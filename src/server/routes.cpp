// Routing, authentication and the small endpoints; the generate flow is in generate_handler.cpp.
//
//   route        method   answered
//   /v1/completions, /v1/chat/completions   POST   on a worker (handle_generate)
//   /v1/messages, /v1/messages/count_tokens  POST   on a worker (handle_messages; Anthropic shapes)
//   /v1/responses                            POST   on a worker (handle_responses)
//   /v1/responses/{id}                       GET, DELETE  at once (the stored answers)
//   /tokenize, /detokenize, /apply-template  POST   on a worker (tokenizing may take a while)
//   /v1/models, /v1/models/{id}              GET    at once (the base model and its LoRA adapters)
//   /v1/load_lora_adapter, /v1/unload_lora_adapter  POST  on a worker (lora_routes.h)
//   /health, /metrics                        GET    at once
//   /v1/loads, /loads, /server_info, /version GET   at once (backend_contract.h)
//   /, /index.html                           GET    at once: the chat page (webui.h), without
//                                                   the API key and while the model loads
// A known route with another method is a 405, anything else a 404. The request body is read as
// JSON whatever its Content-Type says (curl -d sends application/x-www-form-urlencoded), as vLLM
// and llama.cpp do.
#include <chrono>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "server/lora_routes.h"
#include "server/protocol_response.h"
#include "server/server_state.h"
#include "server/webui.h"

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

json model_card(const ServerState& state) {
  const ModelInfo& info = state.engine().model_info();
  // OpenAI's fields (object, created, owned_by) and Anthropic's (type, display_name, created_at):
  // both SDKs' models.list read the same card.
  return json{{"id", state.config.served_model_name}, {"object", "model"}, {"created", 0},
              {"owned_by", "tessera"}, {"type", "model"}, {"display_name", state.config.served_model_name},
              {"created_at", "1970-01-01T00:00:00Z"},
              // The file name only: the absolute path tells clients about the host's layout.
              {"root", std::filesystem::path(info.path).filename().string()}, {"max_model_len", info.context_length}};
}

// The base model or a loaded adapter (the tokenizer is the base model's either way).
std::optional<ApiError> check_model(const ServerState& state, const std::string& model) {
  std::string lora_name;
  return resolve_model(state, model, /*strict=*/true, &lora_name);
}

HttpResponse tokenize(ServerState& state, const HttpRequest& req) {
  TokenizeSpec spec;
  if (auto e = parse_tokenize_request(req.body, state.config.limits, &spec)) return error_response(*e);
  if (auto e = check_model(state, spec.model)) return error_response(*e);
  const Engine& engine = state.engine();
  const ModelInfo& info = engine.model_info();
  std::vector<int32_t> ids;
  if (spec.messages.empty()) {
    ids = engine.tokenize(spec.prompt, spec.add_special_tokens && info.add_bos, /*parse_special=*/true);
  } else {
    Result<ChatPrompt> prompt = engine.chat_prompt(chat_template_input(spec.messages), spec.add_special_tokens && info.add_bos);
    if (!prompt.ok()) return error_response(from_engine_error(prompt.error()));
    ids = std::move(prompt->ids);
  }
  return json_response(dump_json(json{{"tokens", ids}, {"count", ids.size()}, {"max_model_len", info.context_length}}));
}

// What the model is fed for a chat request: the body of /v1/chat/completions (messages, tools,
// tool_choice, chat_template_kwargs...) -> {"prompt": the rendered template, "tokens": its ids}.
HttpResponse apply_template(ServerState& state, const HttpRequest& req) {
  GenerateSpec spec;
  if (auto e = parse_generate_request(ApiKind::kChat, req.body, state.config.limits, &spec)) return error_response(*e);
  if (auto e = check_model(state, spec.model)) return error_response(*e);
  const Engine& engine = state.engine();
  ChatTemplateInput input{spec.chat.messages_json, spec.chat.tool_choice == ToolChoice::kNone ? "" : spec.chat.tools_json,
                          spec.chat.template_kwargs_json, /*add_generation_prompt=*/true};
  Result<ChatPrompt> prompt = engine.chat_prompt(input, engine.model_info().add_bos);
  if (!prompt.ok()) {
    ApiError e = from_engine_error(prompt.error());
    e.message = "Cannot apply the chat template: " + e.message;
    e.param = "messages";
    if (e.type == ErrorType::kInternal) e.type = ErrorType::kInvalidRequest;
    return error_response(e);
  }
  return json_response(dump_json(json{{"prompt", prompt->text}, {"tokens", prompt->ids}, {"count", prompt->ids.size()}}));
}

HttpResponse detokenize(ServerState& state, const HttpRequest& req) {
  DetokenizeSpec spec;
  if (auto e = parse_detokenize_request(req.body, &spec)) return error_response(*e);
  if (auto e = check_model(state, spec.model)) return error_response(*e);
  const int32_t vocab = state.engine().model_info().vocab_size;
  for (int32_t id : spec.tokens) {
    if (id >= vocab) {
      return error_response({ErrorType::kInvalidRequest,
                             fmt::format("token id {} is out of range (vocabulary size {})", id, vocab), "tokens"});
    }
  }
  return json_response(dump_json(json{{"prompt", state.engine().detokenize(spec.tokens)}}));
}

HttpResponse health(const ServerState& state) {
  if (state.draining.load()) return error_response({ErrorType::kUnavailable, "The server is shutting down", ""});
  return json_response(R"({"status":"ok"})");
}

HttpResponse metrics(const ServerState& state) {
  HttpResponse res;
  res.content_type = "text/plain; version=0.0.4; charset=utf-8";
  const MetricsSnapshot m = state.engine().metrics();
  res.body = render_prometheus(m, state.counters(), state.config.served_model_name) +
             render_vllm_compatible(m, state.engine().model_info(), state.config.served_model_name) +
             render_lora_metrics(m, state.engine().lora_adapters(), state.config.served_model_name,
                                 std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  return res;
}

// A handler that answers with one response from a worker thread.
BlockingHandler blocking(ServerState& state, HttpResponse (*fn)(ServerState&, const HttpRequest&)) {
  return [&state, fn](const HttpRequest& req, Responder& out) { out.respond(fn(state, req)); };
}

Routed now(HttpResponse response) { return Routed{std::move(response), nullptr}; }

// 405 with the Allow header naming the one method `path` takes.
Routed method_not_allowed(const HttpRequest& req, const char* allow) {
  HttpResponse res = error_response({ErrorType::kMethodNotAllowed,
                                     fmt::format("Method {} is not allowed on {}", req.method, req.path), ""});
  res.headers.emplace_back("Allow", allow);
  return now(std::move(res));
}

}  // namespace

HttpResponse json_response(std::string body) {
  HttpResponse res;
  res.body = std::move(body);
  return res;
}

HttpResponse error_response(const ApiError& error) {
  HttpResponse res;
  res.status = http_status(error.type);
  res.body = error_body(error);
  // Draining: come back later (a gateway retries on another replica meanwhile).
  if (res.status == 503) res.headers.emplace_back("Retry-After", "1");
  return res;
}

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key.size() == name.size() &&
        std::equal(key.begin(), key.end(), name.begin(), [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
      return value;
    }
  }
  return "";
}

Routed route(ServerState& state, const HttpRequest& req) {
  state.num_http_requests.fetch_add(1);
  const std::string& path = req.path;
  // The chat page holds no secret and asks for the key itself (on the API's 401), so it is served
  // before the key check; and before the ready check, so it can show that the model is loading.
  if (state.config.webui && (path == "/" || path == "/index.html")) {
    return req.method == "GET" ? now(webui_response()) : method_not_allowed(req, "GET");
  }
  const bool open_route = path == "/health" || (path == "/metrics" && state.config.metrics_without_key);
  auto error_now = [&](const ApiError& e) {
    HttpResponse res = error_response(e);
    if (anthropic_route(path)) res.body = anthropic_error_body(e);
    return now(std::move(res));
  };
  if (!state.config.api_key.empty() && !open_route) {
    // The key as a bearer token, or in x-api-key (how Anthropic's clients send ANTHROPIC_API_KEY).
    const std::string auth = req.header("Authorization");
    const std::string x_api_key = req.header("x-api-key");
    const bool ok = (!auth.empty() && constant_time_equal(auth, "Bearer " + state.config.api_key)) ||
                    (!x_api_key.empty() && constant_time_equal(x_api_key, state.config.api_key));
    if (!ok) {
      return error_now({ErrorType::kAuthentication,
                        auth.empty() && x_api_key.empty() ? "Missing API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'"
                                                          : "Incorrect API key provided",
                        ""});
    }
  }
  if (!state.ready()) {  // still loading the model: nothing but the health answer exists yet
    if (path == "/health" && req.method == "GET") {
      HttpResponse res = error_response({ErrorType::kUnavailable, "The model is loading", ""});
      res.body = R"({"status":"loading"})";
      return now(std::move(res));
    }
    return error_now({ErrorType::kUnavailable, "The model is loading; retry shortly", ""});
  }
  const bool get = req.method == "GET", post = req.method == "POST";
  const char* want = nullptr;  // the method a known route takes
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (post) {
      const ApiKind kind = path == "/v1/completions" ? ApiKind::kCompletion : ApiKind::kChat;
      return Routed{std::nullopt, [&state, kind](const HttpRequest& r, Responder& out) {
                      handle_generate(state, kind, r, out);
                    }};
    }
    want = "POST";
  } else if (path == "/v1/messages" || path == "/v1/messages/count_tokens") {
    if (post) {
      const bool count_only = path != "/v1/messages";
      return Routed{std::nullopt, [&state, count_only](const HttpRequest& r, Responder& out) {
                      handle_messages(state, count_only, r, out);
                    }};
    }
    want = "POST";
  } else if (path == "/v1/responses") {
    if (post) {
      return Routed{std::nullopt, [&state](const HttpRequest& r, Responder& out) { handle_responses(state, r, out); }};
    }
    want = "POST";
  } else if (path.rfind("/v1/responses/", 0) == 0 && path.size() > 14) {
    if (get || req.method == "DELETE") return now(stored_response(state, req, path.substr(14)));
    want = "GET, DELETE";
  } else if (path == "/tokenize" || path == "/detokenize" || path == "/apply-template") {
    if (post) {
      return Routed{std::nullopt, blocking(state, path == "/tokenize"     ? tokenize
                                                  : path == "/detokenize" ? detokenize
                                                                          : apply_template)};
    }
    want = "POST";
  } else if (path == "/v1/models") {
    if (get) {
      json data = json::array({model_card(state)});
      for (json& card : lora_model_cards(state)) data.push_back(std::move(card));
      const std::string last_id = data.back()["id"];
      return now(json_response(dump_json(json{{"object", "list"}, {"data", std::move(data)}, {"has_more", false},
                                              {"first_id", state.config.served_model_name},
                                              {"last_id", last_id}})));
    }
    want = "GET";
  } else if (path.rfind("/v1/models/", 0) == 0 && path.size() > 11) {
    if (get) {
      const std::string id = path.substr(11);
      if (auto card = lora_model_card(state, id)) return now(json_response(dump_json(*card)));
      if (id != state.config.served_model_name) {
        return now(error_response({ErrorType::kModelNotFound, fmt::format("The model `{}` does not exist.", id), "model"}));
      }
      return now(json_response(dump_json(model_card(state))));
    }
    want = "GET";
  } else if (path == "/v1/load_lora_adapter" || path == "/v1/unload_lora_adapter") {
    if (post) return Routed{std::nullopt, blocking(state, path == "/v1/load_lora_adapter" ? load_lora_adapter : unload_lora_adapter)};
    want = "POST";
  } else if (path == "/health") {
    if (get) return now(health(state));
    want = "GET";
  } else if (path == "/metrics") {
    if (get) return now(metrics(state));
    want = "GET";
  } else if (ContractRoutes::handles(path)) {  // /v1/loads, /loads, /server_info, /version
    if (get) {
      return now(json_response(dump_json(
          state.contract.answer(state.engine(), state.config.served_model_name, state.num_in_flight.load(), path, req.query))));
    }
    want = "GET";
  }
  if (want != nullptr) {
    Routed res = error_now({ErrorType::kMethodNotAllowed, fmt::format("Method {} is not allowed on {}", req.method, path), ""});
    res.now->headers.emplace_back("Allow", want);
    return res;
  }
  return error_now({ErrorType::kNotFound, fmt::format("Unknown route: {} {}", req.method, path), ""});
}

ServerCounters ServerState::counters() const {
  ServerCounters c;
  c.num_http_requests = num_http_requests.load();
  c.num_http_errors_4xx = num_errors_4xx.load();
  c.num_http_errors_5xx = num_errors_5xx.load();
  c.num_client_disconnects = num_client_disconnects.load();
  c.num_requests_in_flight = num_in_flight.load();
  return c;
}

}  // namespace tessera::server
