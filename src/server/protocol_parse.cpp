// Request parsing and validation for the OpenAI endpoints (see protocol.h for the rules).
#include <limits>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "server/json_fields.h"
#include "server/protocol.h"
#include "server/chat_tools_parse.h"
#include "server/structured_output_parse.h"

namespace tessera::server {
namespace {

// "prompt": string | [string...] | [int...] | [[int...]...]
std::optional<ApiError> parse_prompt(const json* v, const ProtocolLimits& limits,
                                     std::vector<PromptInput>* out) {
  if (v == nullptr) return bad("prompt", "'prompt' is required");
  if (v->is_string()) {
    out->push_back({false, v->get<std::string>(), {}});
    return std::nullopt;
  }
  if (!v->is_array()) {
    return bad("prompt", fmt::format("'prompt' must be a string, a list of strings or a list of "
                                     "token ids, got {}", type_word(*v)));
  }
  if (v->empty()) return bad("prompt", "'prompt' must not be an empty list");
  const json& first = v->front();
  if (first.is_number_integer()) {
    PromptInput p{true, "", {}};
    TESSERA_API_TRY(parse_token_ids(*v, "prompt", &p.ids));
    out->push_back(std::move(p));
    return std::nullopt;
  }
  if (static_cast<int64_t>(v->size()) > limits.max_prompts) {
    return bad("prompt", fmt::format("'prompt' holds {} prompts; at most {} per request", v->size(),
                                     limits.max_prompts));
  }
  for (const json& item : *v) {
    if (item.is_string() && first.is_string()) {
      out->push_back({false, item.get<std::string>(), {}});
    } else if (item.is_array() && first.is_array()) {
      if (item.empty()) return bad("prompt", "'prompt' token id lists must not be empty");
      PromptInput p{true, "", {}};
      TESSERA_API_TRY(parse_token_ids(item, "prompt", &p.ids));
      out->push_back(std::move(p));
    } else {
      return bad("prompt", "'prompt' list items must all be strings, all token ids, or all lists "
                           "of token ids");
    }
  }
  return std::nullopt;
}

std::optional<ApiError> parse_message_content(const json& m, const std::string& role, size_t index,
                                              std::string* out) {
  auto it = m.find("content");
  const std::string param = fmt::format("messages[{}].content", index);
  if (it == m.end() || it->is_null()) {
    if (role == "assistant") return std::nullopt;
    return bad(param, fmt::format("'{}' is required", param));
  }
  if (it->is_string()) {
    *out = it->get<std::string>();
    return std::nullopt;
  }
  if (!it->is_array()) {
    return bad(param, fmt::format("'{}' must be a string or a list of text parts, got {}", param,
                                  type_word(*it)));
  }
  for (const json& part : *it) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      return bad(param, fmt::format("'{}' parts must be objects with a 'type'", param));
    }
    if (part["type"] != "text") {
      return bad(param, fmt::format("'{}' part type '{}' is not supported (text only)", param,
                                    part["type"].get<std::string>()));
    }
    if (!part.contains("text") || !part["text"].is_string()) {
      return bad(param, fmt::format("'{}' text parts need a string 'text'", param));
    }
    *out += part["text"].get<std::string>();
  }
  return std::nullopt;
}

