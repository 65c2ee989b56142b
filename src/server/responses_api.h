// POST /v1/responses (OpenAI Responses): the parse adapter (body -> Conversation +
// GenerateSpec, responses_parse.cpp) and the write adapter (AssistantOutput / OutputDeltas -> a
// response object, or its SSE events; responses_write.cpp).
//
// Request fields read: model (any id: the one served model answers), input (a string, or a list of
// items: messages {role user|assistant|system|developer, content a string or input_text /
// output_text parts}, function_call {call_id, name, arguments}, function_call_output {call_id,
// output}, reasoning {summary, content}), instructions, tools (function tools, the flat shape
// {type, name, description, parameters, strict}; hosted tools such as web_search are dropped),
// tool_choice (auto | none | required | {type: function, name}), parallel_tool_calls,
// max_output_tokens, temperature, top_p, text.format (text | json_object | json_schema, through the
// grammar engine), stream.
// previous_response_id continues a stored answer: its conversation (input items + output items)
// goes before this request's input (this request's instructions apply, as OpenAI's do). Answers are
// stored unless "store": false (Codex sends false and the whole input each turn): in memory, at most
// kMaxStoredResponses, least recently used out first (responses_store.h); GET / DELETE
// /v1/responses/{id} read and remove them. An unknown previous_response_id is a 404.
// Accepted and ignored: reasoning, metadata, include, truncation, user, service_tier,
// prompt_cache_key, safety_identifier, top_logprobs, stream_options, text.verbosity, and any other
// top-level field.
// Refused with 400 (OpenAI's error shape): background true, items or parts of other types (images,
// files), a function_call_output whose call_id no earlier function_call has, bad types and ranges.
#pragma once
#include <string>
#include <string_view>

#include "server/chat_api.h"

namespace tessera::server {

// *echo receives the request's parameters as a response object repeats them (instructions, tools,
// tool_choice, text, temperature, ...).
// `defaults`: the sampling knobs the body omits (the model's recommended sampling).
std::optional<ApiError> parse_responses_request(std::string_view body, const ProtocolLimits& limits, ChatApiRequest* out,
                                                nlohmann::ordered_json* echo,
                                                const SamplingParams& defaults = SamplingParams{});

class ResponsesWriter : public ChatApiWriter {
 public:
  explicit ResponsesWriter(nlohmann::ordered_json echo) : echo_(std::move(echo)) {}
  HttpResponse error(const ApiError& e) const override { return error_response(e); }
  std::string call_id_prefix() const override { return "call"; }
  void begin(const std::string& id_hex, int64_t created, const std::string& model, int64_t prompt_tokens) override;
  std::string body(const AssistantOutput& out) override;
  std::string stream_start() override;
  std::string stream_deltas(const std::vector<OutputDelta>& deltas) override;
  std::string stream_end(const AssistantOutput& out) override;
  std::string stream_error(const ApiError& e) override;

  // The response object (status "in_progress" with no output when out is null).
  nlohmann::ordered_json response_json(const AssistantOutput* out) const;
  // The final response object once body() or stream_end() wrote it (what is stored).
  std::optional<nlohmann::ordered_json> final_response;

 private:
  std::string event(const char* type, nlohmann::ordered_json data);
  std::string close_item();
  nlohmann::ordered_json open_item_json(const char* status) const;
  nlohmann::ordered_json echo_;
  std::string hex_, model_;
  int64_t created_ = 0;
  int64_t sequence_ = 0;
  // The streamed item that is open: its kind, output index, id and text so far.
  bool item_open_ = false;
  OutputDelta::Kind item_kind_ = OutputDelta::Kind::kText;
  int32_t output_index_ = -1;
  std::string item_id_, item_text_, call_id_, call_name_;
};

}  // namespace tessera::server
