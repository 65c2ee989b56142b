// Chat templates without a Jinja interpreter: the template source (tokenizer.chat_template) is
// recognised by distinctive markers and its family is rendered in C++. Each family's output is
// checked byte for byte against jinja2 renderings of the real template (tests/data/chat_templates,
// scripts/gen_chat_template_goldens.py).
//
//   marker in the source                    family       notes
//   <|im_start|>                            kChatMl      default system prompt taken from the
//                                                        source (SmolLM2, Qwen) when present
//   <|start_header_id|>                     kLlama3      Llama-3.0 layout (no date/tools header)
//   <start_of_turn>                         kGemma       assistant -> model; system is an error
//   <|user|> and <|end|>                    kPhi3        eos_token after the last turn w/o prompt
//   [INST] and <<SYS>>                      kLlama2      system folded into the first user turn
//   [INST] with " [/INST]"                  kMistralV1   system is an error
//   [INST] otherwise                        kMistralV3   system prepended to the last user turn
//   anything else (or an empty source)      kChatMl      used_fallback = true, logged as a warning
//
// Errors (ErrorCode::kInvalidArgument) where the real template raises: roles that do not
// alternate user/assistant, unsupported system messages. Trimming (Jinja's trim / .strip())
// removes ASCII whitespace only.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "tessera/chat_message.h"
#include "util/status.h"

namespace tessera::tokenizer {

using ::tessera::ChatMessage;  // include/tessera/chat_message.h

enum class ChatTemplateFamily { kChatMl, kLlama2, kLlama3, kMistralV1, kMistralV3, kGemma, kPhi3 };
std::string_view chat_template_family_name(ChatTemplateFamily family);

struct DetectedTemplate {
  ChatTemplateFamily family = ChatTemplateFamily::kChatMl;
  bool used_fallback = false;          // the source matched no family
  std::string default_system_prompt;   // ChatML: injected when messages[0] is not "system"
};
DetectedTemplate detect_chat_template(std::string_view template_source);

struct RenderedChat {
  std::string text;                    // the prompt, special-token markup included
  ChatTemplateFamily family = ChatTemplateFamily::kChatMl;
  bool used_fallback = false;          // rendered as ChatML because the source was not recognised
};
Result<RenderedChat> render_chat(std::string_view template_source,
                                 const std::vector<ChatMessage>& messages,
                                 bool add_generation_prompt, std::string_view bos_token,
                                 std::string_view eos_token);

// render_chat's text; a fallback to ChatML is logged as a warning (not an error).
Result<std::string> apply_chat_template(std::string_view template_source,
                                        const std::vector<ChatMessage>& messages,
                                        bool add_generation_prompt, std::string_view bos_token,
                                        std::string_view eos_token);

}  // namespace tessera::tokenizer
