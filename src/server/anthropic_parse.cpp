// /v1/messages request -> Conversation + GenerateSpec (see anthropic_api.h for the fields).
#include <map>

#include <fmt/format.h>

#include "server/anthropic_api.h"
#include "server/json_fields.h"

namespace tessera::server {
namespace {

using ojson = nlohmann::ordered_json;

// Text of a content value that may only hold text: a string, or a list of text blocks.
std::optional<ApiError> text_content(const json& v, const std::string& param, std::string* out) {
  return joined_text(v, param, {{"text"}, {}, "text blocks", "a content block", "only 'text' blocks are supported here"},
                     out);
}

struct ParseState {
  std::map<std::string, std::string> tool_use_names;  // tool_use id -> name, from earlier turns
};

void append_text(std::string* to, const std::string& text) {
  if (!to->empty()) *to += "\n";
  *to += text;
}

std::optional<ApiError> parse_message(const json& m, const ojson& om, size_t index, ParseState* st, Conversation* c) {
  const std::string param = fmt::format("messages[{}]", index);
  if (!m.is_object()) return bad(param, fmt::format("'{}' must be an object, got {}", param, type_word(m)));
  const json role = m.value("role", json());
  if (!role.is_string() || (role != "user" && role != "assistant" && role != "system")) {
    return bad(param + ".role", fmt::format("'{}.role' must be 'user', 'assistant' or 'system'", param));
  }
  const bool is_user = role == "user";
  auto content = m.find("content");
  if (content == m.end() || content->is_null()) return bad(param + ".content", fmt::format("'{}.content' is required", param));
  if (role == "system") {  // Claude Code's per-turn system message (its output_config is ignored)
    Turn turn;
    turn.role = TurnRole::kSystem;
    TESSERA_API_TRY(text_content(*content, param + ".content", &turn.text));
    c->turns.push_back(std::move(turn));
    return std::nullopt;
  }
  Turn turn;
  turn.role = is_user ? TurnRole::kUser : TurnRole::kAssistant;
  if (content->is_string()) {
    turn.text = content->get<std::string>();
    c->turns.push_back(std::move(turn));
    return std::nullopt;
  }
  if (!content->is_array()) {
    return bad(param + ".content", fmt::format("'{}.content' must be a string or a list of content blocks", param));
  }
  bool has_text = false;
  auto flush_user_text = [&] {
    if (is_user && has_text) {
      c->turns.push_back(std::move(turn));
      turn = Turn{};
      has_text = false;
    }
  };
  for (size_t i = 0; i < content->size(); ++i) {
    const json& b = (*content)[i];
    const std::string p = fmt::format("{}.content[{}]", param, i);
    if (!b.is_object() || !b.contains("type") || !b["type"].is_string()) {
      return bad(p, fmt::format("'{}' must be a content block with a string 'type'", p));
    }
    const std::string type = b["type"];
    if (type == "text") {
      if (!b.contains("text") || !b["text"].is_string()) return bad(p, fmt::format("'{}' needs a string 'text'", p));
      append_text(&turn.text, b["text"].get<std::string>());
      has_text = true;
    } else if (type == "thinking" || type == "redacted_thinking") {
      if (is_user) return bad(p, fmt::format("'{}': {} blocks belong to assistant messages", p, type));
      if (type == "thinking") {
        if (!b.contains("thinking") || !b["thinking"].is_string()) return bad(p, fmt::format("'{}' needs a string 'thinking'", p));
        append_text(&turn.reasoning, b["thinking"].get<std::string>());
      }
    } else if (type == "tool_use") {
      if (is_user) return bad(p, fmt::format("'{}': tool_use blocks belong to assistant messages", p));
      if (!b.contains("id") || !b["id"].is_string() || !b.contains("name") || !b["name"].is_string()) {
        return bad(p, fmt::format("'{}' needs a string 'id' and 'name'", p));
      }
      if (!b.contains("input") || !b["input"].is_object()) return bad(p, fmt::format("'{}.input' must be an object", p));
      ToolCall call{b["id"], b["name"], om["content"][i]["input"].dump()};
      st->tool_use_names[call.id] = call.name;
      turn.tool_calls.push_back(std::move(call));
    } else if (type == "tool_result") {
      if (!is_user) return bad(p, fmt::format("'{}': tool_result blocks belong to user messages", p));
      if (!b.contains("tool_use_id") || !b["tool_use_id"].is_string()) return bad(p, fmt::format("'{}' needs a string 'tool_use_id'", p));
      const std::string id = b["tool_use_id"];
      auto it = st->tool_use_names.find(id);
      if (it == st->tool_use_names.end()) {
        return bad(p, fmt::format("'{}': tool_use_id '{}' answers no tool_use block of an earlier assistant message", p, id));
      }
      flush_user_text();
      Turn result;
      result.role = TurnRole::kTool;
      result.tool_call_id = id;
      result.tool_name = it->second;
      if (auto rc = b.find("content"); rc != b.end() && !rc->is_null()) {
        TESSERA_API_TRY(text_content(*rc, p + ".content", &result.text));
      }
      c->turns.push_back(std::move(result));
    } else {
      return bad(p, fmt::format("'{}' has type '{}'; supported blocks are text, tool_use, tool_result, thinking and "
                                "redacted_thinking (no images or documents)", p, type));
    }
  }
  if (!is_user) {
    c->turns.push_back(std::move(turn));
  } else {
    flush_user_text();
  }
  return std::nullopt;
}

std::optional<ApiError> parse_tools(const json& tools, const ojson& otools, Conversation* c) {
  if (!tools.is_array()) return Fields::type_error("tools", "a list", tools);
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string p = fmt::format("tools[{}]", i);
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) return bad(p, fmt::format("'{}' needs a string 'name'", p));
    if (!t.contains("input_schema")) {
      // A server tool (web_search_..., bash_..., text_editor_...): nothing here can run it.
      if (t.contains("type") && t["type"].is_string() && t["type"] != "custom") continue;
      return bad(p, fmt::format("'{}' needs an 'input_schema'", p));
    }
    if (!t["input_schema"].is_object()) return bad(p + ".input_schema", fmt::format("'{}.input_schema' must be a JSON Schema object", p));
    ToolDef def;
    def.name = t["name"];
    if (t.contains("description") && t["description"].is_string()) def.description = t["description"];
    def.parameters_json = otools[i]["input_schema"].dump();
    c->tools.push_back(std::move(def));
  }
  return std::nullopt;
}

