// The readable tool-call parser (rules in tool_calls.h): nlohmann-json checks that each JSON value
// is valid, then a small walker over the (valid) text finds the members and their byte spans, so
// `arguments` can be the model's own bytes.
#include "server/tool_calls.h"

#include <nlohmann/json.hpp>

namespace tessera::server {
namespace {

using json = nlohmann::ordered_json;
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kHermesOpen = "<tool_call>", kHermesClose = "</tool_call>";
constexpr std::string_view kMistralTag = "[TOOL_CALLS]";

bool is_blank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
std::string_view ltrim(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  return s;
}
std::string_view rtrim(std::string_view s) {
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}
bool valid_json(std::string_view s) { return json::accept(s); }

// Length of the JSON value at the start of `s` by bracket and string matching (no validation);
// npos when it does not end within `s`. Scalars end at the next delimiter.
size_t value_length(std::string_view s) {
  if (s.empty()) return std::string_view::npos;
  if (s[0] == '"') {
    for (size_t i = 1; i < s.size(); ++i) {
      if (s[i] == '\\') ++i;
      else if (s[i] == '"') return i + 1;
    }
    return std::string_view::npos;
  }
  if (s[0] != '{' && s[0] != '[') {
    size_t i = 0;
    while (i < s.size() && s[i] != ',' && s[i] != '}' && s[i] != ']' && !is_blank(s[i])) ++i;
    return i;
  }
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

std::string decode_string(std::string_view quoted) { return json::parse(quoted).get<std::string>(); }

struct Member {
  std::string key;
  std::string_view value;  // the value's bytes
};

// The members of a valid JSON object text, in order (duplicates kept).
std::vector<Member> members_of(std::string_view obj) {
  std::vector<Member> out;
  std::string_view s = ltrim(obj.substr(1));
  while (!s.empty() && s[0] == '"') {
    const size_t key_len = value_length(s);
    Member m{decode_string(s.substr(0, key_len)), {}};
    s = ltrim(ltrim(s.substr(key_len)).substr(1));  // past ':'
    m.value = s.substr(0, value_length(s));
    s = ltrim(s.substr(m.value.size()));
    out.push_back(std::move(m));
    if (!s.empty() && s[0] == ',') s = ltrim(s.substr(1));
  }
  return out;
}

// The elements of a valid JSON array text.
std::vector<std::string_view> elements_of(std::string_view arr) {
  std::vector<std::string_view> out;
  std::string_view s = ltrim(arr.substr(1));
  while (!s.empty() && s[0] != ']') {
    out.push_back(s.substr(0, value_length(s)));
    s = ltrim(s.substr(out.back().size()));
    if (!s.empty() && s[0] == ',') s = ltrim(s.substr(1));
  }
  return out;
}

class Extractor {
 public:
  explicit Extractor(const std::set<std::string>& known) : known_(known) {}

  // A container (a valid JSON value's text): a call object, an array of them, or a tool_calls list.
  bool container(std::string_view value, std::vector<ParsedToolCall>* calls) const {
    if (value[0] == '[') return call_list(value, calls);
    if (value[0] == '{') return call_object(value, /*allow_list=*/true, calls);
    return false;
  }

 private:
  bool call_list(std::string_view arr, std::vector<ParsedToolCall>* calls) const {
    const std::vector<std::string_view> items = elements_of(arr);
    if (items.empty()) return false;
    for (std::string_view item : items) {
      if (item[0] != '{' || !call_object(item, /*allow_list=*/false, calls)) return false;
    }
    return true;
  }

  static bool repeated_keys(const std::vector<Member>& ms) {
    int num_name = 0, num_function = 0, num_list = 0, num_args = 0;
    for (const Member& m : ms) {
      num_name += m.key == "name";
      num_function += m.key == "function";
      num_list += m.key == "tool_calls";
      num_args += m.key == "arguments" || m.key == "parameters";
    }
    return num_name > 1 || num_function > 1 || num_list > 1 || num_args > 1;
  }

  bool call_object(std::string_view obj, bool allow_list, std::vector<ParsedToolCall>* calls) const {
    const std::vector<Member> ms = members_of(obj);
    if (repeated_keys(ms)) return false;
    for (const Member& m : ms) {  // the first of name / function / tool_calls decides
      if (m.key == "name") return flat_call(ms, calls);
      if (m.key == "function") {
        if (m.value[0] != '{') return false;
        const std::vector<Member> inner = members_of(m.value);
        return !repeated_keys(inner) && flat_call(inner, calls);
      }
      if (m.key == "tool_calls") return allow_list && m.value[0] == '[' && call_list(m.value, calls);
    }
    return false;
  }

  // {"name": f, "arguments"|"parameters": {...} or "<object text>"}; other keys are ignored.
  bool flat_call(const std::vector<Member>& ms, std::vector<ParsedToolCall>* calls) const {
    ParsedToolCall call;
    bool named = false;
    call.arguments = "{}";
    for (const Member& m : ms) {
      if (m.key == "name") {
        if (m.value[0] != '"') return false;
        call.name = decode_string(m.value);
        if (known_.count(call.name) == 0) return false;
        named = true;
      } else if (m.key == "arguments" || m.key == "parameters") {
        if (m.value[0] == '{') {
          call.arguments = std::string(m.value);
        } else if (m.value[0] == '"') {
          const std::string text = decode_string(m.value);
          const std::string_view trimmed = rtrim(ltrim(text));
          const json j = json::parse(trimmed, nullptr, /*allow_exceptions=*/false);
          if (!j.is_object()) return false;
          call.arguments = std::string(trimmed);
        } else {
          return false;
        }
      }
    }
    if (!named) return false;
    calls->push_back(std::move(call));
    return true;
  }

  const std::set<std::string>& known_;
};

// Containers separated by blanks or ';' up to the end of `s` (or, when fenced, a closing ```
// followed only by blanks). At least one.
bool containers_to_end(std::string_view s, bool fenced, const Extractor& ex, std::vector<ParsedToolCall>* calls) {
  size_t num_values = 0;
  while (true) {
    while (!s.empty() && (is_blank(s[0]) || s[0] == ';')) s.remove_prefix(1);
    if (s.empty()) return num_values > 0;
    if (fenced && s.starts_with("```")) return num_values > 0 && ltrim(s.substr(3)).empty();
    if (s[0] != '{' && s[0] != '[') return false;
    const size_t len = value_length(s);
    if (len == std::string_view::npos || !valid_json(s.substr(0, len)) || !ex.container(s.substr(0, len), calls)) return false;
    ++num_values;
    s.remove_prefix(len);
  }
}

// Rule 1: `s` starts at the output's first non-blank byte.
bool json_region(std::string_view s, ToolCallFormat format, const Extractor& ex, std::vector<ParsedToolCall>* calls) {
  if (format == ToolCallFormat::kLlama3 && s.starts_with(kPythonTag)) s = ltrim(s.substr(kPythonTag.size()));
  bool fenced = false;
  if (s.starts_with("```")) {
    const size_t nl = s.find('\n');
    if (nl == std::string_view::npos) return false;
    s.remove_prefix(nl + 1);
    fenced = true;
  }
  return containers_to_end(s, fenced, ex, calls);
}

bool hermes_blocks(std::string_view text, const Extractor& ex, ToolCallParse* out) {
  size_t at = text.find(kHermesOpen);
  if (at == std::string_view::npos) return false;
  std::vector<std::string_view> pieces = {rtrim(text.substr(0, at))};
  while (true) {
    std::string_view s = ltrim(text.substr(at + kHermesOpen.size()));
    if (s.empty() || (s[0] != '{' && s[0] != '[')) return false;
    const size_t len = value_length(s);
    if (len == std::string_view::npos || !valid_json(s.substr(0, len)) || !ex.container(s.substr(0, len), &out->calls)) return false;
    s = ltrim(s.substr(len));
    if (s.empty()) break;  // the last block may end the output without </tool_call>
    if (!s.starts_with(kHermesClose)) return false;
    const size_t after = text.size() - s.size() + kHermesClose.size();
    const size_t next = text.find(kHermesOpen, after);
    if (next == std::string_view::npos) {
      pieces.push_back(ltrim(text.substr(after)));
      break;
    }
    pieces.push_back(rtrim(ltrim(text.substr(after, next - after))));
    at = next;
  }
  for (std::string_view p : pieces) {
    if (p.empty()) continue;
    if (!out->content.empty()) out->content += "\n";
    out->content += p;
  }
  return true;
}

bool mistral_calls(std::string_view text, const Extractor& ex, ToolCallParse* out) {
  const size_t at = text.find(kMistralTag);
  if (at == std::string_view::npos) return false;
  if (!containers_to_end(text.substr(at + kMistralTag.size()), /*fenced=*/false, ex, &out->calls)) return false;
  out->content = std::string(rtrim(text.substr(0, at)));
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

std::string_view tool_call_marker(ToolCallFormat format) {
  if (format == ToolCallFormat::kHermes) return kHermesOpen;
  if (format == ToolCallFormat::kMistral) return kMistralTag;
  return {};
}

ToolCallParse parse_tool_calls(std::string_view text, ToolCallFormat format, const std::set<std::string>& known) {
  const Extractor ex(known);
  ToolCallParse out;
  if (json_region(ltrim(text), format, ex, &out.calls)) return out;
  out.calls.clear();
  bool found = false;
  if (format == ToolCallFormat::kHermes) found = hermes_blocks(text, ex, &out);
  if (format == ToolCallFormat::kMistral) found = mistral_calls(text, ex, &out);
  if (!found) {
    out.calls.clear();
    out.content = std::string(text);
  }
  return out;
}

}  // namespace tessera::server