std::optional<ApiError> parse_messages(const json* v, const ProtocolLimits& limits,
                                       std::vector<ChatMessage>* out) {
  if (v == nullptr) return bad("messages", "'messages' is required");
  if (!v->is_array()) return Fields::type_error("messages", "a list of messages", *v);
  if (v->empty()) return bad("messages", "'messages' must not be empty");
  if (static_cast<int64_t>(v->size()) > limits.max_messages) {
    return bad("messages", fmt::format("'messages' holds {} messages; at most {}", v->size(),
                                       limits.max_messages));
  }
  static const std::set<std::string> kRoles = {"system", "developer", "user", "assistant", "tool"};
  static const std::set<std::string> kMessageKeys = {"role", "content", "name", "tool_call_id", "tool_calls",
                                                     "reasoning_content"};
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!m.is_object()) {
      return bad(param, fmt::format("'{}' must be an object, got {}", param, type_word(m)));
    }
    for (auto it = m.begin(); it != m.end(); ++it) {
      if (kMessageKeys.count(it.key()) == 0) {
        return bad(param, fmt::format("'{}' has an unsupported field '{}'", param, it.key()));
      }
    }
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      return bad(param + ".role", fmt::format("'{}.role' must be a string", param));
    }
    const std::string role_name = role->get<std::string>();
    if (kRoles.count(role_name) == 0) {
      return bad(param + ".role", fmt::format("'{}.role' must be one of system, developer, user, "
                                              "assistant, tool; got '{}'", param, role_name));
    }
    ChatMessage msg{role_name, ""};
    TESSERA_API_TRY(check_message_tool_calls(m, i));
    TESSERA_API_TRY(parse_message_content(m, role_name, i, &msg.content));
    out->push_back(std::move(msg));
  }
  return std::nullopt;
}

std::optional<ApiError> parse_stop(const json* v, const ProtocolLimits& limits,
                                   std::vector<std::string>* out) {
  if (v == nullptr) return std::nullopt;
  std::vector<std::string> stops;
  if (v->is_string()) {
    stops.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const json& s : *v) {
      if (!s.is_string()) return bad("stop", "'stop' list items must be strings");
      stops.push_back(s.get<std::string>());
    }
  } else {
    return Fields::type_error("stop", "a string or a list of strings", *v);
  }
  if (static_cast<int64_t>(stops.size()) > limits.max_stop) {
    return bad("stop", fmt::format("'stop' holds {} strings; at most {}", stops.size(), limits.max_stop));
  }
  for (const std::string& s : stops) {
    if (s.empty()) return bad("stop", "'stop' strings must not be empty");
    if (static_cast<int64_t>(s.size()) > limits.max_stop_len) {
      return bad("stop", fmt::format("'stop' strings must be at most {} bytes", limits.max_stop_len));
    }
  }
  *out = std::move(stops);
  return std::nullopt;
}

