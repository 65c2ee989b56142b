// Chat template families rendered in C++ (see chat_template.h for the detection table).
#include "tokenizer/chat_template.h"

#include "util/log.h"

namespace tessera::tokenizer {
namespace {

bool contains(std::string_view s, std::string_view what) { return s.find(what) != s.npos; }

// Python's str.strip() on ASCII whitespace (Jinja's trim filter).
std::string_view trim(std::string_view s) {
  auto ws = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); };
  while (!s.empty() && ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && ws(s.back())) s.remove_suffix(1);
  return s;
}

// The literal system prompt a ChatML template injects: "<|im_start|>system" + newline (raw or the
// escape \n) + text without quotes or Jinja braces + "<|im_end|>". Empty when there is none.
std::string find_default_system_prompt(std::string_view src) {
  const std::string_view open = "<|im_start|>system";
  for (size_t at = src.find(open); at != src.npos; at = src.find(open, at + 1)) {
    std::string_view rest = src.substr(at + open.size());
    if (rest.starts_with("\n")) {
      rest.remove_prefix(1);
    } else if (rest.starts_with("\\n")) {
      rest.remove_prefix(2);
    } else {
      continue;
    }
    const size_t end = rest.find("<|im_end|>");
    if (end == rest.npos || end == 0) continue;
    const std::string_view text = rest.substr(0, end);
    if (text.find_first_of("'\"{}") != text.npos) continue;  // an expression, not a literal
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == 'n') {
        out.push_back('\n');
        ++i;
      } else {
        out.push_back(text[i]);
      }
    }
    return out;
  }
  return {};
}

Error alternation_error() {
  return make_error(ErrorCode::kInvalidArgument,
                    "chat template: conversation roles must alternate user/assistant/user/...");
}

// Checks that messages[first..] alternate user, assistant, user, ...
Status check_alternation(const std::vector<ChatMessage>& messages, size_t first) {
  for (size_t i = first; i < messages.size(); ++i) {
    if ((messages[i].role == "user") != ((i - first) % 2 == 0)) return alternation_error();
  }
  return ok_status();
}

std::string render_chatml(const std::vector<ChatMessage>& messages, bool gen,
                          const std::string& default_system) {
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i == 0 && !default_system.empty() && messages[0].role != "system") {
      out += "<|im_start|>system\n" + default_system + "<|im_end|>\n";
    }
    out += "<|im_start|>" + messages[i].role + "\n" + messages[i].content + "<|im_end|>\n";
  }
  if (gen) out += "<|im_start|>assistant\n";
  return out;
}

Result<std::string> render_llama2(const std::vector<ChatMessage>& messages, std::string_view bos,
                                  std::string_view eos) {
  const bool has_system = !messages.empty() && messages[0].role == "system";
  const size_t first = has_system ? 1 : 0;
  TESSERA_TRY(check_alternation(messages, first));
  std::string out;
  for (size_t i = first; i < messages.size(); ++i) {
    std::string content = messages[i].content;
    if (i == first && has_system) {
      content = "<<SYS>>\n" + messages[0].content + "\n<</SYS>>\n\n" + content;
    }
    if (messages[i].role == "user") {
      out += fmt::format("{}[INST] {} [/INST]", bos, trim(content));
    } else if (messages[i].role == "assistant") {
      out += fmt::format(" {} {}", trim(content), eos);
    }
  }
  return out;
}

std::string render_llama3(const std::vector<ChatMessage>& messages, bool gen,
                          std::string_view bos) {
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i == 0) out += bos;
    out += fmt::format("<|start_header_id|>{}<|end_header_id|>\n\n{}<|eot_id|>", messages[i].role,
                       trim(messages[i].content));
  }
  if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

Result<std::string> render_mistral_v1(const std::vector<ChatMessage>& messages,
                                      std::string_view bos, std::string_view eos) {
  std::string out(bos);
  for (size_t i = 0; i < messages.size(); ++i) {
    if ((messages[i].role == "user") != (i % 2 == 0)) return alternation_error();
    if (messages[i].role == "user") {
      out += "[INST] " + messages[i].content + " [/INST]";
    } else if (messages[i].role == "assistant") {
      out += messages[i].content + std::string(eos);
    } else {
      return make_error(ErrorCode::kInvalidArgument,
                        "chat template: only user and assistant roles are supported");
    }
  }
  return out;
}

Result<std::string> render_mistral_v3(const std::vector<ChatMessage>& messages,
                                      std::string_view bos, std::string_view eos) {
  const bool has_system = !messages.empty() && messages[0].role == "system";
  const size_t first = has_system ? 1 : 0;
  std::string out(bos);
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if ((m.role == "user") != ((i - first) % 2 == 0)) return alternation_error();
    if (m.role == "user") {
      if (i + 1 == messages.size() && has_system) {
        out += "[INST] " + messages[0].content + "\n\n" + m.content + "[/INST]";
      } else {
        out += "[INST] " + m.content + "[/INST]";
      }
    } else if (m.role == "assistant") {
      out += fmt::format(" {}{}", trim(m.content), eos);
    } else {
      return make_error(ErrorCode::kInvalidArgument,
                        "chat template: only user and assistant roles are supported, with the "
                        "exception of an initial optional system message");
    }
  }
  return out;
}

