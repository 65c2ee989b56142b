// POST /v1/messages and /v1/messages/count_tokens (Anthropic Messages, anthropic-version
// 2023-06-01): the parse adapter (body -> Conversation + GenerateSpec, anthropic_parse.cpp) and the
// write adapter (AssistantOutput / OutputDeltas -> a message, or its SSE events; anthropic_write.cpp).
//
// Request fields read: model (any id: the one served model answers, see README "Agents and SDKs"),
// max_tokens (required), system (string | text blocks), messages (user/assistant, and system
// messages between turns, which Claude Code sends, hoisted into the system prompt; content a string
// or blocks: text, tool_use, tool_result with string or text-block content, thinking,
// redacted_thinking), tools (name, description, input_schema; server tools, which carry a `type`
// and no input_schema, are dropped), tool_choice (auto | any | tool + name | none,
// disable_parallel_tool_use), stop_sequences, stream, temperature (0..1), top_p, top_k, thinking
// ({"type": "enabled" | "disabled" | "adaptive"} -> the template's enable_thinking).
// Accepted and ignored: metadata, cache_control and citations on blocks, is_error on tool results,
// context_management, output_config, service_tier, container, mcp_servers, and any other top-level
// field (Claude Code adds fields release by release; refusing one would break it).
// Refused with 400 invalid_request_error: a body that is not a JSON object, missing or bad
// max_tokens / messages, a role other than user/assistant/system, an unknown or image/document block, a
// tool_result whose tool_use_id no earlier tool_use has, a tool_choice naming an absent tool.
//
// Answer: {"id": "msg_<hex>", "type": "message", "role": "assistant", "model", "content":
// [thinking?, text?, tool_use*], "stop_reason": end_turn | max_tokens | stop_sequence | tool_use,
// "stop_sequence", "usage": {input_tokens, output_tokens, cache_read_input_tokens,
// cache_creation_input_tokens}}. Anthropic's input_tokens counts the prompt tokens NOT read from the
// cache (input_tokens + cache_read_input_tokens = the whole prompt, what count_tokens gives).
#pragma once
#include <string>
#include <string_view>

#include "server/chat_api.h"

namespace tessera::server {

// max_tokens_required: false for count_tokens (its body has none).
// `defaults`: the sampling knobs the body omits (the server passes the model's recommended
// sampling, ModelInfo::default_sampling).
std::optional<ApiError> parse_anthropic_request(std::string_view body, const ProtocolLimits& limits,
                                                bool max_tokens_required, ChatApiRequest* out,
                                                const SamplingParams& defaults = SamplingParams{});

class AnthropicWriter : public ChatApiWriter {
 public:
  HttpResponse error(const ApiError& e) const override;
  std::string call_id_prefix() const override { return "toolu"; }
  void begin(const std::string& id_hex, int64_t created, const std::string& model, int64_t prompt_tokens) override;
  std::string body(const AssistantOutput& out) override;
  std::string stream_start() override;
  std::string stream_deltas(const std::vector<OutputDelta>& deltas) override;
  std::string stream_end(const AssistantOutput& out) override;
  std::string stream_error(const ApiError& e) override;
  std::string keep_alive() override;

  // The message JSON (also what tests compare).
  nlohmann::ordered_json message_json(const AssistantOutput& out) const;

 private:
  std::string close_block();
  std::string id_, model_;
  int64_t prompt_tokens_ = 0;
  int32_t block_index_ = -1;         // the open content block, -1 = none yet
  OutputDelta::Kind open_kind_ = OutputDelta::Kind::kText;
  bool block_open_ = false;
};

}  // namespace tessera::server