// Fields shared by both endpoints: sampling, stopping, streaming.
std::optional<ApiError> parse_common(const Fields& f, const ProtocolLimits& limits, GenerateSpec* spec) {
  SamplingParams& p = spec->params;
  TESSERA_API_TRY(f.string("model", &spec->model));
  TESSERA_API_TRY(f.number("temperature", 0.0, 2.0, &p.temperature));
  TESSERA_API_TRY(f.number("top_p", 0.0, 1.0, &p.top_p));
  if (p.top_p <= 0.0f) return bad("top_p", "'top_p' must be in (0, 1]");
  TESSERA_API_TRY(f.number("min_p", 0.0, 1.0, &p.min_p));
  TESSERA_API_TRY(f.number("presence_penalty", -2.0, 2.0, &p.presence_penalty));
  TESSERA_API_TRY(f.number("frequency_penalty", -2.0, 2.0, &p.frequency_penalty));
  TESSERA_API_TRY(f.number("repetition_penalty", 0.01, 10.0, &p.repetition_penalty));
  int64_t x = 0;
  if (auto e = f.integer("top_k", -1, 1 << 20, &x)) return e;
  if (f.get("top_k") != nullptr) p.top_k = static_cast<int32_t>(x);
  if (f.get("n") != nullptr) {
    TESSERA_API_TRY(f.integer("n", 1, limits.max_n, &x));
    p.n = static_cast<int32_t>(x);
  }
  if (f.get("seed") != nullptr) {
    TESSERA_API_TRY(f.integer("seed", std::numeric_limits<int64_t>::min(),
                              std::numeric_limits<int64_t>::max(), &x));
    p.seed = static_cast<uint64_t>(x);
  }
  if (f.get("min_tokens") != nullptr) {
    TESSERA_API_TRY(f.integer("min_tokens", 0, limits.max_tokens, &x));
    p.min_tokens = static_cast<int32_t>(x);
  }
  TESSERA_API_TRY(parse_stop(f.get("stop"), limits, &p.stop));
  if (const json* ids = f.get("stop_token_ids")) {
    if (!ids->is_array()) return Fields::type_error("stop_token_ids", "a list of token ids", *ids);
    TESSERA_API_TRY(parse_token_ids(*ids, "stop_token_ids", &p.stop_token_ids));
  }
  TESSERA_API_TRY(f.boolean("ignore_eos", &p.ignore_eos));
  TESSERA_API_TRY(f.boolean("include_stop_str_in_output", &p.include_stop_str_in_output));
  TESSERA_API_TRY(f.boolean("stream", &spec->stream));
  if (const json* so = f.get("stream_options")) {
    if (!so->is_object()) return Fields::type_error("stream_options", "an object", *so);
    for (auto it = so->begin(); it != so->end(); ++it) {
      if (it.key() != "include_usage" && it.key() != "continuous_usage_stats") {
        return bad("stream_options", fmt::format("Unrecognized stream option: {}", it.key()));
      }
    }
    TESSERA_API_TRY(Fields(*so).boolean("include_usage", &spec->include_usage));
    if (!spec->stream) return bad("stream_options", "'stream_options' is only allowed with stream");
  }
  std::string ignored;
  TESSERA_API_TRY(f.string("user", &ignored));
  TESSERA_API_TRY(f.string("cache_salt", &spec->cache_salt));
  TESSERA_API_TRY(parse_structured_output(f, &p));
  if (const json* bias = f.get("logit_bias")) {
    if (!bias->is_object()) return Fields::type_error("logit_bias", "an object", *bias);
    if (!bias->empty()) return ApiError{ErrorType::kNotImplemented, "'logit_bias' is not supported", "logit_bias"};
  }
  return std::nullopt;
}

std::optional<ApiError> set_max_tokens(const Fields& f, const char* key, const ProtocolLimits& limits,
                                       GenerateSpec* spec) {
  int64_t x = 0;
  bool given = false;
  TESSERA_API_TRY(f.integer(key, 1, limits.max_tokens, &x, &given));
  if (given) {
    spec->params.max_tokens = static_cast<int32_t>(x);
    spec->max_tokens_given = true;
  }
  return std::nullopt;
}

std::optional<ApiError> parse_completion(const json& obj, const ProtocolLimits& limits, GenerateSpec* spec) {
  static const std::set<std::string> kKnown = {
      "model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "min_p", "n", "stop", "seed",
      "presence_penalty", "frequency_penalty", "repetition_penalty", "logprobs", "echo", "stream",
      "stream_options", "user", "ignore_eos", "min_tokens", "stop_token_ids",
      "include_stop_str_in_output", "best_of", "suffix", "logit_bias", "cache_salt"};
  std::set<std::string> known = kKnown;
  known.insert(std::begin(kStructuredOutputFields), std::end(kStructuredOutputFields));
  TESSERA_API_TRY(check_unknown_fields(obj, known));
  const Fields f(obj);
  TESSERA_API_TRY(parse_common(f, limits, spec));
  TESSERA_API_TRY(parse_prompt(f.get("prompt"), limits, &spec->prompts));
  TESSERA_API_TRY(set_max_tokens(f, "max_tokens", limits, spec));
  TESSERA_API_TRY(f.boolean("echo", &spec->echo));
  int64_t x = 0;
  if (f.get("logprobs") != nullptr) {
    TESSERA_API_TRY(f.integer("logprobs", 0, limits.max_logprobs, &x));
    spec->return_logprobs = true;
    spec->num_top_logprobs = static_cast<int32_t>(x);
  }
  if (f.get("best_of") != nullptr) {
    TESSERA_API_TRY(f.integer("best_of", 1, limits.max_n, &x));
    if (x != spec->params.n) {
      return ApiError{ErrorType::kNotImplemented, "'best_of' different from 'n' is not supported", "best_of"};
    }
  }
  if (const json* suffix = f.get("suffix")) {
    if (!suffix->is_string()) return Fields::type_error("suffix", "a string", *suffix);
    if (!suffix->get<std::string>().empty()) {
      return ApiError{ErrorType::kNotImplemented, "'suffix' is not supported", "suffix"};
    }
  }
  if (spec->echo && spec->return_logprobs) {
    return ApiError{ErrorType::kNotImplemented, "'echo' together with 'logprobs' is not supported "
                    "(prompt logprobs are not computed)", "echo"};
  }
  if (!spec->max_tokens_given) spec->params.max_tokens = 16;  // OpenAI's legacy default
  return std::nullopt;
}

