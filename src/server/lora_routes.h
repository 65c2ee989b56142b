// LoRA adapters at the HTTP front (vLLM's contract): each loaded adapter is a model id of its own
// in /v1/models (`parent` = the served base model), a request picks one by its `model` field, and
// POST /v1/load_lora_adapter {"lora_name", "lora_path"} / POST /v1/unload_lora_adapter
// {"lora_name"} change the set at run time (behind the API key, as every route but /health).
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/http_exchange.h"
#include "server/server_state.h"

namespace tessera::server {

// The cards of the loaded adapters, for /v1/models (by name).
nlohmann::json lora_model_cards(const ServerState& state);
// The card of adapter `id`, or nullopt when no adapter has that name.
std::optional<nlohmann::json> lora_model_card(const ServerState& state, const std::string& id);

// The adapter a request's `model` names: "" for the base model (empty or the served name), the
// name when an adapter of that name is loaded. An unknown name: the 404 (strict), or the base
// model (the agent APIs, which answer any model id with the one served model).
std::optional<ApiError> resolve_model(const ServerState& state, const std::string& model, bool strict,
                                      std::string* lora_name);

HttpResponse load_lora_adapter(ServerState& state, const HttpRequest& req);
HttpResponse unload_lora_adapter(ServerState& state, const HttpRequest& req);

}  // namespace tessera::server
