// /v1/responses request -> Conversation + GenerateSpec (see responses_api.h for the fields).
#include <map>

#include <fmt/format.h>

#include "server/json_fields.h"
#include "server/responses_api.h"

namespace tessera::server {
namespace {

using ojson = nlohmann::ordered_json;

// A message's or an output's text: a string, or a list of text parts (refusals left out).
std::optional<ApiError> parts_text(const json& v, const std::string& param, std::string* out) {
  return joined_text(v, param,
                     {{"input_text", "output_text", "text", "summary_text", "reasoning_text"}, {"refusal"},
                      "content parts", "a content part", "only text parts are supported (no images or files)"},
                     out);
}

struct InputState {
  std::map<std::string, std::string> call_names;  // call_id -> function name, from earlier items
  std::string pending_reasoning;                  // a reasoning item, for the assistant turn after it
};

// The assistant turn new output attaches to: the last turn when it is an assistant's, else a new one.
Turn& assistant_turn(Conversation* c, InputState* st) {
  if (c->turns.empty() || c->turns.back().role != TurnRole::kAssistant) {
    c->turns.push_back(Turn{TurnRole::kAssistant, "", "", {}, "", ""});
  }
  Turn& t = c->turns.back();
  if (!st->pending_reasoning.empty()) {
    t.reasoning += st->pending_reasoning;
    st->pending_reasoning.clear();
  }
  return t;
}

std::optional<ApiError> parse_item(const json& item, size_t index, InputState* st, Conversation* c) {
  const std::string p = fmt::format("input[{}]", index);
  if (!item.is_object()) return bad(p, fmt::format("'{}' must be an object, got {}", p, type_word(item)));
  std::string type = "message";  // EasyInputMessage: {role, content} without a type
  if (auto it = item.find("type"); it != item.end() && !it->is_null()) {
    if (!it->is_string()) return bad(p + ".type", fmt::format("'{}.type' must be a string", p));
    type = *it;
  }
  if (type == "message") {
    const json role = item.value("role", json());
    if (!role.is_string()) return bad(p + ".role", fmt::format("'{}.role' must be a string", p));
    const json content = item.value("content", json());
    std::string text;
    if (!content.is_null()) TESSERA_API_TRY(parts_text(content, p + ".content", &text));
    if (role == "system" || role == "developer") {
      // Instructions between turns join the system prompt (TurnRole::kSystem, conversation.h).
      c->turns.push_back(Turn{TurnRole::kSystem, text, "", {}, "", ""});
    } else if (role == "user") {
      c->turns.push_back(Turn{TurnRole::kUser, text, "", {}, "", ""});
    } else if (role == "assistant") {
      Turn& t = assistant_turn(c, st);
      if (!t.text.empty() && !text.empty()) t.text += "\n";
      t.text += text;
    } else {
      return bad(p + ".role", fmt::format("'{}.role' must be user, assistant, system or developer", p));
    }
  } else if (type == "function_call") {
    for (const char* key : {"call_id", "name", "arguments"}) {
      if (!item.contains(key) || !item[key].is_string()) return bad(p, fmt::format("'{}' needs a string '{}'", p, key));
    }
    ToolCall call{item["call_id"], item["name"], item["arguments"]};
    st->call_names[call.id] = call.name;
    assistant_turn(c, st).tool_calls.push_back(std::move(call));
  } else if (type == "function_call_output") {
    if (!item.contains("call_id") || !item["call_id"].is_string()) return bad(p, fmt::format("'{}' needs a string 'call_id'", p));
    const std::string id = item["call_id"];
    auto it = st->call_names.find(id);
    if (it == st->call_names.end()) {
      return bad(p, fmt::format("'{}': call_id '{}' answers no earlier function_call item", p, id));
    }
    if (!item.contains("output")) return bad(p, fmt::format("'{}' needs an 'output'", p));
    Turn result{TurnRole::kTool, "", "", {}, id, it->second};
    TESSERA_API_TRY(parts_text(item["output"], p + ".output", &result.text));
    c->turns.push_back(std::move(result));
  } else if (type == "reasoning") {
    std::string text;
    if (auto it = item.find("content"); it != item.end() && !it->is_null()) TESSERA_API_TRY(parts_text(*it, p + ".content", &text));
    if (text.empty()) {
      if (auto it = item.find("summary"); it != item.end() && !it->is_null()) TESSERA_API_TRY(parts_text(*it, p + ".summary", &text));
    }
    st->pending_reasoning += text;
  } else {
    return bad(p + ".type", fmt::format("'{}' has type '{}'; supported items are message, function_call, "
                                        "function_call_output and reasoning", p, type));
  }
  return std::nullopt;
}

std::optional<ApiError> parse_tools(const json& tools, const ojson& otools, Conversation* c) {
  if (!tools.is_array()) return Fields::type_error("tools", "a list", tools);
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string p = fmt::format("tools[{}]", i);
    if (!t.is_object() || !t.contains("type") || !t["type"].is_string()) return bad(p, fmt::format("'{}' needs a string 'type'", p));
    if (t["type"] != "function") continue;  // hosted tools (web_search, file_search, ...): nothing here runs them
    if (!t.contains("name") || !t["name"].is_string()) return bad(p, fmt::format("'{}' needs a string 'name'", p));
    ToolDef def;
    def.name = t["name"];
    if (t.contains("description") && t["description"].is_string()) def.description = t["description"];
    if (auto it = t.find("parameters"); it != t.end() && !it->is_null()) {
      if (!it->is_object()) return bad(p + ".parameters", fmt::format("'{}.parameters' must be a JSON Schema object", p));
      def.parameters_json = otools[i]["parameters"].dump();
    }
    c->tools.push_back(std::move(def));
  }
  return std::nullopt;
}

std::optional<ApiError> parse_tool_choice(const json& v, Conversation* c) {
  if (v.is_string()) {
    const std::string s = v;
    if (s == "auto") c->choice = ToolChoice::kAuto;
    else if (s == "none") c->choice = ToolChoice::kNone;
    else if (s == "required") c->choice = ToolChoice::kRequired;
    else return bad("tool_choice", "'tool_choice' must be 'auto', 'none', 'required' or {\"type\": \"function\", \"name\": ...}");
  } else if (v.is_object() && v.value("type", json()) == "function" && v.contains("name") && v["name"].is_string()) {
    c->choice = ToolChoice::kNamed;
    c->choice_name = v["name"];
    bool found = false;
    for (const ToolDef& t : c->tools) found = found || t.name == c->choice_name;
    if (!found) return bad("tool_choice", fmt::format("tool_choice names '{}', which is not in 'tools'", c->choice_name));
  } else {
    return bad("tool_choice", "'tool_choice' must be 'auto', 'none', 'required' or {\"type\": \"function\", \"name\": ...}");
  }
  if ((c->choice == ToolChoice::kRequired || c->choice == ToolChoice::kNamed) && c->tools.empty()) {
    return bad("tool_choice", "tool_choice 'required' or a named function requires function 'tools'");
  }
  return std::nullopt;
}

// text.format -> the grammar: {"type": "text" | "json_object" | "json_schema", "name", "schema", "strict"}.
std::optional<ApiError> parse_text_format(const json& text, const ojson& otext, SamplingParams* p) {
  if (!text.is_object()) return Fields::type_error("text", "an object", text);
  const auto it = text.find("format");
  if (it == text.end() || it->is_null()) return std::nullopt;
  const json& format = *it;
  if (!format.is_object() || !format.contains("type") || !format["type"].is_string()) {
    return bad("text.format", "'text.format' must be an object with a 'type'");
  }
  const std::string type = format["type"];
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    p->structured.kind = StructuredOutput::Kind::kJsonObject;
  } else if (type == "json_schema") {
    if (!format.contains("schema") || !format["schema"].is_object()) {
      return bad("text.format.schema", "'text.format.schema' must be a JSON Schema object");
    }
    p->structured.kind = StructuredOutput::Kind::kJsonSchema;
    p->structured.text = otext["format"]["schema"].dump();  // properties in the client's order
  } else {
    return bad("text.format.type", fmt::format("text.format type '{}' is not one of text, json_object, json_schema", type));
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_responses_request(std::string_view body, const ProtocolLimits& limits, ChatApiRequest* out,
                                                ojson* echo, const SamplingParams& defaults) {
  json obj;
  TESSERA_API_TRY(parse_object(body, &obj));
  const ojson ordered = ojson::parse(body, nullptr, false);  // key order of schemas
  const Fields f(obj);
  ChatApiRequest r;
  r.spec.params = defaults;
  r.spec.kind = ApiKind::kChat;
  r.spec.clamp_max_tokens = true;
  Conversation& c = r.conversation;
  TESSERA_API_TRY(f.string("model", &r.model));
  // previous_response_id: its stored items were put before 'input' by the handler (handle_responses).
  std::string previous_id;
  TESSERA_API_TRY(f.string("previous_response_id", &previous_id));
  bool background = false;
  TESSERA_API_TRY(f.boolean("background", &background));
  if (background) return ApiError{ErrorType::kNotImplemented, "'background' responses are not supported", "background"};
  TESSERA_API_TRY(f.string("instructions", &c.system));
  const json* input = f.get("input");
  if (input == nullptr) return bad("input", "'input' is required");
  if (input->is_string()) {
    c.turns.push_back(Turn{TurnRole::kUser, input->get<std::string>(), "", {}, "", ""});
  } else if (input->is_array()) {
    if (static_cast<int64_t>(input->size()) > limits.max_messages) {
      return bad("input", fmt::format("'input' holds {} items; at most {}", input->size(), limits.max_messages));
    }
    InputState st;
    for (size_t i = 0; i < input->size(); ++i) TESSERA_API_TRY(parse_item((*input)[i], i, &st, &c));
  } else {
    return Fields::type_error("input", "a string or a list of items", *input);
  }
  if (c.turns.empty()) return bad("input", "'input' must not be empty");
  if (const json* tools = f.get("tools")) TESSERA_API_TRY(parse_tools(*tools, ordered["tools"], &c));
  if (const json* choice = f.get("tool_choice")) TESSERA_API_TRY(parse_tool_choice(*choice, &c));
  TESSERA_API_TRY(f.boolean("parallel_tool_calls", &c.parallel_tool_calls));
  SamplingParams& p = r.spec.params;
  int64_t max_tokens = 0;
  TESSERA_API_TRY(f.integer("max_output_tokens", 1, limits.max_tokens, &max_tokens, &r.spec.max_tokens_given));
  if (r.spec.max_tokens_given) p.max_tokens = static_cast<int32_t>(max_tokens);
  TESSERA_API_TRY(f.number("temperature", 0.0, 2.0, &p.temperature));
  TESSERA_API_TRY(f.number("top_p", 0.0, 1.0, &p.top_p));
  if (p.top_p <= 0.0f) return bad("top_p", "'top_p' must be in (0, 1]");
  if (const json* text = f.get("text")) TESSERA_API_TRY(parse_text_format(*text, ordered["text"], &p));
  if (const json* reasoning = f.get("reasoning"); reasoning != nullptr && !reasoning->is_object()) {
    return Fields::type_error("reasoning", "an object", *reasoning);
  }
  if (const json* md = f.get("metadata"); md != nullptr && !md->is_object()) return Fields::type_error("metadata", "an object", *md);
  bool store = true;
  TESSERA_API_TRY(f.boolean("store", &store));
  TESSERA_API_TRY(f.boolean("stream", &r.spec.stream));
  r.spec.chat = chat_tool_spec(c);
  if (c.choice == ToolChoice::kRequired || c.choice == ToolChoice::kNamed) {
    if (p.structured.kind != StructuredOutput::Kind::kNone) {
      return bad("tool_choice", "tool_choice 'required' or a named function cannot be combined with text.format");
    }
    p.structured.kind = StructuredOutput::Kind::kJsonSchema;
    p.structured.text = tool_call_schema(openai_tools(c), r.spec.chat);
  }
  // What the response object repeats.
  ojson e;
  e["instructions"] = c.system.empty() ? ojson(nullptr) : ojson(c.system);
  e["max_output_tokens"] = r.spec.max_tokens_given ? ojson(max_tokens) : ojson(nullptr);
  e["parallel_tool_calls"] = c.parallel_tool_calls;
  e["previous_response_id"] = previous_id.empty() ? ojson(nullptr) : ojson(previous_id);
  e["reasoning"] = ordered.contains("reasoning") && ordered["reasoning"].is_object() ? ordered["reasoning"]
                                                                                      : ojson{{"effort", nullptr}, {"summary", nullptr}};
  e["store"] = store;
  e["temperature"] = p.temperature;
  e["text"] = ordered.contains("text") && ordered["text"].is_object() ? ordered["text"] : ojson{{"format", {{"type", "text"}}}};
  e["tool_choice"] = ordered.contains("tool_choice") && !ordered["tool_choice"].is_null() ? ordered["tool_choice"] : ojson("auto");
  e["tools"] = ordered.contains("tools") && ordered["tools"].is_array() ? ordered["tools"] : ojson::array();
  e["top_p"] = p.top_p;
  e["truncation"] = "disabled";
  e["metadata"] = ordered.contains("metadata") && ordered["metadata"].is_object() ? ordered["metadata"] : ojson::object();
  *echo = std::move(e);
  *out = std::move(r);
  return std::nullopt;
}

}  // namespace tessera::server