std::optional<ApiError> parse_tool_choice(const json& v, Conversation* c) {
  if (!v.is_object() || !v.contains("type") || !v["type"].is_string()) {
    return bad("tool_choice", "'tool_choice' must be an object with a 'type' (auto, any, tool, none)");
  }
  const std::string type = v["type"];
  if (type == "auto") {
    c->choice = ToolChoice::kAuto;
  } else if (type == "any") {
    c->choice = ToolChoice::kRequired;
  } else if (type == "none") {
    c->choice = ToolChoice::kNone;
  } else if (type == "tool") {
    if (!v.contains("name") || !v["name"].is_string()) return bad("tool_choice", "tool_choice 'tool' needs a string 'name'");
    c->choice = ToolChoice::kNamed;
    c->choice_name = v["name"];
    bool found = false;
    for (const ToolDef& t : c->tools) found = found || t.name == c->choice_name;
    if (!found) return bad("tool_choice", fmt::format("tool_choice names '{}', which is not in 'tools'", c->choice_name));
  } else {
    return bad("tool_choice", fmt::format("tool_choice type '{}' is not one of auto, any, tool, none", type));
  }
  if ((c->choice == ToolChoice::kRequired || c->choice == ToolChoice::kNamed) && c->tools.empty()) {
    return bad("tool_choice", "tool_choice 'any' or 'tool' requires 'tools'");
  }
  bool disable_parallel = false;
  TESSERA_API_TRY(Fields(v).boolean("disable_parallel_tool_use", &disable_parallel));
  c->parallel_tool_calls = !disable_parallel;
  return std::nullopt;
}

