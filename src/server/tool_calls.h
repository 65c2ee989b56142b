// Tool calls in a model's output, per family format, for /v1/chat/completions:
//
//   format        what the model writes                                        families
//   kHermes       <tool_call>{"name": f, "arguments": {...}}</tool_call> (1+)   Qwen 2.5/3, Hermes, SmolLM3
//   kMistral      [TOOL_CALLS] [{"name": f, "arguments": {...}}, ...]           Mistral, Devstral
//   kLlama3       [<|python_tag|>]{"name": f, "parameters": {...}} (; or \n sep) Llama 3.1/3.2/3.3
//   kGenericJson  the whole output is {"name", "arguments"}, a list of them, or
//                 {"tool_calls": [...]}, optionally in a ```json fence          any (also the fallback)
//
// This file is the readable, whole-text parser; tool_call_stream.h is its streaming twin (the
// tests feed both the same outputs and compare). The rules both follow:
//  1. An output whose first non-blank text is JSON (or, for Llama 3, <|python_tag|>; for any
//     format a ``` fence line first) is a JSON region: one or more call containers separated by
//     blanks or ';', then an optional closing fence. content is "" and the calls are the region's.
//  2. Otherwise, or when the region is not all valid calls, the family marker (Hermes <tool_call>,
//     Mistral [TOOL_CALLS]) is looked for. Hermes: each <tool_call> holds one container and ends
//     with </tool_call> (the last one may end the output instead); the text between blocks is
//     content, blanks next to a block trimmed, non-empty pieces joined with "\n". Mistral: the
//     text before the marker (right-trimmed) is content, after it come containers to the end.
//  3. Anything else, or anything malformed (bad JSON, unterminated, an unknown function, arguments
//     that are not an object, an empty list): no calls, the whole text verbatim as content.
// A container is a call object, a non-empty array of call objects, or {"tool_calls": [...]}. A
// call object is {"name", "arguments"|"parameters"} or OpenAI's {"function": {...}}; the first of
// the keys name / function / tool_calls decides which, and any of those keys twice, or both
// arguments and parameters, makes it malformed. `arguments` is the model's own text of the
// arguments object, byte for byte (or the decoded text when the model wrote it as a JSON string;
// "{}" when absent), so a stream can send it as it is generated.
#pragma once
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::server {

enum class ToolCallFormat { kHermes, kMistral, kLlama3, kGenericJson };

ToolCallFormat tool_call_format_for_template(std::string_view chat_template_source);
const char* tool_call_format_name(ToolCallFormat format);
// The marker that opens calls in the middle of text ("" for formats without one).
std::string_view tool_call_marker(ToolCallFormat format);

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // the arguments object's JSON text (OpenAI's `arguments` string)
};

struct ToolCallParse {
  std::string content;               // text outside the calls (rule 2); the whole text when no calls
  std::vector<ParsedToolCall> calls;
};

// known_functions: the request's tool names; a call to any other name is malformed.
ToolCallParse parse_tool_calls(std::string_view text, ToolCallFormat format,
                               const std::set<std::string>& known_functions);

}  // namespace tessera::server
