// What the model is fed for a chat: the GGUF's own tokenizer.chat_template rendered by tessera's
// Jinja engine (jinja/) with the variables Hugging Face's apply_chat_template passes (messages,
// tools, add_generation_prompt, bos_token, eos_token, and any chat_template_kwargs such as
// enable_thinking). The family table (chat_template.h) renders only a file with no template, or
// one whose template does not parse (logged once at load).
//
// Messages arrive in OpenAI's shape and are normalised as vLLM does before rendering: content given
// as a list of parts becomes the parts' text joined by "\n"; a tool call's `arguments` given as a
// JSON string (OpenAI) becomes the object it encodes (HF templates apply `tojson` to it).
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace tessera::jinja {
class Template;
}

namespace tessera::tokenizer {

struct ChatRenderInput {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // [{role, content, tool_calls, ...}]
  nlohmann::ordered_json tools;   // null, or [{"type": "function", "function": {...}}]
  nlohmann::ordered_json kwargs;  // null, or an object of extra template variables
  bool add_generation_prompt = true;
};

class ChatRenderer {
 public:
  // Parses the template once. An unparsable template is not an error here: the renderer falls
  // back to the family table and fallback_reason() says why. `vocab_markers` is what the family
  // table detects the family from when the file has no template at all: the turn markers the
  // vocabulary holds (vocab_turn_markers), e.g. "<start_of_turn><end_of_turn>" for Gemma 3.
  ChatRenderer(std::string_view template_source, std::string bos_token, std::string eos_token,
               std::string vocab_markers = "");
  ~ChatRenderer();
  ChatRenderer(ChatRenderer&&) noexcept;

  Result<std::string> render(const ChatRenderInput& input) const;

  bool uses_jinja() const { return jinja_ != nullptr; }
  const std::string& fallback_reason() const { return fallback_reason_; }

 private:
  std::string source_;
  std::string family_source_;  // what the family table detects from: source_, else the markers
  std::string bos_, eos_;
  std::unique_ptr<jinja::Template> jinja_;
  std::string fallback_reason_;
};

// The turn markers among the family table's (chat_template.h) that a vocabulary holds, concatenated,
// for a file with no template: `has_token(text)` says whether the vocabulary has that exact token.
template <typename HasToken>
std::string vocab_turn_markers(HasToken&& has_token) {
  std::string markers;
  for (const char* m : {"<|im_start|>", "<|start_header_id|>", "<start_of_turn>", "<|user|>", "<|end|>", "[INST]"}) {
    if (has_token(m)) markers += m;
  }
  return markers;
}

// The normalisation described above (exposed for tests).
nlohmann::ordered_json normalize_chat_messages(const nlohmann::ordered_json& messages);

}  // namespace tessera::tokenizer