Result<std::string> render_gemma(const std::vector<ChatMessage>& messages, bool gen,
                                 std::string_view bos) {
  if (!messages.empty() && messages[0].role == "system") {
    return make_error(ErrorCode::kInvalidArgument, "chat template: system role not supported");
  }
  TESSERA_TRY(check_alternation(messages, 0));
  std::string out(bos);
  for (const ChatMessage& m : messages) {
    const std::string_view role = m.role == "assistant" ? "model" : std::string_view(m.role);
    out += fmt::format("<start_of_turn>{}\n{}<end_of_turn>\n", role, trim(m.content));
  }
  if (gen) out += "<start_of_turn>model\n";
  return out;
}

std::string render_phi3(const std::vector<ChatMessage>& messages, bool gen, std::string_view eos) {
  std::string out;
  for (const ChatMessage& m : messages) {
    if (m.role == "system" || m.role == "user" || m.role == "assistant") {
      out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
    }
  }
  out += gen ? std::string("<|assistant|>\n") : std::string(eos);
  return out;
}

}  // namespace

std::string_view chat_template_family_name(ChatTemplateFamily family) {
  switch (family) {
    case ChatTemplateFamily::kChatMl: return "chatml";
    case ChatTemplateFamily::kLlama2: return "llama2";
    case ChatTemplateFamily::kLlama3: return "llama3";
    case ChatTemplateFamily::kMistralV1: return "mistral-v1";
    case ChatTemplateFamily::kMistralV3: return "mistral-v3";
    case ChatTemplateFamily::kGemma: return "gemma";
    case ChatTemplateFamily::kPhi3: return "phi3";
  }
  return "?";
}

DetectedTemplate detect_chat_template(std::string_view src) {
  DetectedTemplate d;
  if (contains(src, "<|im_start|>")) {
    d.family = ChatTemplateFamily::kChatMl;
    d.default_system_prompt = find_default_system_prompt(src);
  } else if (contains(src, "<|start_header_id|>")) {
    d.family = ChatTemplateFamily::kLlama3;
  } else if (contains(src, "<start_of_turn>")) {
    d.family = ChatTemplateFamily::kGemma;
  } else if (contains(src, "<|user|>") && contains(src, "<|end|>")) {
    d.family = ChatTemplateFamily::kPhi3;
  } else if (contains(src, "[INST]") && contains(src, "<<SYS>>")) {
    d.family = ChatTemplateFamily::kLlama2;
  } else if (contains(src, "[INST]")) {
    d.family = contains(src, " [/INST]") ? ChatTemplateFamily::kMistralV1
                                         : ChatTemplateFamily::kMistralV3;
  } else {
    d.family = ChatTemplateFamily::kChatMl;
    d.used_fallback = true;
  }
  return d;
}

Result<RenderedChat> render_chat(std::string_view template_source,
                                 const std::vector<ChatMessage>& messages,
                                 bool add_generation_prompt, std::string_view bos_token,
                                 std::string_view eos_token) {
  const DetectedTemplate d = detect_chat_template(template_source);
  RenderedChat out;
  out.family = d.family;
  out.used_fallback = d.used_fallback;
  const bool gen = add_generation_prompt;
  Result<std::string> text = std::string();
  switch (d.family) {
    case ChatTemplateFamily::kChatMl:
      text = render_chatml(messages, gen, d.default_system_prompt);
      break;
    case ChatTemplateFamily::kLlama2: text = render_llama2(messages, bos_token, eos_token); break;
    case ChatTemplateFamily::kLlama3: text = render_llama3(messages, gen, bos_token); break;
    case ChatTemplateFamily::kMistralV1:
      text = render_mistral_v1(messages, bos_token, eos_token);
      break;
    case ChatTemplateFamily::kMistralV3:
      text = render_mistral_v3(messages, bos_token, eos_token);
      break;
    case ChatTemplateFamily::kGemma: text = render_gemma(messages, gen, bos_token); break;
    case ChatTemplateFamily::kPhi3: text = render_phi3(messages, gen, eos_token); break;
  }
  if (!text.ok()) return text.error();
  out.text = std::move(*text);
  return out;
}

Result<std::string> apply_chat_template(std::string_view template_source,
                                        const std::vector<ChatMessage>& messages,
                                        bool add_generation_prompt, std::string_view bos_token,
                                        std::string_view eos_token) {
  Result<RenderedChat> r =
      render_chat(template_source, messages, add_generation_prompt, bos_token, eos_token);
  if (!r.ok()) return r.error();
  if (r->used_fallback) {
    TESSERA_LOG_WARN("chat template not recognised ({} bytes): rendering as ChatML",
                     template_source.size());
  }
  return std::move(r->text);
}

}  // namespace tessera::tokenizer