std::optional<ApiError> parse_chat(const json& obj, const ProtocolLimits& limits, GenerateSpec* spec) {
  static const std::set<std::string> kKnown = {
      "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k",
      "min_p", "n", "stop", "seed", "presence_penalty", "frequency_penalty", "repetition_penalty",
      "logprobs", "top_logprobs", "stream", "stream_options", "user", "ignore_eos", "min_tokens",
      "stop_token_ids", "include_stop_str_in_output", "logit_bias", "response_format", "tools",
      "tool_choice", "parallel_tool_calls", "cache_salt", "metadata", "store", "chat_template_kwargs",
      "separate_reasoning"};
  std::set<std::string> known = kKnown;
  known.insert(std::begin(kStructuredOutputFields), std::end(kStructuredOutputFields));
  TESSERA_API_TRY(check_unknown_fields(obj, known));
  const Fields f(obj);
  TESSERA_API_TRY(parse_common(f, limits, spec));
  TESSERA_API_TRY(parse_messages(f.get("messages"), limits, &spec->messages));
  if (f.get("max_completion_tokens") != nullptr && f.get("max_tokens") != nullptr) {
    return bad("max_tokens", "give 'max_tokens' or 'max_completion_tokens', not both");
  }
  TESSERA_API_TRY(set_max_tokens(f, "max_tokens", limits, spec));
  TESSERA_API_TRY(set_max_tokens(f, "max_completion_tokens", limits, spec));
  TESSERA_API_TRY(f.boolean("logprobs", &spec->return_logprobs));
  int64_t x = 0;
  if (f.get("top_logprobs") != nullptr) {
    TESSERA_API_TRY(f.integer("top_logprobs", 0, limits.max_logprobs, &x));
    if (!spec->return_logprobs) return bad("top_logprobs", "'top_logprobs' requires 'logprobs': true");
    spec->num_top_logprobs = static_cast<int32_t>(x);
  }
  bool ignored_bool = false;
  TESSERA_API_TRY(f.boolean("store", &ignored_bool));
  if (const json* md = f.get("metadata"); md != nullptr && !md->is_object()) {
    return Fields::type_error("metadata", "an object", *md);
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_generate_request(ApiKind kind, std::string_view body,
                                               const ProtocolLimits& limits, GenerateSpec* out,
                                               const SamplingParams& defaults) {
  json obj;
  TESSERA_API_TRY(parse_object(body, &obj));
  GenerateSpec spec;
  spec.kind = kind;
  // Knobs the body omits keep the caller's defaults (the model's recommended sampling).
  spec.params = defaults;
  TESSERA_API_TRY(kind == ApiKind::kCompletion ? parse_completion(obj, limits, &spec)
                                               : parse_chat(obj, limits, &spec));
  if (spec.return_logprobs) spec.params.logprobs = spec.num_top_logprobs;
  if (kind == ApiKind::kChat) {
    const auto ordered = nlohmann::ordered_json::parse(body, nullptr, false);
    TESSERA_API_TRY(parse_chat_tools(Fields(obj), ordered, &spec.chat));
    if (spec.chat.tool_choice == ToolChoice::kRequired || spec.chat.tool_choice == ToolChoice::kNamed) {
      if (spec.params.structured.kind != StructuredOutput::Kind::kNone || ordered.contains("response_format")) {
        return bad("tool_choice", "tool_choice 'required' or a named function cannot be combined with response_format");
      }
      spec.params.structured.kind = StructuredOutput::Kind::kJsonSchema;
      spec.params.structured.text = tool_call_schema(ordered["tools"], spec.chat);
    }
  }
  if (spec.params.structured.kind == StructuredOutput::Kind::kJsonSchema && spec.chat.tool_choice != ToolChoice::kRequired &&
      spec.chat.tool_choice != ToolChoice::kNamed) {
    // The schema again with its keys in the client's order (json above sorts them): properties
    // are generated in the order the schema lists them.
    const auto ordered = nlohmann::ordered_json::parse(body, nullptr, false);
    spec.params.structured.text = ordered["response_format"]["json_schema"]["schema"].dump();
  }
  // Chat's default max_tokens is the room left in the context, checked once the prompt is known
  // (check_min_tokens in the generate handler); an explicit or legacy default bound is known here.
  if (kind == ApiKind::kCompletion || spec.max_tokens_given) TESSERA_API_TRY(check_min_tokens(spec));
  *out = std::move(spec);
  return std::nullopt;
}

std::optional<ApiError> check_min_tokens(const GenerateSpec& spec) {
  const SamplingParams& p = spec.params;
  if (p.min_tokens <= p.max_tokens) return std::nullopt;
  return bad("min_tokens", fmt::format("'min_tokens' ({}) must not exceed 'max_tokens' ({}{})", p.min_tokens,
                                       p.max_tokens, spec.max_tokens_given ? "" : ", the default"));
}

std::optional<ApiError> parse_tokenize_request(std::string_view body, const ProtocolLimits& limits,
                                               TokenizeSpec* out) {
  json obj;
  TESSERA_API_TRY(parse_object(body, &obj));
  TESSERA_API_TRY(check_unknown_fields(obj, {"model", "prompt", "messages", "add_special_tokens",
                                             "add_generation_prompt"}));
  const Fields f(obj);
  TokenizeSpec spec;
  TESSERA_API_TRY(f.string("model", &spec.model));
  TESSERA_API_TRY(f.boolean("add_special_tokens", &spec.add_special_tokens));
  bool ignored = true;
  TESSERA_API_TRY(f.boolean("add_generation_prompt", &ignored));
  const bool has_prompt = f.get("prompt") != nullptr, has_messages = f.get("messages") != nullptr;
  if (has_prompt == has_messages) return bad("prompt", "give exactly one of 'prompt' or 'messages'");
  if (has_prompt) {
    TESSERA_API_TRY(f.string("prompt", &spec.prompt));
  } else {
    TESSERA_API_TRY(parse_messages(f.get("messages"), limits, &spec.messages));
  }
  *out = std::move(spec);
  return std::nullopt;
}

std::optional<ApiError> parse_detokenize_request(std::string_view body, DetokenizeSpec* out) {
  json obj;
  TESSERA_API_TRY(parse_object(body, &obj));
  TESSERA_API_TRY(check_unknown_fields(obj, {"model", "tokens"}));
  const Fields f(obj);
  DetokenizeSpec spec;
  TESSERA_API_TRY(f.string("model", &spec.model));
  const json* tokens = f.get("tokens");
  if (tokens == nullptr) return bad("tokens", "'tokens' is required");
  if (!tokens->is_array()) return Fields::type_error("tokens", "a list of token ids", *tokens);
  TESSERA_API_TRY(parse_token_ids(*tokens, "tokens", &spec.tokens));
  *out = std::move(spec);
  return std::nullopt;
}

}  // namespace tessera::server
