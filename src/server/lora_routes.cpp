#include "server/lora_routes.h"

#include <filesystem>

#include <fmt/format.h>

#include "server/json_fields.h"
#include "server/protocol_response.h"

namespace tessera::server {
namespace {

nlohmann::json card_of(const ServerState& state, const LoraAdapterInfo& a) {
  return nlohmann::json{{"id", a.name}, {"object", "model"}, {"created", a.created}, {"owned_by", "tessera"},
                        {"type", "model"}, {"display_name", a.name},
                        {"root", std::filesystem::path(a.path).filename().string()},
                        {"parent", state.config.served_model_name},
                        {"max_model_len", state.engine().model_info().context_length}};
}

// A load's refusal as the client sees it: a missing file is a 404, anything else about the
// adapter (its format, its fit to the base model, the name) a 400; never a 500.
ApiError lora_error(const Error& e, const char* param) {
  return {e.code == ErrorCode::kNotFound ? ErrorType::kNotFound : ErrorType::kInvalidRequest, e.message, param};
}

}  // namespace

nlohmann::json lora_model_cards(const ServerState& state) {
  nlohmann::json cards = nlohmann::json::array();
  for (const LoraAdapterInfo& a : state.engine().lora_adapters()) cards.push_back(card_of(state, a));
  return cards;
}

std::optional<nlohmann::json> lora_model_card(const ServerState& state, const std::string& id) {
  for (const LoraAdapterInfo& a : state.engine().lora_adapters()) {
    if (a.name == id) return card_of(state, a);
  }
  return std::nullopt;
}

std::optional<ApiError> resolve_model(const ServerState& state, const std::string& model, bool strict,
                                      std::string* lora_name) {
  lora_name->clear();
  if (model.empty() || model == state.config.served_model_name) return std::nullopt;
  for (const LoraAdapterInfo& a : state.engine().lora_adapters()) {
    if (a.name == model) {
      *lora_name = model;
      return std::nullopt;
    }
  }
  if (!strict) return std::nullopt;
  return ApiError{ErrorType::kModelNotFound,
                  fmt::format("The model `{}` does not exist. This server serves `{}`.", model,
                              state.config.served_model_name),
                  "model"};
}

HttpResponse load_lora_adapter(ServerState& state, const HttpRequest& req) {
  json body;
  if (auto e = parse_object(req.body, &body)) return error_response(*e);
  if (auto e = check_unknown_fields(body, {"lora_name", "lora_path"})) return error_response(*e);
  Fields f(body);
  std::string name, path;
  if (auto e = f.string("lora_name", &name)) return error_response(*e);
  if (auto e = f.string("lora_path", &path)) return error_response(*e);
  if (name.empty()) return error_response(bad("lora_name", "lora_name is required"));
  if (path.empty()) return error_response(bad("lora_path", "lora_path is required"));
  if (name == state.config.served_model_name) {
    return error_response(bad("lora_name", fmt::format("'{}' is the base model's name", name)));
  }
  Status loaded = state.engine().load_lora_adapter(name, path);
  if (!loaded.ok()) return error_response(lora_error(loaded.error(), "lora_path"));
  HttpResponse res;
  res.content_type = "text/plain; charset=utf-8";
  res.body = fmt::format("Success: LoRA adapter '{}' added successfully.", name);
  return res;
}

HttpResponse unload_lora_adapter(ServerState& state, const HttpRequest& req) {
  json body;
  if (auto e = parse_object(req.body, &body)) return error_response(*e);
  if (auto e = check_unknown_fields(body, {"lora_name", "lora_int_id"})) return error_response(*e);
  Fields f(body);
  std::string name;
  if (auto e = f.string("lora_name", &name)) return error_response(*e);
  if (name.empty()) return error_response(bad("lora_name", "lora_name is required"));
  Status unloaded = state.engine().unload_lora_adapter(name);
  if (!unloaded.ok()) return error_response(lora_error(unloaded.error(), "lora_name"));
  HttpResponse res;
  res.content_type = "text/plain; charset=utf-8";
  res.body = fmt::format("Success: LoRA adapter '{}' removed successfully.", name);
  return res;
}

}  // namespace tessera::server
