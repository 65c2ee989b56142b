// The agent APIs' shared flow (/v1/messages, /v1/responses): each parses its body into a
// Conversation and a GenerateSpec (parse adapter), then runs the generate handler's one flow
// (render + tokenize, in-flight limit, drain, submit, disconnect aborts, keep-alives; see
// generate_handler.cpp) and hands the answer to its ChatApiWriter (write adapter), which writes
// the AssistantOutput / OutputDeltas (conversation.h) in its API's own JSON and SSE shapes.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "server/conversation.h"
#include "server/http_exchange.h"
#include "server/protocol.h"

namespace tessera::server {

struct ServerState;

// A parsed agent-API request.
struct ChatApiRequest {
  GenerateSpec spec;          // kind kChat, n 1, spec.chat from the Conversation
  Conversation conversation;  // what spec.chat was written from (kept for the writers and tests)
  std::string model;          // as the client named it ("" = not given); echoed in the answer
  bool report_stop_sequence = false;  // the answer names the client stop sequence that ended it
};

// Writes one answer in an API's shape. One writer per request (streams keep state in it).
class ChatApiWriter {
 public:
  virtual ~ChatApiWriter() = default;
  // An error before or instead of the answer, in the API's error shape and status.
  virtual HttpResponse error(const ApiError& e) const = 0;
  // Prefix of tool-call ids ("toolu" / "call").
  virtual std::string call_id_prefix() const = 0;
  // Called once the request is submitted: id (unique, the API's prefix), prompt tokens.
  virtual void begin(const std::string& id_hex, int64_t created, const std::string& model, int64_t prompt_tokens) = 0;
  // Non-streaming: the body.
  virtual std::string body(const AssistantOutput& out) = 0;
  // Streaming: the events that open the stream, those for some deltas, the closing ones (out is the
  // whole answer, as body() would get it), and an error once the stream has begun.
  virtual std::string stream_start() = 0;
  virtual std::string stream_deltas(const std::vector<OutputDelta>& deltas) = 0;
  virtual std::string stream_end(const AssistantOutput& out) = 0;
  virtual std::string stream_error(const ApiError& e) = 0;
  // After keep_alive_interval_ms of silence.
  virtual std::string keep_alive() { return ": keep-alive\n\n"; }
};

// "event: NAME\ndata: JSON\n\n" (the named-event SSE both agent APIs use).
std::string sse_named_event(const std::string& name, const nlohmann::ordered_json& data);

// Runs a parsed request through the generate flow and writes its answer with `writer`.
void run_chat_api(ServerState& state, ChatApiRequest request, ChatApiWriter& writer, const HttpRequest& req,
                  Responder& out);
// Renders and tokenizes the request as run_chat_api would: the prompt's token count, or the error.
std::optional<ApiError> count_chat_api_tokens(ServerState& state, ChatApiRequest& request, int64_t* num_tokens);

}  // namespace tessera::server
