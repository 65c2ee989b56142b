// ChatRenderer: Jinja first, the family table as the fallback (see chat_render.h).
#include "tokenizer/chat_render.h"

#include "jinja/template.h"
#include "tokenizer/chat_template.h"
#include "util/log.h"

namespace tessera::tokenizer {

using ojson = nlohmann::ordered_json;

ojson normalize_chat_messages(const ojson& messages) {
  ojson out = messages;
  if (!out.is_array()) return out;
  for (ojson& m : out) {
    if (!m.is_object()) continue;
    auto content = m.find("content");
    if (content != m.end() && content->is_array()) {
      std::string text;
      bool first = true;
      for (const ojson& part : *content) {
        if (!part.is_object() || !part.contains("text") || !part["text"].is_string()) continue;
        if (!first) text += "\n";
        text += part["text"].get<std::string>();
        first = false;
      }
      *content = text;
    }
    auto calls = m.find("tool_calls");
    if (calls == m.end() || !calls->is_array()) continue;
    for (ojson& call : *calls) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
      ojson& fn = call["function"];
      if (fn.contains("arguments") && fn["arguments"].is_string()) {
        ojson parsed = ojson::parse(fn["arguments"].get<std::string>(), nullptr, /*allow_exceptions=*/false);
        if (parsed.is_object()) fn["arguments"] = std::move(parsed);
      }
    }
  }
  return out;
}

ChatRenderer::ChatRenderer(std::string_view template_source, std::string bos_token, std::string eos_token,
                           std::string vocab_markers)
    : source_(template_source),
      family_source_(source_.empty() ? std::move(vocab_markers) : source_),
      bos_(std::move(bos_token)),
      eos_(std::move(eos_token)) {
  if (source_.empty()) {
    fallback_reason_ = "the model file has no tokenizer.chat_template";
    return;
  }
  auto parsed = jinja::Template::parse(source_);
  if (!parsed.ok()) {
    fallback_reason_ = "its chat template does not parse: " + parsed.error().message;
    TESSERA_LOG_WARN("chat template: {}; rendering with the built-in family table", fallback_reason_);
    return;
  }
  jinja_ = std::make_unique<jinja::Template>(std::move(parsed).value());
}

ChatRenderer::~ChatRenderer() = default;
ChatRenderer::ChatRenderer(ChatRenderer&&) noexcept = default;

Result<std::string> ChatRenderer::render(const ChatRenderInput& input) const {
  if (!input.messages.is_array()) return make_error(ErrorCode::kInvalidArgument, "chat template: messages must be a list");
  const ojson messages = normalize_chat_messages(input.messages);
  if (jinja_ == nullptr) {
    std::vector<ChatMessage> plain;
    for (const ojson& m : messages) {
      const ojson role = m.value("role", ojson()), content = m.value("content", ojson());
      plain.push_back({role.is_string() ? role.get<std::string>() : "",
                       content.is_string() ? content.get<std::string>() : ""});
    }
    return apply_chat_template(family_source_, plain, input.add_generation_prompt, bos_, eos_);
  }
  ojson context = ojson::object();
  context["messages"] = messages;
  if (!input.tools.is_null()) context["tools"] = input.tools;
  context["add_generation_prompt"] = input.add_generation_prompt;
  context["bos_token"] = bos_;
  context["eos_token"] = eos_;
  if (input.kwargs.is_object()) {
    for (const auto& [key, value] : input.kwargs.items()) {
      if (context.contains(key)) {
        return make_error(ErrorCode::kInvalidArgument, "chat_template_kwargs: '{}' is set by the server", key);
      }
      context[key] = value;
    }
  }
  const jinja::Value values = jinja::from_json(context);
  return jinja_->render(values.as_dict());
}

}  // namespace tessera::tokenizer
