// Tool calls in a model's output, per family format, for /v1/chat/completions:
//
//   format        what the model writes                                        families
//   kHermes       <tool_call>{"name": f, "arguments": {...}}</tool_call> (1+)   Qwen 2.5/3, Hermes, SmolLM3
//   kMistral      [TOOL_CALLS] [{"name": f, "arguments": {...}}, ...]           Mistral, Devstral
//   kLlama3       [<|python_tag|>]{"name": f, "parameters": {...}} (; or \n sep) Llama 3.1/3.2/3.3
//   kGenericJson  the whole output is {"name", "arguments"}, a list of them, or
//                 {"tool_calls": [...]}, optionally in a ```json fence          any (also the fallback)
//
// The family format is chosen from the chat template's source. When it finds no call, the
// generic JSON form is tried. Output that looks like a call but is malformed (unterminated tag,
// bad JSON, a function not in the request's tools) yields no calls: the text stays content.
#pragma once
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::server {

enum class ToolCallFormat { kHermes, kMistral, kLlama3, kGenericJson };

ToolCallFormat tool_call_format_for_template(std::string_view chat_template_source);
const char* tool_call_format_name(ToolCallFormat format);

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // a JSON object, as compact JSON text (OpenAI's `arguments` string)
};

struct ToolCallParse {
  std::string content;               // text outside the calls (trimmed); the whole text when no calls
  std::vector<ParsedToolCall> calls;
};

// known_functions: the request's tool names; a call to any other name is malformed.
ToolCallParse parse_tool_calls(std::string_view text, ToolCallFormat format,
                               const std::set<std::string>& known_functions);

// While streaming: true when `text` so far may still turn into a tool call in `format` (so the
// server holds it back instead of sending it as content).
bool may_become_tool_call(std::string_view text, ToolCallFormat format);

}  // namespace tessera::server
