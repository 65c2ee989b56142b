// Shaping of chat output into reasoning, content and tool calls (see chat_output.h).
#include "server/chat_output.h"

#include <fmt/format.h>

namespace tessera::server {

using json = nlohmann::json;

namespace {

json tool_call_json(const ParsedToolCall& call, const ChatShaping& s, int32_t choice, size_t k) {
  return json{{"id", fmt::format("{}_{}_{}", s.call_id_prefix, choice, k)},
              {"type", "function"},
              {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

ToolCallParse parse_for(const std::string& text, const ChatShaping& s) {
  ToolCallParse p = parse_tool_calls(text, s.format, s.tool_names);
  if (!s.parallel_tool_calls && p.calls.size() > 1) p.calls.resize(1);
  return p;
}

}  // namespace

ChatShaping chat_shaping(const ChatToolSpec& spec, const std::string& rendered_prompt, const std::string& response_id) {
  ChatShaping s;
  s.split_reasoning = spec.separate_reasoning;
  s.starts_in_reasoning = spec.separate_reasoning && prompt_opens_reasoning(rendered_prompt);
  s.tools_active = spec.tools_active();
  s.parallel_tool_calls = spec.parallel_tool_calls;
  s.format = tool_call_format_for_template(rendered_prompt);
  s.tool_names = spec.tool_names;
  if (spec.tool_choice == ToolChoice::kNamed) s.tool_names = {spec.named_function};
  s.call_id_prefix = "call_" + response_id.substr(response_id.find('-') + 1);
  return s;
}

json chat_message(const std::string& text, const ChatShaping& s, int32_t choice, bool* tool_calls_made) {
  *tool_calls_made = false;
  json message = {{"role", "assistant"}};
  std::string content = text;
  if (s.split_reasoning) {
    ReasoningSplit split = split_reasoning(text, s.starts_in_reasoning);
    if (!split.reasoning.empty()) message["reasoning_content"] = split.reasoning;
    content = split.content;
  }
  if (s.tools_active) {
    ToolCallParse p = parse_for(content, s);
    if (!p.calls.empty()) {
      json calls = json::array();
      for (size_t k = 0; k < p.calls.size(); ++k) calls.push_back(tool_call_json(p.calls[k], s, choice, k));
      message["content"] = p.content.empty() ? json(nullptr) : json(p.content);
      message["tool_calls"] = std::move(calls);
      *tool_calls_made = true;
      return message;
    }
  }
  message["content"] = content;
  return message;
}

ChatStreamShaper::ChatStreamShaper(const ChatShaping& shaping, int32_t choice)
    : shaping_(&shaping),
      choice_(choice),
      splitter_(shaping.starts_in_reasoning),
      calls_(shaping.format, &shaping.tool_names, shaping.parallel_tool_calls) {}

void ChatStreamShaper::add_content(const std::string& text, bool at_end, std::vector<json>* out) {
  if (!shaping_->tools_active) {
    if (!text.empty()) out->push_back(json{{"content", text}});
    return;
  }
  std::vector<ToolCallEvent> events;
  calls_.push(text, &events);
  if (at_end) calls_.finish(&events);
  for (ToolCallEvent& e : events) {
    switch (e.kind) {
      case ToolCallEvent::Kind::kContent: out->push_back(json{{"content", std::move(e.text)}}); break;
      case ToolCallEvent::Kind::kCallStart:
        out->push_back(json{{"tool_calls", json::array({json{{"index", e.index},
                                                             {"id", fmt::format("{}_{}_{}", shaping_->call_id_prefix, choice_, e.index)},
                                                             {"type", "function"},
                                                             {"function", {{"name", std::move(e.text)}, {"arguments", ""}}}}})}});
        break;
      case ToolCallEvent::Kind::kArguments:
        out->push_back(json{{"tool_calls", json::array({json{{"index", e.index}, {"function", {{"arguments", std::move(e.text)}}}}})}});
        break;
    }
  }
  if (at_end) made_tool_calls_ = calls_.made_calls();
}

std::vector<json> ChatStreamShaper::push(const std::string& text_delta) {
  std::vector<json> out;
  if (!shaping_->split_reasoning) {
    add_content(text_delta, /*at_end=*/false, &out);
    return out;
  }
  ReasoningSplit part = splitter_.push(text_delta);
  if (!part.reasoning.empty()) out.push_back(json{{"reasoning_content", part.reasoning}});
  add_content(part.content, /*at_end=*/false, &out);
  return out;
}

std::vector<json> ChatStreamShaper::finish() {
  std::vector<json> out;
  ReasoningSplit tail;
  if (shaping_->split_reasoning) {
    tail = splitter_.finish();
    if (!tail.reasoning.empty()) out.push_back(json{{"reasoning_content", tail.reasoning}});
  }
  add_content(tail.content, /*at_end=*/true, &out);
  return out;
}

}  // namespace tessera::server
