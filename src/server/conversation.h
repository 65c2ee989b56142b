// The server's one model of a chat, between the wire formats and the engine:
//
//   /v1/messages (anthropic_parse.cpp) ─┐                        ┌─ anthropic_write.cpp
//   /v1/responses (responses_parse.cpp) ┴─> Conversation ─> ... ─> AssistantOutput / OutputDelta ─┴─ responses_write.cpp
//
// Input side: Conversation (system text, user/assistant/tool turns with text, reasoning, tool calls
// and tool results, tool definitions, tool choice) -> chat_tool_spec() writes the one thing the
// model's Jinja template reads: OpenAI-shaped messages/tools JSON (ChatTemplateInput's shape, what
// HF chat templates expect) plus the tool-choice facts the shaping and the grammar need.
// Output side: the existing chat shaping (chat_output.h: <think> split, tool-call parsing, also
// while streaming) produces OpenAI-shaped message / delta JSON; assistant_output() and
// output_deltas() turn those into plain data each wire writer writes in its own shape.
// /v1/chat/completions keeps rendering from the client's messages JSON as sent (its parser already
// validates it; re-serialising would change key order the templates print).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/chat_tools_parse.h"
#include "server/protocol_response.h"

namespace tessera::server {

struct ToolCall {
  std::string id;              // "toolu_..." / "call_..." as the client knows it
  std::string name;
  std::string arguments_json;  // a JSON object's text, key order as given
};

// kSystem: a system message between turns (Claude Code sends one after the first user message);
// rendered in place, as templates that allow it (Qwen's, SmolLM's) print it.
enum class TurnRole { kUser, kAssistant, kTool, kSystem };

struct Turn {
  TurnRole role = TurnRole::kUser;
  std::string text;                  // the text parts joined with "\n" (as the chat render joins parts)
  std::string reasoning;             // assistant: earlier thinking (templates may drop it)
  std::vector<ToolCall> tool_calls;  // assistant
  std::string tool_call_id;          // tool: the call this result answers
  std::string tool_name;             // tool: that call's function name
};

struct ToolDef {
  std::string name;
  std::string description;
  std::string parameters_json = R"({"type":"object"})";  // a JSON Schema object's text, key order kept
};

struct Conversation {
  std::string system;               // "" = none
  std::vector<Turn> turns;
  std::vector<ToolDef> tools;
  ToolChoice choice = ToolChoice::kAuto;
  std::string choice_name;          // kNamed
  bool parallel_tool_calls = true;
  std::string template_kwargs_json; // "" or an object (enable_thinking...)
};

// The ChatToolSpec the generate flow renders and shapes from (messages_json, tools_json in
// OpenAI's shape; tool names and choice).
ChatToolSpec chat_tool_spec(const Conversation& conversation);

// The OpenAI-shaped tools array of a conversation (what the grammar's tool_call_schema reads).
nlohmann::ordered_json openai_tools(const Conversation& conversation);

// What one answer is, whatever the wire: from chat_message()'s JSON plus the finish facts.
struct AssistantOutput {
  std::string reasoning;
  std::string text;
  std::vector<ToolCall> tool_calls;
  FinishReason finish = FinishReason::kNone;
  std::string stop_sequence;         // the client's stop sequence that ended it, "" = none
  UsageCounts usage;                 // prompt (total), completion, cached prompt tokens
};
AssistantOutput assistant_output(const nlohmann::json& chat_message);

// One streamed piece, from a ChatStreamShaper delta.
struct OutputDelta {
  enum class Kind { kReasoning, kText, kCallStart, kCallArguments };
  Kind kind = Kind::kText;
  std::string text;   // reasoning / text / the call's name (kCallStart) / argument text
  std::string id;     // kCallStart: the call's id
  int32_t index = 0;  // calls: the call's index in this answer
};
std::vector<OutputDelta> output_deltas(const nlohmann::json& chat_delta);

}  // namespace tessera::server
