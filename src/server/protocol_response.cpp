#include "server/protocol_response.h"

#include <fmt/format.h>

#include "server/chat_output.h"

namespace tessera::server {
namespace {

using json = nlohmann::json;

// A token as logprobs show it: its text when that is valid UTF-8, else OpenAI's form bytes:\xe2\x80
// (backslash, x, two hex digits per byte) for a piece that splits a character. Before, every such
// piece became U+FFFD and distinct tokens collided as keys of top_logprobs.
std::string token_display(const std::string& piece) {
  if (is_valid_utf8(piece)) return piece;
  std::string out = "bytes:";
  for (char c : piece) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
  return out;
}

// Completions logprobs object (legacy format) for a run of tokens. top_logprobs maps each token's
// display text to its logprob: the chosen token's entry is written first, and an alternative never
// replaces an entry already there (two ids with the same text: the first, most likely one stays).
json completion_logprobs(const std::vector<int32_t>& ids, const std::vector<TokenLogprob>& lps,
                         const std::vector<std::vector<TokenLogprob>>& tops, size_t offset_base,
                         const TokenTextFn& token_text) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  size_t offset = offset_base;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string text = token_text(ids[i]);
    const std::string shown = token_display(text);
    tokens.push_back(shown);
    token_logprobs.push_back(i < lps.size() ? json(lps[i].logprob) : json(nullptr));
    json alternatives = json::object();
    if (i < tops.size()) {
      for (const TokenLogprob& t : tops[i]) {
        if (t.token_id == ids[i]) alternatives[shown] = t.logprob;
      }
      for (const TokenLogprob& t : tops[i]) {
        const std::string key = token_display(token_text(t.token_id));
        if (!alternatives.contains(key)) alternatives[key] = t.logprob;
      }
    }
    top.push_back(std::move(alternatives));
    offsets.push_back(offset);
    offset += text.size();
  }
  return json{{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top},
              {"text_offset", offsets}};
}

json token_bytes(const std::string& text) {
  json bytes = json::array();
  for (char c : text) bytes.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return bytes;
}

// Chat logprobs object: {"content": [{token, logprob, bytes, top_logprobs: [...]}]}.
json chat_logprobs(const std::vector<int32_t>& ids, const std::vector<TokenLogprob>& lps,
                   const std::vector<std::vector<TokenLogprob>>& tops, const TokenTextFn& token_text) {
  json content = json::array();
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string text = token_text(ids[i]);
    json top = json::array();
    if (i < tops.size()) {
      for (const TokenLogprob& t : tops[i]) {
        const std::string alt = token_text(t.token_id);
        top.push_back({{"token", token_display(alt)}, {"logprob", t.logprob}, {"bytes", token_bytes(alt)}});
      }
    }
    content.push_back({{"token", token_display(text)},
                       {"logprob", i < lps.size() ? lps[i].logprob : 0.0f},
                       {"bytes", token_bytes(text)},
                       {"top_logprobs", std::move(top)}});
  }
  return json{{"content", std::move(content)}};
}

json base_object(const ResponseMeta& meta, const char* object) {
  return json{{"id", meta.id}, {"object", object}, {"created", meta.created}, {"model", meta.model}};
}

}  // namespace

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse_event(const std::string& payload) { return "data: " + payload + "\n\n"; }

json finish_reason_json(FinishReason reason) {
  if (reason == FinishReason::kNone) return nullptr;
  // Abort and error never reach a successful body (they become errors); OpenAI has no name for
  // them, so they map defensively to "stop". The names are finish_reason_name's.
  if (reason == FinishReason::kAbort || reason == FinishReason::kError) return finish_reason_name(FinishReason::kStop);
  return finish_reason_name(reason);
}

void apply_event(const RequestOutput& event, ChoiceState* choice) {
  choice->text += event.text_delta;
  choice->token_ids.insert(choice->token_ids.end(), event.token_ids.begin(), event.token_ids.end());
  choice->logprobs.insert(choice->logprobs.end(), event.logprobs.begin(), event.logprobs.end());
  choice->top_logprobs.insert(choice->top_logprobs.end(), event.top_logprobs.begin(),
                              event.top_logprobs.end());
  choice->num_output_tokens = event.num_output_tokens;
  if (event.finish_reason != FinishReason::kNone) {
    choice->finish_reason = event.finish_reason;
    choice->error = event.error;
  }
}

