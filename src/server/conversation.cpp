// The conversation model's two conversions (see conversation.h).
#include "server/conversation.h"

namespace tessera::server {

using ojson = nlohmann::ordered_json;
using json = nlohmann::json;

ojson openai_tools(const Conversation& c) {
  ojson tools = ojson::array();
  for (const ToolDef& t : c.tools) {
    ojson fn = {{"name", t.name}};
    if (!t.description.empty()) fn["description"] = t.description;
    fn["parameters"] = ojson::parse(t.parameters_json, nullptr, false);
    if (fn["parameters"].is_discarded()) fn["parameters"] = ojson{{"type", "object"}};
    tools.push_back(ojson{{"type", "function"}, {"function", std::move(fn)}});
  }
  return tools;
}

ChatToolSpec chat_tool_spec(const Conversation& c) {
  ojson messages = ojson::array();
  if (!c.system.empty()) messages.push_back(ojson{{"role", "system"}, {"content", c.system}});
  for (const Turn& t : c.turns) {
    ojson m;
    switch (t.role) {
      case TurnRole::kUser:
        m = {{"role", "user"}, {"content", t.text}};
        break;
      case TurnRole::kSystem:
        m = {{"role", "system"}, {"content", t.text}};
        break;
      case TurnRole::kTool:
        m = {{"role", "tool"}, {"tool_call_id", t.tool_call_id}};
        if (!t.tool_name.empty()) m["name"] = t.tool_name;
        m["content"] = t.text;
        break;
      case TurnRole::kAssistant: {
        m = {{"role", "assistant"}, {"content", t.text}};
        // vLLM's field for earlier thinking: the templates that keep it (Qwen3's) read this name.
        if (!t.reasoning.empty()) m["reasoning_content"] = t.reasoning;
        if (!t.tool_calls.empty()) {
          ojson calls = ojson::array();
          for (const ToolCall& call : t.tool_calls) {
            calls.push_back(ojson{{"id", call.id}, {"type", "function"},
                                  {"function", {{"name", call.name}, {"arguments", call.arguments_json}}}});
          }
          m["tool_calls"] = std::move(calls);
        }
        break;
      }
    }
    messages.push_back(std::move(m));
  }
  ChatToolSpec spec;
  spec.messages_json = messages.dump();
  if (!c.tools.empty()) spec.tools_json = openai_tools(c).dump();
  for (const ToolDef& t : c.tools) spec.tool_names.insert(t.name);
  spec.tool_choice = c.choice;
  spec.named_function = c.choice_name;
  spec.parallel_tool_calls = c.parallel_tool_calls;
  spec.template_kwargs_json = c.template_kwargs_json;
  return spec;
}

AssistantOutput assistant_output(const json& message) {
  AssistantOutput out;
  if (auto it = message.find("reasoning_content"); it != message.end() && it->is_string()) out.reasoning = *it;
  if (auto it = message.find("content"); it != message.end() && it->is_string()) out.text = *it;
  if (auto it = message.find("tool_calls"); it != message.end() && it->is_array()) {
    for (const json& call : *it) {
      out.tool_calls.push_back(ToolCall{call.value("id", ""), call["function"].value("name", ""),
                                        call["function"].value("arguments", "")});
    }
  }
  return out;
}

std::vector<OutputDelta> output_deltas(const json& delta) {
  std::vector<OutputDelta> out;
  if (auto it = delta.find("reasoning_content"); it != delta.end() && it->is_string()) {
    out.push_back(OutputDelta{OutputDelta::Kind::kReasoning, *it, "", 0});
  }
  if (auto it = delta.find("content"); it != delta.end() && it->is_string() && !it->get_ref<const std::string&>().empty()) {
    out.push_back(OutputDelta{OutputDelta::Kind::kText, *it, "", 0});
  }
  if (auto it = delta.find("tool_calls"); it != delta.end() && it->is_array()) {
    for (const json& call : *it) {
      const int32_t index = call.value("index", 0);
      const json& fn = call.contains("function") ? call["function"] : json::object();
      if (call.contains("id")) {
        out.push_back(OutputDelta{OutputDelta::Kind::kCallStart, fn.value("name", ""), call["id"].get<std::string>(), index});
      }
      const std::string args = fn.value("arguments", "");
      if (!args.empty()) out.push_back(OutputDelta{OutputDelta::Kind::kCallArguments, args, "", index});
    }
  }
  return out;
}

}  // namespace tessera::server
