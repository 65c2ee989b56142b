// Shaping of chat output into reasoning, content and tool calls (see chat_output.h).
#include "server/chat_output.h"

#include <fmt/format.h>

namespace tessera::server {

using json = nlohmann::json;

namespace {

constexpr size_t kArgumentFragmentBytes = 16;  // streamed `arguments` pieces (UTF-8 safe cuts)

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
    : shaping_(&shaping), choice_(choice), splitter_(shaping.starts_in_reasoning) {
  passing_ = !shaping.tools_active;
}

void ChatStreamShaper::add_content(const std::string& text, std::vector<json>* out) {
  if (text.empty()) return;
  if (passing_) {
    out->push_back(json{{"content", text}});
    return;
  }
  held_ += text;
  if (!may_become_tool_call(held_, shaping_->format)) {
    passing_ = true;
    out->push_back(json{{"content", std::move(held_)}});
    held_.clear();
  }
}

std::vector<json> ChatStreamShaper::push(const std::string& text_delta) {
  std::vector<json> out;
  if (!shaping_->split_reasoning) {
    add_content(text_delta, &out);
    return out;
  }
  ReasoningSplit part = splitter_.push(text_delta);
  if (!part.reasoning.empty()) out.push_back(json{{"reasoning_content", part.reasoning}});
  add_content(part.content, &out);
  return out;
}

std::vector<json> ChatStreamShaper::finish() {
  std::vector<json> out;
  if (shaping_->split_reasoning) {
    ReasoningSplit tail = splitter_.finish();
    if (!tail.reasoning.empty()) out.push_back(json{{"reasoning_content", tail.reasoning}});
    add_content(tail.content, &out);
  }
  if (held_.empty()) return out;
  ToolCallParse p = parse_for(held_, *shaping_);
  if (p.calls.empty()) {
    out.push_back(json{{"content", std::move(held_)}});
    held_.clear();
    return out;
  }
  if (!p.content.empty()) out.push_back(json{{"content", p.content}});
  for (size_t k = 0; k < p.calls.size(); ++k) {
    json head = tool_call_json(p.calls[k], *shaping_, choice_, k);
    head["index"] = k;
    head["function"]["arguments"] = "";
    out.push_back(json{{"tool_calls", json::array({head})}});
    const std::string& args = p.calls[k].arguments;
    for (size_t at = 0; at < args.size();) {
      size_t n = std::min(kArgumentFragmentBytes, args.size() - at);
      while (at + n < args.size() && (static_cast<unsigned char>(args[at + n]) & 0xc0) == 0x80) ++n;
      out.push_back(json{{"tool_calls", json::array({json{{"index", k}, {"function", {{"arguments", args.substr(at, n)}}}}})}});
      at += n;
    }
  }
  made_tool_calls_ = true;
  held_.clear();
  return out;
}

}  // namespace tessera::server