json usage_json(const UsageCounts& usage) {
  return json{{"prompt_tokens", usage.prompt_tokens},
              {"completion_tokens", usage.completion_tokens},
              {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
}

std::string completion_response(const ResponseMeta& meta, const std::vector<ChoiceState>& choices,
                                const UsageCounts& usage, const GenerateSpec& spec,
                                const TokenTextFn& token_text) {
  json body = base_object(meta, "text_completion");
  json list = json::array();
  for (const ChoiceState& c : choices) {
    json logprobs = nullptr;
    if (spec.return_logprobs) {
      logprobs = completion_logprobs(c.token_ids, c.logprobs, c.top_logprobs, c.prefix.size(), token_text);
    }
    list.push_back({{"index", c.index},
                    {"text", c.prefix + c.text},
                    {"logprobs", std::move(logprobs)},
                    {"finish_reason", finish_reason_json(c.finish_reason)}});
  }
  body["choices"] = std::move(list);
  body["usage"] = usage_json(usage);
  return dump_json(body);
}

std::string chat_response(const ResponseMeta& meta, const std::vector<ChoiceState>& choices,
                          const UsageCounts& usage, const GenerateSpec& spec,
                          const TokenTextFn& token_text, const ChatShaping* shaping) {
  json body = base_object(meta, "chat.completion");
  json list = json::array();
  for (const ChoiceState& c : choices) {
    json logprobs = nullptr;
    if (spec.return_logprobs) logprobs = chat_logprobs(c.token_ids, c.logprobs, c.top_logprobs, token_text);
    json message = {{"role", "assistant"}, {"content", c.text}};
    json finish = finish_reason_json(c.finish_reason);
    if (shaping != nullptr && shaping->active()) {
      bool made_calls = false;
      message = chat_message(c.text, *shaping, c.index, &made_calls);
      if (made_calls) finish = "tool_calls";
    }
    list.push_back({{"index", c.index},
                    {"message", std::move(message)},
                    {"logprobs", std::move(logprobs)},
                    {"finish_reason", std::move(finish)}});
  }
  body["choices"] = std::move(list);
  body["usage"] = usage_json(usage);
  return dump_json(body);
}

std::string completion_chunk(const ResponseMeta& meta, const GenerateSpec& spec, int32_t index,
                             const std::string& text, const RequestOutput* event,
                             size_t text_offset_base, const TokenTextFn& token_text) {
  json body = base_object(meta, "text_completion");
  json logprobs = nullptr;
  if (spec.return_logprobs && event != nullptr) {
    logprobs = completion_logprobs(event->token_ids, event->logprobs, event->top_logprobs,
                                   text_offset_base, token_text);
  }
  const FinishReason finish = event != nullptr ? event->finish_reason : FinishReason::kNone;
  body["choices"] = json::array({json{{"index", index},
                                      {"text", text},
                                      {"logprobs", std::move(logprobs)},
                                      {"finish_reason", finish_reason_json(finish)}}});
  if (spec.include_usage) body["usage"] = nullptr;
  return dump_json(body);
}

std::string chat_chunk(const ResponseMeta& meta, const GenerateSpec& spec, int32_t index,
                       const json& delta, const RequestOutput* event, const TokenTextFn& token_text) {
  json body = base_object(meta, "chat.completion.chunk");
  json logprobs = nullptr;
  if (spec.return_logprobs && event != nullptr) {
    logprobs = chat_logprobs(event->token_ids, event->logprobs, event->top_logprobs, token_text);
  }
  const FinishReason finish = event != nullptr ? event->finish_reason : FinishReason::kNone;
  body["choices"] = json::array({json{{"index", index},
                                      {"delta", delta},
                                      {"logprobs", std::move(logprobs)},
                                      {"finish_reason", finish_reason_json(finish)}}});
  if (spec.include_usage) body["usage"] = nullptr;
  return dump_json(body);
}

std::string usage_chunk(const ResponseMeta& meta, const GenerateSpec& spec, const UsageCounts& usage) {
  json body = base_object(meta, spec.kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion");
  body["choices"] = json::array();
  body["usage"] = usage_json(usage);
  return dump_json(body);
}

}  // namespace tessera::server
