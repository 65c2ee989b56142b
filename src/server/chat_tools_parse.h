// Request side of tool calling and template options in /v1/chat/completions: `tools`,
// `tool_choice` (auto | none | required | {"type": "function", "function": {"name"}}),
// `parallel_tool_calls`, `chat_template_kwargs`, `separate_reasoning`, and the `tool_calls` of
// assistant messages. The JSON texts keep the client's key order (the template prints them).
#pragma once
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace tessera::server {

class Fields;  // json_fields.h

enum class ToolChoice { kAuto, kNone, kRequired, kNamed };

struct ChatToolSpec {
  std::string messages_json;           // the messages array as sent
  std::string tools_json;              // "" when no tools
  std::string template_kwargs_json;    // "" or an object
  std::set<std::string> tool_names;    // the functions the model may call
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string named_function;          // kNamed
  bool parallel_tool_calls = true;
  bool separate_reasoning = true;      // <think> -> reasoning_content (false: raw text)
  bool prompt_opens_reasoning = false; // set after rendering: the prompt ends inside <think>
  bool tools_active() const { return !tool_names.empty() && tool_choice != ToolChoice::kNone; }
};

// f: the request's fields (sorted json); ordered: the same body with the client's key order.
std::optional<ApiError> parse_chat_tools(const Fields& f, const nlohmann::ordered_json& ordered, ChatToolSpec* out);
// tool_choice "required" / named, enforced by the grammar engine: a JSON Schema for the output
// {"name": f, "arguments": {...f's parameters}} (any of the allowed functions), or a non-empty list
// of them when parallel_tool_calls. The generic JSON tool parser reads it back.
std::string tool_call_schema(const nlohmann::ordered_json& tools, const ChatToolSpec& spec);
// messages[i].tool_calls: [{"id", "type": "function", "function": {"name", "arguments"}}].
std::optional<ApiError> check_message_tool_calls(const nlohmann::json& message, size_t index);

}  // namespace tessera::server
