// libFuzzer over the agent APIs' parse adapters (server/anthropic_parse.cpp, responses_parse.cpp):
// any body must end in a Conversation or a 400 ApiError (never a crash, a sanitizer report or an
// exception), and what a parse accepts must be well formed: the template input it writes is a
// JSON array of messages, the tools a JSON array, a grammar schema JSON.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/anthropic_api.h"
#include "server/responses_api.h"

namespace {

using tessera::server::ChatApiRequest;

void check_accepted(const ChatApiRequest& r) {
  const auto messages = nlohmann::json::parse(r.spec.chat.messages_json, nullptr, false);
  if (!messages.is_array()) std::abort();
  if (!r.spec.chat.tools_json.empty() && !nlohmann::json::parse(r.spec.chat.tools_json, nullptr, false).is_array()) std::abort();
  if (!r.spec.params.structured.text.empty() && nlohmann::json::parse(r.spec.params.structured.text, nullptr, false).is_discarded()) {
    std::abort();
  }
  if (r.spec.chat.tool_names.size() > r.conversation.tools.size()) std::abort();
}

void check_error(const tessera::server::ApiError& e) {
  if (tessera::server::http_status(e.type) != 400 || e.message.empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const tessera::server::ProtocolLimits limits;
  for (bool max_tokens_required : {true, false}) {
    ChatApiRequest r;
    if (auto e = tessera::server::parse_anthropic_request(body, limits, max_tokens_required, &r)) {
      check_error(*e);
    } else {
      check_accepted(r);
    }
  }
  ChatApiRequest r;
  nlohmann::ordered_json echo;
  if (auto e = tessera::server::parse_responses_request(body, limits, &r, &echo)) {
    check_error(*e);
  } else {
    check_accepted(r);
  }
  return 0;
}
