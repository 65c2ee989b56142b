// OpenAI protocol, request side: JSON body -> GenerateSpec (plain data), every field validated.
// Parsing needs no engine: tokenization and context checks happen afterwards in the handler
// (generate_handler.cpp), so everything here is unit-tested without a model.
//
// Rules (the same for /v1/completions and /v1/chat/completions unless noted):
//   - the body must be valid UTF-8, valid JSON, an object, nested at most kMaxJsonDepth deep;
//   - a field set to null is treated as absent (the openai client omits unset fields);
//   - unknown fields are refused ("Unrecognized request argument supplied: x"), as OpenAI does;
//   - known fields the engine cannot honor (logit_bias, suffix, tools, ...) are refused unless
//     they carry their neutral value: 400 invalid_request_error naming the parameter (a 5xx would
//     make clients retry a request that can never succeed);
//   - a number that does not fit a double (1e400) is a 400 naming its field;
//   - min_tokens must not exceed max_tokens.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/api_error.h"
#include "server/chat_tools_parse.h"
#include "tessera/engine.h"
#include "tessera/sampling_params.h"

namespace tessera::server {

constexpr int kMaxJsonDepth = 32;

enum class ApiKind { kCompletion, kChat };

// One prompt of a completion request: text, or token ids given by the client.
struct PromptInput {
  bool is_ids = false;
  std::string text;            // when !is_ids
  std::vector<int32_t> ids;    // when is_ids; [num_tokens], range-checked later against vocab
};

struct ProtocolLimits {
  int32_t max_n = 16;            // samples per prompt
  int32_t max_prompts = 64;      // prompts in one completion request (list form)
  int32_t max_stop = 16;         // stop strings
  int32_t max_stop_len = 256;    // bytes per stop string
  int32_t max_logprobs = 20;     // top logprobs per token
  int32_t max_tokens = 1 << 20;  // absolute cap on max_tokens before the context check
  int32_t max_messages = 1024;   // chat messages
};

struct GenerateSpec {
  ApiKind kind = ApiKind::kCompletion;
  std::string model;                    // "" = not given (the served model)
  std::vector<PromptInput> prompts;     // completions: >= 1 prompts; chat: empty
  std::vector<ChatMessage> messages;    // chat: >= 1 messages
  SamplingParams params;                // params.logprobs set when logprobs are requested
  bool max_tokens_given = false;        // else the handler picks the default
  bool clamp_max_tokens = false;        // a max_tokens past the context's room is cut to it (the
                                        // agent APIs: Claude Code asks for its model's 32k-128k)
  bool stream = false;
  bool include_usage = false;           // stream_options.include_usage
  bool echo = false;                    // completions: prompt text precedes the output
  bool return_logprobs = false;         // completions: logprobs != null; chat: logprobs == true
  int32_t num_top_logprobs = 0;         // alternatives per token (0 = only the chosen one)
  std::string cache_salt;               // prefix-cache isolation key
  std::string lora_name;                // the LoRA adapter `model` named ("" = the base model; lora_routes.h)
  ChatToolSpec chat;                    // chat: messages/tools JSON for the template, tool choice
};

// True when `bytes` is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF). On failure
// `bad_offset` (if given) receives the offset of the first bad byte.
bool is_valid_utf8(std::string_view bytes, size_t* bad_offset = nullptr);

// Parses and validates a generate request body. On success fills *out and returns nullopt.
// `defaults`: what the sampling knobs the body omits take (the server passes the model's
// recommended sampling, ModelInfo::default_sampling; SamplingParams{} is OpenAI's temperature 1).
std::optional<ApiError> parse_generate_request(ApiKind kind, std::string_view body,
                                               const ProtocolLimits& limits, GenerateSpec* out,
                                               const SamplingParams& defaults = SamplingParams{});

// 400 naming min_tokens when it exceeds max_tokens (a request that could never finish as asked).
std::optional<ApiError> check_min_tokens(const GenerateSpec& spec);

// /tokenize and /detokenize bodies.
struct TokenizeSpec {
  std::string model;
  std::string prompt;                 // when messages is empty
  std::vector<ChatMessage> messages;  // chat form: rendered with the chat template
  bool add_special_tokens = true;     // BOS as the model wants it
};
std::optional<ApiError> parse_tokenize_request(std::string_view body, const ProtocolLimits& limits,
                                               TokenizeSpec* out);
struct DetokenizeSpec {
  std::string model;
  std::vector<int32_t> tokens;
};
std::optional<ApiError> parse_detokenize_request(std::string_view body, DetokenizeSpec* out);

}  // namespace tessera::server
