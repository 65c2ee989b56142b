// Tool-call parsers (see tool_calls.h for the formats).
#include "server/tool_calls.h"

#include <nlohmann/json.hpp>

namespace tessera::server {
namespace {

using json = nlohmann::ordered_json;

std::string_view trim(std::string_view s) {
  auto ws = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!s.empty() && ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && ws(s.back())) s.remove_suffix(1);
  return s;
}

json parse_json(std::string_view text) { return json::parse(text, nullptr, /*allow_exceptions=*/false); }

// {"name": f, "arguments"|"parameters": {...} or "<json object>"} -> call; false if malformed.
bool to_call(const json& j, const std::set<std::string>& known, ParsedToolCall* out) {
  if (!j.is_object()) return false;
  const json* fn = &j;
  if (j.contains("function") && j["function"].is_object()) fn = &j["function"];  // OpenAI shape
  if (!fn->contains("name") || !(*fn)["name"].is_string()) return false;
  const std::string name = (*fn)["name"];
  if (known.count(name) == 0) return false;
  json args = json::object();
  if (fn->contains("arguments")) {
    args = (*fn)["arguments"];
  } else if (fn->contains("parameters")) {
    args = (*fn)["parameters"];
  }
  if (args.is_string()) args = parse_json(args.get<std::string>());
  if (!args.is_object()) return false;
  out->name = name;
  out->arguments = args.dump(-1, ' ', /*ensure_ascii=*/false);
  return true;
}

bool calls_from(const json& j, const std::set<std::string>& known, std::vector<ParsedToolCall>* out) {
  if (j.is_object() && j.contains("tool_calls") && j["tool_calls"].is_array()) return calls_from(j["tool_calls"], known, out);
  if (j.is_array()) {
    if (j.empty()) return false;
    for (const json& item : j) {
      ParsedToolCall call;
      if (!to_call(item, known, &call)) return false;
      out->push_back(std::move(call));
    }
    return true;
  }
  ParsedToolCall call;
  if (!to_call(j, known, &call)) return false;
  out->push_back(std::move(call));
  return true;
}

std::string_view strip_fence(std::string_view s) {
  s = trim(s);
  if (!s.starts_with("```")) return s;
  s.remove_prefix(3);
  const size_t nl = s.find('\n');
  if (nl == std::string_view::npos) return s;
  s.remove_prefix(nl + 1);
  const size_t end = s.rfind("```");
  if (end != std::string_view::npos) s = s.substr(0, end);
  return trim(s);
}

bool parse_generic(std::string_view text, const std::set<std::string>& known, ToolCallParse* out) {
  const json j = parse_json(strip_fence(text));
  std::vector<ParsedToolCall> calls;
  if (j.is_discarded() || !calls_from(j, known, &calls)) return false;
  out->calls = std::move(calls);
  out->content.clear();
  return true;
}

bool parse_hermes(std::string_view text, const std::set<std::string>& known, ToolCallParse* out) {
  const std::string_view open = "<tool_call>", close = "</tool_call>";
  size_t at = text.find(open);
  if (at == std::string_view::npos) return false;
  std::string content(trim(text.substr(0, at)));
  std::vector<ParsedToolCall> calls;
  while (at != std::string_view::npos) {
    const size_t end = text.find(close, at);
    if (end == std::string_view::npos) return false;  // unterminated
    const json j = parse_json(trim(text.substr(at + open.size(), end - at - open.size())));
    if (j.is_discarded() || !calls_from(j, known, &calls)) return false;
    const size_t next = text.find(open, end);
    const std::string_view between = trim(text.substr(end + close.size(), next == std::string_view::npos ? std::string_view::npos : next - end - close.size()));
    if (!between.empty()) {
      if (!content.empty()) content += "\n";
      content += between;
    }
    at = next;
  }
  out->calls = std::move(calls);
  out->content = std::move(content);
  return true;
}

bool parse_mistral(std::string_view text, const std::set<std::string>& known, ToolCallParse* out) {
  const std::string_view tag = "[TOOL_CALLS]";
  const size_t at = text.find(tag);
  if (at == std::string_view::npos) return false;
  const json j = parse_json(trim(text.substr(at + tag.size())));
  std::vector<ParsedToolCall> calls;
  if (j.is_discarded() || !calls_from(j, known, &calls)) return false;
  out->calls = std::move(calls);
  out->content = std::string(trim(text.substr(0, at)));
  return true;
}

bool parse_llama3(std::string_view text, const std::set<std::string>& known, ToolCallParse* out) {
  std::string_view body = trim(text);
  if (body.starts_with("<|python_tag|>")) body = trim(body.substr(14));
  if (!body.starts_with("{")) return false;
  // One object, or several separated by ';' or newlines: parse each top-level {...} in turn.
  std::vector<ParsedToolCall> calls;
  size_t pos = 0;
  while (pos < body.size()) {
    while (pos < body.size() && (body[pos] == ';' || body[pos] == ' ' || body[pos] == '\n' || body[pos] == '\r' || body[pos] == '\t')) ++pos;
    if (pos == body.size()) break;
    if (body[pos] != '{') return false;
    int depth = 0;
    bool in_string = false;
    size_t end = pos;
    for (; end < body.size(); ++end) {
      const char c = body[end];
      if (in_string) {
        if (c == '\\') ++end;
        else if (c == '"') in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{') {
        ++depth;
      } else if (c == '}' && --depth == 0) {
        break;
      }
    }
    if (end >= body.size()) return false;  // unterminated
    const json j = parse_json(body.substr(pos, end + 1 - pos));
    if (j.is_discarded() || !calls_from(j, known, &calls)) return false;
    pos = end + 1;
  }
  if (calls.empty()) return false;
  out->calls = std::move(calls);
  out->content.clear();
  return true;
}

}  // namespace

ToolCallFormat tool_call_format_for_template(std::string_view src) {
  if (src.find("<tool_call>") != std::string_view::npos) return ToolCallFormat::kHermes;
  if (src.find("[TOOL_CALLS]") != std::string_view::npos || src.find("[AVAILABLE_TOOLS]") != std::string_view::npos) {
    return ToolCallFormat::kMistral;
  }
  if (src.find("<|start_header_id|>") != std::string_view::npos) return ToolCallFormat::kLlama3;
  return ToolCallFormat::kGenericJson;
}

const char* tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes: return "hermes";
    case ToolCallFormat::kMistral: return "mistral";
    case ToolCallFormat::kLlama3: return "llama3";
    case ToolCallFormat::kGenericJson: return "json";
  }
  return "?";
}

