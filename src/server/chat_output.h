// Response side of /v1/chat/completions for tools and reasoning: the generated text of one choice
// becomes message.reasoning_content (<think> split, reasoning.h), message.content and
// message.tool_calls (tool_calls.h) with finish_reason "tool_calls"; streamed as
// delta.reasoning_content, delta.content and delta.tool_calls as the text is generated (per call:
// index, id, type and name once the name is complete, then the arguments as they grow;
// tool_call_stream.h says what is held back and why).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/chat_tools_parse.h"
#include "server/reasoning.h"
#include "server/tool_call_stream.h"
#include "server/tool_calls.h"

namespace tessera::server {

struct ChatShaping {
  bool split_reasoning = false;
  bool starts_in_reasoning = false;
  bool tools_active = false;
  bool parallel_tool_calls = true;
  ToolCallFormat format = ToolCallFormat::kGenericJson;
  std::set<std::string> tool_names;
  std::string call_id_prefix;  // ids are call_id_prefix + "_" + choice + "_" + call index
  bool active() const { return split_reasoning || tools_active; }
};

ChatShaping chat_shaping(const ChatToolSpec& spec, const std::string& rendered_prompt, const std::string& response_id);

// Non-streaming: the assistant message; *tool_calls_made when message.tool_calls is set.
nlohmann::json chat_message(const std::string& text, const ChatShaping& shaping, int32_t choice, bool* tool_calls_made);

class ChatStreamShaper {
 public:
  ChatStreamShaper(const ChatShaping& shaping, int32_t choice);
  std::vector<nlohmann::json> push(const std::string& text_delta);  // deltas to send now
  std::vector<nlohmann::json> finish();                             // the rest, at the end
  bool made_tool_calls() const { return made_tool_calls_; }  // after finish()

 private:
  void add_content(const std::string& text, bool at_end, std::vector<nlohmann::json>* out);
  const ChatShaping* shaping_;
  int32_t choice_;
  ReasoningSplitter splitter_;
  ToolCallStream calls_;
  bool made_tool_calls_ = false;
};

}  // namespace tessera::server
