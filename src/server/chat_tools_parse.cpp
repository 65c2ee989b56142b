// Parsing of the tool-calling fields (see chat_tools_parse.h).
#include "server/chat_tools_parse.h"

#include <fmt/format.h>

#include "server/json_fields.h"

namespace tessera::server {

std::optional<ApiError> check_message_tool_calls(const json& m, size_t index) {
  auto it = m.find("tool_calls");
  if (it == m.end() || it->is_null()) return std::nullopt;
  const std::string param = fmt::format("messages[{}].tool_calls", index);
  if (!it->is_array()) return bad(param, fmt::format("'{}' must be a list", param));
  for (const json& call : *it) {
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object() ||
        !call["function"].contains("name") || !call["function"]["name"].is_string()) {
      return bad(param, fmt::format("'{}' entries need a 'function' with a string 'name'", param));
    }
    const json& fn = call["function"];
    if (fn.contains("arguments") && !fn["arguments"].is_string() && !fn["arguments"].is_object()) {
      return bad(param, fmt::format("'{}' arguments must be a JSON string or an object", param));
    }
  }
  return std::nullopt;
}

std::string tool_call_schema(const nlohmann::ordered_json& tools, const ChatToolSpec& spec) {
  using ojson = nlohmann::ordered_json;
  ojson options = ojson::array();
  for (const ojson& t : tools) {
    const std::string name = t["function"]["name"];
    if (spec.tool_choice == ToolChoice::kNamed && name != spec.named_function) continue;
    ojson params = t["function"].contains("parameters") ? t["function"]["parameters"] : ojson{{"type", "object"}};
    options.push_back(ojson{{"type", "object"},
                            {"properties", {{"name", {{"const", name}}}, {"arguments", params}}},
                            {"required", {"name", "arguments"}},
                            {"additionalProperties", false}});
  }
  ojson one = options.size() == 1 ? options[0] : ojson{{"anyOf", options}};
  if (spec.tool_choice == ToolChoice::kRequired && spec.parallel_tool_calls) {
    return ojson{{"type", "array"}, {"items", one}, {"minItems", 1}}.dump();
  }
  return one.dump();
}

std::optional<ApiError> parse_chat_tools(const Fields& f, const nlohmann::ordered_json& ordered, ChatToolSpec* out) {
  out->messages_json = ordered.contains("messages") ? ordered["messages"].dump() : "[]";
  if (const json* tools = f.get("tools")) {
    if (!tools->is_array()) return Fields::type_error("tools", "a list", *tools);
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      const std::string param = fmt::format("tools[{}]", i);
      if (!t.is_object() || t.value("type", std::string()) != "function" || !t.contains("function") ||
          !t["function"].is_object() || !t["function"].contains("name") || !t["function"]["name"].is_string()) {
        return bad(param, fmt::format("'{}' must be {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}", param));
      }
      if (t["function"].contains("parameters") && !t["function"]["parameters"].is_object()) {
        return bad(param, fmt::format("'{}.function.parameters' must be a JSON Schema object", param));
      }
      out->tool_names.insert(t["function"]["name"].get<std::string>());
    }
    if (!tools->empty()) out->tools_json = ordered["tools"].dump();
  }
  if (const json* choice = f.get("tool_choice")) {
    if (choice->is_string()) {
      const std::string c = *choice;
      if (c == "none") {
        out->tool_choice = ToolChoice::kNone;
      } else if (c == "auto") {
        out->tool_choice = ToolChoice::kAuto;
      } else if (c == "required") {
        out->tool_choice = ToolChoice::kRequired;
      } else {
        return bad("tool_choice", "'tool_choice' must be 'none', 'auto', 'required' or a named function");
      }
    } else if (choice->is_object() && choice->contains("function") && (*choice)["function"].is_object() &&
               (*choice)["function"].contains("name") && (*choice)["function"]["name"].is_string()) {
      out->tool_choice = ToolChoice::kNamed;
      out->named_function = (*choice)["function"]["name"];
      if (out->tool_names.count(out->named_function) == 0) {
        return bad("tool_choice", fmt::format("tool_choice names '{}', which is not in 'tools'", out->named_function));
      }
    } else {
      return bad("tool_choice", "'tool_choice' must be 'none', 'auto', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    if (out->tool_choice != ToolChoice::kNone && out->tool_choice != ToolChoice::kAuto && out->tool_names.empty()) {
      return bad("tool_choice", "'tool_choice' requires 'tools'");
    }
  }
  TESSERA_API_TRY(f.boolean("parallel_tool_calls", &out->parallel_tool_calls));
  TESSERA_API_TRY(f.boolean("separate_reasoning", &out->separate_reasoning));
  if (const json* kw = f.get("chat_template_kwargs")) {
    if (!kw->is_object()) return Fields::type_error("chat_template_kwargs", "an object", *kw);
    out->template_kwargs_json = ordered["chat_template_kwargs"].dump();
  }
  return std::nullopt;
}

}  // namespace tessera::server