ToolCallParse parse_tool_calls(std::string_view text, ToolCallFormat format, const std::set<std::string>& known) {
  ToolCallParse out;
  bool found = false;
  switch (format) {
    case ToolCallFormat::kHermes: found = parse_hermes(text, known, &out); break;
    case ToolCallFormat::kMistral: found = parse_mistral(text, known, &out); break;
    case ToolCallFormat::kLlama3: found = parse_llama3(text, known, &out); break;
    case ToolCallFormat::kGenericJson: break;
  }
  if (!found) found = parse_generic(text, known, &out);
  if (!found) {
    out.calls.clear();
    out.content = std::string(text);
  }
  return out;
}

bool may_become_tool_call(std::string_view text, ToolCallFormat format) {
  const std::string_view t = trim(text);
  if (t.empty()) return true;
  static const std::string_view kStarts[] = {"<tool_call>", "[TOOL_CALLS]", "<|python_tag|>", "{", "[", "```"};
  for (std::string_view s : kStarts) {
    if (t.starts_with(s) || s.starts_with(t)) return true;
  }
  // Hermes and Mistral models may write some text before the call tag.
  if (format == ToolCallFormat::kHermes) return t.find("<tool_call>") != std::string_view::npos || t.find('<') != std::string_view::npos;
  if (format == ToolCallFormat::kMistral) return t.find("[TOOL_CALLS]") != std::string_view::npos;
  return false;
}

}  // namespace tessera::server
