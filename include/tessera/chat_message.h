// ChatMessage: one turn of a chat, the one struct for it from the HTTP request down to the chat
// template that renders it (tokenizer/chat_template.h). A new field (tool calls, a name) goes here.
#pragma once
#include <string>

namespace tessera {

struct ChatMessage {
  std::string role;     // "system" | "user" | "assistant" | ... (others are passed through or ignored)
  std::string content;  // UTF-8 text
};

}  // namespace tessera