std::optional<ApiError> parse_stop_sequences(const json* v, const ProtocolLimits& limits, std::vector<std::string>* out) {
  if (v == nullptr) return std::nullopt;
  if (!v->is_array()) return Fields::type_error("stop_sequences", "a list of strings", *v);
  if (static_cast<int64_t>(v->size()) > limits.max_stop) {
    return bad("stop_sequences", fmt::format("'stop_sequences' holds {} strings; at most {}", v->size(), limits.max_stop));
  }
  for (const json& s : *v) {
    if (!s.is_string() || s.get_ref<const std::string&>().empty()) return bad("stop_sequences", "'stop_sequences' items must be non-empty strings");
    if (static_cast<int64_t>(s.get_ref<const std::string&>().size()) > limits.max_stop_len) {
      return bad("stop_sequences", fmt::format("'stop_sequences' strings must be at most {} bytes", limits.max_stop_len));
    }
    out->push_back(s);
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_anthropic_request(std::string_view body, const ProtocolLimits& limits,
                                                bool max_tokens_required, ChatApiRequest* out,
                                                const SamplingParams& defaults) {
  json obj;
  TESSERA_API_TRY(parse_object(body, &obj));
  const ojson ordered = ojson::parse(body, nullptr, false);  // key order of schemas and tool inputs
  const Fields f(obj);
  ChatApiRequest r;
  r.spec.params = defaults;
  r.spec.kind = ApiKind::kChat;
  r.spec.clamp_max_tokens = true;
  TESSERA_API_TRY(f.string("model", &r.model));
  int64_t max_tokens = 0;
  bool given = false;
  TESSERA_API_TRY(f.integer("max_tokens", 1, limits.max_tokens, &max_tokens, &given));
  if (!given && max_tokens_required) return bad("max_tokens", "max_tokens: Field required");
  r.spec.max_tokens_given = given;
  if (given) r.spec.params.max_tokens = static_cast<int32_t>(max_tokens);
  Conversation& c = r.conversation;
  if (const json* system = f.get("system")) TESSERA_API_TRY(text_content(*system, "system", &c.system));
  const json* messages = f.get("messages");
  if (messages == nullptr) return bad("messages", "messages: Field required");
  if (!messages->is_array()) return Fields::type_error("messages", "a list of messages", *messages);
  if (static_cast<int64_t>(messages->size()) > limits.max_messages) {
    return bad("messages", fmt::format("'messages' holds {} messages; at most {}", messages->size(), limits.max_messages));
  }
  ParseState st;
  for (size_t i = 0; i < messages->size(); ++i) {
    TESSERA_API_TRY(parse_message((*messages)[i], ordered["messages"][i], i, &st, &c));
  }
  if (c.turns.empty() && c.system.empty()) return bad("messages", "'messages' must not be empty");
  if (const json* tools = f.get("tools")) TESSERA_API_TRY(parse_tools(*tools, ordered["tools"], &c));
  if (const json* choice = f.get("tool_choice")) TESSERA_API_TRY(parse_tool_choice(*choice, &c));
  if (const json* thinking = f.get("thinking")) {
    // {"type": "enabled", "budget_tokens"} | {"type": "disabled"} | {"type": "adaptive"}: the
    // template's enable_thinking (templates without the switch ignore it; the budget is not kept).
    if (!thinking->is_object()) return Fields::type_error("thinking", "an object", *thinking);
    const json type = thinking->value("type", json());
    if (type.is_string()) c.template_kwargs_json = json{{"enable_thinking", type != "disabled"}}.dump();
  }
  if (const json* md = f.get("metadata"); md != nullptr && !md->is_object()) return Fields::type_error("metadata", "an object", *md);
  SamplingParams& p = r.spec.params;
  TESSERA_API_TRY(f.number("temperature", 0.0, 1.0, &p.temperature));
  TESSERA_API_TRY(f.number("top_p", 0.0, 1.0, &p.top_p));
  if (p.top_p <= 0.0f) return bad("top_p", "'top_p' must be in (0, 1]");
  int64_t top_k = 0;
  bool top_k_given = false;
  TESSERA_API_TRY(f.integer("top_k", 0, 1 << 20, &top_k, &top_k_given));
  if (top_k_given && top_k > 0) p.top_k = static_cast<int32_t>(top_k);
  TESSERA_API_TRY(parse_stop_sequences(f.get("stop_sequences"), limits, &p.stop));
  if (!p.stop.empty()) {
    p.include_stop_str_in_output = true;  // the handler finds which one matched, and cuts it
    r.report_stop_sequence = true;
  }
  TESSERA_API_TRY(f.boolean("stream", &r.spec.stream));
  r.spec.chat = chat_tool_spec(c);
  if (c.choice == ToolChoice::kRequired || c.choice == ToolChoice::kNamed) {
    p.structured.kind = StructuredOutput::Kind::kJsonSchema;
    p.structured.text = tool_call_schema(openai_tools(c), r.spec.chat);
  }
  *out = std::move(r);
  return std::nullopt;
}

}  // namespace tessera::server
