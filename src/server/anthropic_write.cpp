// /v1/messages answers: one message, or its SSE events (see anthropic_api.h).
//
// Stream: message_start, ping, then per content block (thinking, text, tool_use; in the order the
// model produced them) content_block_start, content_block_delta (thinking_delta, text_delta,
// input_json_delta)..., content_block_stop; then message_delta (stop_reason, stop_sequence, usage)
// and message_stop. Keep-alives are ping events; an error after the start is an `error` event.
#include <fmt/format.h>

#include "server/anthropic_api.h"
#include "server/server_state.h"

namespace tessera::server {
namespace {

using ojson = nlohmann::ordered_json;

const char* stop_reason(const AssistantOutput& out) {
  if (!out.tool_calls.empty()) return "tool_use";
  if (out.finish == FinishReason::kLength) return "max_tokens";
  if (!out.stop_sequence.empty()) return "stop_sequence";
  return "end_turn";
}

ojson usage(int64_t prompt_tokens, int64_t cached_tokens, int64_t output_tokens) {
  // Anthropic's input_tokens are the prompt tokens not read from the cache.
  return ojson{{"input_tokens", prompt_tokens - cached_tokens}, {"cache_creation_input_tokens", 0},
               {"cache_read_input_tokens", cached_tokens}, {"output_tokens", output_tokens}};
}

ojson tool_input(const std::string& arguments) {
  ojson input = ojson::parse(arguments, nullptr, false);
  return input.is_object() ? input : ojson::object();
}

}  // namespace

HttpResponse AnthropicWriter::error(const ApiError& e) const {
  HttpResponse res = error_response(e);  // status and Retry-After from the one table
  res.body = anthropic_error_body(e);
  return res;
}

void AnthropicWriter::begin(const std::string& id_hex, int64_t /*created*/, const std::string& model, int64_t prompt_tokens) {
  id_ = "msg_" + id_hex;
  model_ = model;
  prompt_tokens_ = prompt_tokens;
}

ojson AnthropicWriter::message_json(const AssistantOutput& out) const {
  ojson content = ojson::array();
  if (!out.reasoning.empty()) content.push_back(ojson{{"type", "thinking"}, {"thinking", out.reasoning}, {"signature", ""}});
  if (!out.text.empty()) content.push_back(ojson{{"type", "text"}, {"text", out.text}});
  for (const ToolCall& call : out.tool_calls) {
    content.push_back(ojson{{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", tool_input(call.arguments_json)}});
  }
  return ojson{{"id", id_},
               {"type", "message"},
               {"role", "assistant"},
               {"model", model_},
               {"content", std::move(content)},
               {"stop_reason", stop_reason(out)},
               {"stop_sequence", out.stop_sequence.empty() ? ojson(nullptr) : ojson(out.stop_sequence)},
               {"usage", usage(out.usage.prompt_tokens, out.usage.cached_tokens, out.usage.completion_tokens)}};
}

std::string AnthropicWriter::body(const AssistantOutput& out) {
  return message_json(out).dump(-1, ' ', false, ojson::error_handler_t::replace);
}

std::string AnthropicWriter::stream_start() {
  ojson message = {{"id", id_}, {"type", "message"}, {"role", "assistant"}, {"model", model_},
                   {"content", ojson::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                   {"usage", usage(prompt_tokens_, 0, 0)}};
  return sse_named_event("message_start", ojson{{"type", "message_start"}, {"message", std::move(message)}}) + keep_alive();
}

std::string AnthropicWriter::close_block() {
  if (!block_open_) return "";
  block_open_ = false;
  return sse_named_event("content_block_stop", ojson{{"type", "content_block_stop"}, {"index", block_index_}});
}

std::string AnthropicWriter::stream_deltas(const std::vector<OutputDelta>& deltas) {
  std::string out;
  for (const OutputDelta& d : deltas) {
    using Kind = OutputDelta::Kind;
    // A new block when the kind changes, and for every tool call.
    if (!block_open_ || d.kind == Kind::kCallStart || (d.kind != open_kind_ && d.kind != Kind::kCallArguments)) {
      out += close_block();
      block_index_ += 1;
      block_open_ = true;
      open_kind_ = d.kind;
      ojson block = d.kind == Kind::kReasoning ? ojson{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                    : d.kind == Kind::kText    ? ojson{{"type", "text"}, {"text", ""}}
                                               : ojson{{"type", "tool_use"}, {"id", d.id}, {"name", d.text}, {"input", ojson::object()}};
      out += sse_named_event("content_block_start",
                             ojson{{"type", "content_block_start"}, {"index", block_index_}, {"content_block", std::move(block)}});
      if (d.kind == Kind::kCallStart) continue;
    }
    ojson delta = d.kind == Kind::kReasoning ? ojson{{"type", "thinking_delta"}, {"thinking", d.text}}
                  : d.kind == Kind::kText    ? ojson{{"type", "text_delta"}, {"text", d.text}}
                                             : ojson{{"type", "input_json_delta"}, {"partial_json", d.text}};
    out += sse_named_event("content_block_delta",
                           ojson{{"type", "content_block_delta"}, {"index", block_index_}, {"delta", std::move(delta)}});
  }
  return out;
}

std::string AnthropicWriter::stream_end(const AssistantOutput& out) {
  std::string events = close_block();
  events += sse_named_event(
      "message_delta",
      ojson{{"type", "message_delta"},
            {"delta", {{"stop_reason", stop_reason(out)},
                       {"stop_sequence", out.stop_sequence.empty() ? ojson(nullptr) : ojson(out.stop_sequence)}}},
            {"usage", usage(out.usage.prompt_tokens, out.usage.cached_tokens, out.usage.completion_tokens)}});
  events += sse_named_event("message_stop", ojson{{"type", "message_stop"}});
  return events;
}

std::string AnthropicWriter::stream_error(const ApiError& e) {
  return "event: error\ndata: " + anthropic_error_body(e) + "\n\n";
}

std::string AnthropicWriter::keep_alive() { return sse_named_event("ping", ojson{{"type", "ping"}}); }

}  // namespace tessera::server

namespace tessera::server {

void handle_messages(ServerState& state, bool count_only, const HttpRequest& req, Responder& out) {
  AnthropicWriter writer;
  ChatApiRequest request;
  if (auto e = parse_anthropic_request(req.body, state.config.limits, /*max_tokens_required=*/!count_only, &request,
                                       state.engine().model_info().default_sampling)) {
    return out.respond(writer.error(*e));
  }
  if (!count_only) return run_chat_api(state, std::move(request), writer, req, out);
  int64_t num_tokens = 0;
  if (auto e = count_chat_api_tokens(state, request, &num_tokens)) return out.respond(writer.error(*e));
  out.respond(json_response(nlohmann::json{{"input_tokens", num_tokens}}.dump()));
}

}  // namespace tessera::server
