// OpenAI protocol, response side: accumulated choices -> response JSON, and engine events ->
// SSE chunks. Plain functions over plain data; token texts for logprobs come through a callback
// so this file needs no engine.
//
// Choice numbering (OpenAI): choice index = prompt_index * n + sample_index.
// Streams end with "data: [DONE]"; with stream_options.include_usage every chunk carries
// "usage": null and one last chunk with "choices": [] carries the usage.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/protocol.h"
#include "tessera/engine.h"

namespace tessera::server {

struct ChatShaping;

using TokenTextFn = std::function<std::string(int32_t)>;  // one token id -> its text

// One choice, accumulated from its events.
struct ChoiceState {
  int32_t index = 0;                                  // OpenAI choice index
  std::string prefix;                                 // echo: the prompt text
  std::string text;                                   // generated text so far
  std::vector<int32_t> token_ids;                     // [num_output_tokens]
  std::vector<TokenLogprob> logprobs;                 // [num_output_tokens] when requested
  std::vector<std::vector<TokenLogprob>> top_logprobs;  // [num_output_tokens][k] when requested
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;                                  // engine message for kError
  int32_t num_output_tokens = 0;
};

struct UsageCounts {
  int64_t prompt_tokens = 0;       // summed over prompts (not samples)
  int64_t completion_tokens = 0;   // summed over every choice
  int64_t cached_tokens = 0;       // prompt tokens served from the prefix cache
};

// Identity of one response: shared by all its chunks.
struct ResponseMeta {
  std::string id;      // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0; // unix seconds
  std::string model;   // served model name
};

// Applies one engine event to its choice (text, tokens, logprobs, finish, counts).
void apply_event(const RequestOutput& event, ChoiceState* choice);

nlohmann::json usage_json(const UsageCounts& usage);

// Full (non-streaming) bodies.
std::string completion_response(const ResponseMeta& meta, const std::vector<ChoiceState>& choices,
                                 const UsageCounts& usage, const GenerateSpec& spec,
                                 const TokenTextFn& token_text);
// shaping (may be null): reasoning/tool-call shaping of each message (chat_output.h).
std::string chat_response(const ResponseMeta& meta, const std::vector<ChoiceState>& choices,
                          const UsageCounts& usage, const GenerateSpec& spec,
                          const TokenTextFn& token_text,
                          const ChatShaping* shaping = nullptr);

// Streaming: the JSON of one chunk for one event of a choice (text_offset_base = bytes of this
// choice's text before the event, for completion logprobs).
std::string completion_chunk(const ResponseMeta& meta, const GenerateSpec& spec, int32_t index,
                             const std::string& text, const RequestOutput* event,
                             size_t text_offset_base, const TokenTextFn& token_text);
std::string chat_chunk(const ResponseMeta& meta, const GenerateSpec& spec, int32_t index,
                       const nlohmann::json& delta, const RequestOutput* event,
                       const TokenTextFn& token_text);
std::string usage_chunk(const ResponseMeta& meta, const GenerateSpec& spec, const UsageCounts& usage);

// "data: <payload>\n\n"
std::string sse_event(const std::string& payload);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

// JSON dump that never throws on bad UTF-8 (replaces it).
std::string dump_json(const nlohmann::json& j);

// OpenAI finish_reason for a finished choice ("stop" / "length"); null while running.
nlohmann::json finish_reason_json(FinishReason reason);

}  // namespace tessera::server
