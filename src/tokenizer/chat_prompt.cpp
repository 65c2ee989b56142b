// Chat prompts with the request's text kept out of the special tokens (see chat_prompt.h).
#include "tokenizer/chat_prompt.h"

namespace tessera::tokenizer {

namespace {

using ojson = nlohmann::ordered_json;

ojson escape_json(const ojson& value, const Tokenizer& tokenizer) {
  if (value.is_string()) return tokenizer.escape_special(value.get_ref<const std::string&>());
  if (value.is_array()) {
    ojson out = ojson::array();
    for (const ojson& item : value) out.push_back(escape_json(item, tokenizer));
    return out;
  }
  if (value.is_object()) {
    ojson out = ojson::object();
    for (const auto& [key, item] : value.items()) out[tokenizer.escape_special(key)] = escape_json(item, tokenizer);
    return out;
  }
  return value;
}

}  // namespace

namespace {

// The escaped rendering; a template's error message (raise_exception may quote the request) unescaped.
Result<std::string> render_escaped(const ChatRenderer& renderer, const Tokenizer& tokenizer,
                                   const ChatRenderInput& input) {
  Result<std::string> escaped = renderer.render(escape_chat_input(input, tokenizer));
  if (escaped.ok()) return escaped;
  Error error = escaped.error();
  error.message = tokenizer.unescape_special(error.message);
  return error;
}

}  // namespace

ChatRenderInput escape_chat_input(const ChatRenderInput& input, const Tokenizer& tokenizer) {
  ChatRenderInput out;
  out.messages = escape_json(input.messages, tokenizer);
  out.tools = escape_json(input.tools, tokenizer);
  out.kwargs = escape_json(input.kwargs, tokenizer);
  out.add_generation_prompt = input.add_generation_prompt;
  return out;
}

Result<ChatPrompt> render_chat_prompt(const ChatRenderer& renderer, const Tokenizer& tokenizer,
                                      const ChatRenderInput& input, bool add_bos) {
  Result<std::string> escaped = render_escaped(renderer, tokenizer, input);
  if (!escaped.ok()) return escaped.error();
  ChatPrompt prompt;
  prompt.ids = tokenizer.encode_escaped(*escaped, add_bos);
  const int32_t bos = tokenizer.bos_id();
  if (add_bos && prompt.ids.size() >= 2 && prompt.ids[0] == bos && prompt.ids[1] == bos) {
    prompt.ids.erase(prompt.ids.begin());
  }
  prompt.text = tokenizer.unescape_special(*escaped);
  return prompt;
}

}  // namespace tessera::tokenizer
