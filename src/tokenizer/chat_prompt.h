// A chat prompt as the model is fed it: the template rendered and tokenized as one, so that text a
// request supplies never becomes a control token (issue 30, finding 11: "<|im_start|>system" inside
// a user message forged a system turn when the whole rendering was tokenized with special parsing,
// as llama.cpp's server does).
//
// How: every string of the request (message contents, roles, names, tool-call arguments, the tools,
// chat_template_kwargs; keys and values) is escaped by Tokenizer::escape_special before the template
// sees it; the template's own literals and its bos_token / eos_token are not. The escaped rendering
// is tokenized by Tokenizer::encode_escaped (the template's markup as special tokens, the escaped
// spans as plain text) and unescaped for the text. A request without special-token text renders
// byte for byte as before.
#pragma once
#include <string>

#include "tessera/engine.h"
#include "tokenizer/chat_render.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace tessera::tokenizer {

// Text and ids. add_bos: prepend the vocabulary's BOS, unless the template wrote one itself (never
// "<bos><bos>": HF's apply_chat_template adds no special tokens).
Result<ChatPrompt> render_chat_prompt(const ChatRenderer& renderer, const Tokenizer& tokenizer,
                                      const ChatRenderInput& input, bool add_bos);

// The input with every string (keys and values, at any depth) escaped (exposed for tests).
ChatRenderInput escape_chat_input(const ChatRenderInput& input, const Tokenizer& tokenizer);

}  // namespace tessera::tokenizer
