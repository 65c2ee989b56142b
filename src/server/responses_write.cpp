// /v1/responses answers: one response object, or its SSE events (see responses_api.h).
//
// Output items, in this order: reasoning {id rs_<hex>, content [reasoning_text]}, message
// {id msg_<hex>, content [output_text]}, function_call {id fc_<hex>_<k>, call_id, name, arguments}.
// Stream: response.created, response.in_progress; per item output_item.added, (content_part.added,
// output_text.delta... | function_call_arguments.delta... | reasoning_text.delta...), the matching
// .done events, output_item.done; then response.completed (or response.incomplete when
// max_output_tokens ended it). Every event carries sequence_number (0, 1, ...).
#include <fmt/format.h>

#include "server/responses_api.h"
#include "server/server_state.h"

namespace tessera::server {

using ojson = nlohmann::ordered_json;

namespace {

ojson responses_usage(const UsageCounts& u) {
  return ojson{{"input_tokens", u.prompt_tokens},
               {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
               {"output_tokens", u.completion_tokens},
               {"output_tokens_details", {{"reasoning_tokens", 0}}},
               {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

ojson reasoning_item(const std::string& id, const std::string& text) {
  return ojson{{"id", id}, {"type", "reasoning"}, {"summary", ojson::array()},
               {"content", ojson::array({ojson{{"type", "reasoning_text"}, {"text", text}}})}};
}

ojson text_part(const std::string& text) {
  return ojson{{"type", "output_text"}, {"text", text}, {"annotations", ojson::array()}, {"logprobs", ojson::array()}};
}

ojson message_item(const std::string& id, const char* status, const std::string& text, bool with_part) {
  return ojson{{"id", id}, {"type", "message"}, {"status", status}, {"role", "assistant"},
               {"content", with_part ? ojson::array({text_part(text)}) : ojson::array()}};
}

ojson call_item(const std::string& id, const char* status, const ToolCall& call) {
  return ojson{{"id", id}, {"type", "function_call"}, {"status", status},
               {"arguments", call.arguments_json}, {"call_id", call.id}, {"name", call.name}};
}

}  // namespace

void ResponsesWriter::begin(const std::string& id_hex, int64_t created, const std::string& model, int64_t /*prompt_tokens*/) {
  hex_ = id_hex;
  created_ = created;
  model_ = model;
}

ojson ResponsesWriter::response_json(const AssistantOutput* out) const {
  ojson r = {{"id", "resp_" + hex_}, {"object", "response"}, {"created_at", created_}};
  const bool incomplete = out != nullptr && out->finish == FinishReason::kLength && out->tool_calls.empty();
  r["status"] = out == nullptr ? "in_progress" : incomplete ? "incomplete" : "completed";
  r["background"] = false;
  r["error"] = nullptr;
  r["incomplete_details"] = incomplete ? ojson{{"reason", "max_output_tokens"}} : ojson(nullptr);
  r["model"] = model_;
  ojson output = ojson::array();
  if (out != nullptr) {
    if (!out->reasoning.empty()) output.push_back(reasoning_item("rs_" + hex_, out->reasoning));
    if (!out->text.empty()) output.push_back(message_item("msg_" + hex_, "completed", out->text, true));
    for (size_t k = 0; k < out->tool_calls.size(); ++k) {
      output.push_back(call_item(fmt::format("fc_{}_{}", hex_, k), "completed", out->tool_calls[k]));
    }
  }
  r["output"] = std::move(output);
  for (auto it = echo_.begin(); it != echo_.end(); ++it) r[it.key()] = it.value();
  r["usage"] = out == nullptr ? ojson(nullptr) : responses_usage(out->usage);
  r["user"] = nullptr;
  return r;
}

std::string ResponsesWriter::body(const AssistantOutput& out) {
  final_response = response_json(&out);
  return final_response->dump(-1, ' ', false, ojson::error_handler_t::replace);
}

std::string ResponsesWriter::event(const char* type, ojson data) {
  ojson e = {{"type", type}, {"sequence_number", sequence_++}};
  for (auto it = data.begin(); it != data.end(); ++it) e[it.key()] = std::move(it.value());
  return sse_named_event(type, e);
}

std::string ResponsesWriter::stream_start() {
  std::string out = event("response.created", ojson{{"response", response_json(nullptr)}});
  out += event("response.in_progress", ojson{{"response", response_json(nullptr)}});
  return out;
}

ojson ResponsesWriter::open_item_json(const char* status) const {
  using Kind = OutputDelta::Kind;
  if (item_kind_ == Kind::kReasoning) return reasoning_item(item_id_, item_text_);
  if (item_kind_ == Kind::kText) return message_item(item_id_, status, item_text_, std::string(status) == "completed");
  return call_item(item_id_, status, ToolCall{call_id_, call_name_, item_text_});
}

std::string ResponsesWriter::close_item() {
  if (!item_open_) return "";
  item_open_ = false;
  using Kind = OutputDelta::Kind;
  std::string out;
  const ojson where = {{"item_id", item_id_}, {"output_index", output_index_}};
  auto with = [&](ojson extra) {
    ojson d = where;
    for (auto it = extra.begin(); it != extra.end(); ++it) d[it.key()] = std::move(it.value());
    return d;
  };
  if (item_kind_ == Kind::kReasoning) {
    out += event("response.reasoning_text.done", with({{"content_index", 0}, {"text", item_text_}}));
  } else if (item_kind_ == Kind::kText) {
    out += event("response.output_text.done", with({{"content_index", 0}, {"text", item_text_}, {"logprobs", ojson::array()}}));
    out += event("response.content_part.done", with({{"content_index", 0}, {"part", text_part(item_text_)}}));
  } else {
    out += event("response.function_call_arguments.done", with({{"name", call_name_}, {"arguments", item_text_}}));
  }
  out += event("response.output_item.done", ojson{{"output_index", output_index_}, {"item", open_item_json("completed")}});
  return out;
}

std::string ResponsesWriter::stream_deltas(const std::vector<OutputDelta>& deltas) {
  using Kind = OutputDelta::Kind;
  std::string out;
  for (const OutputDelta& d : deltas) {
    if (!item_open_ || d.kind == Kind::kCallStart || (d.kind != item_kind_ && d.kind != Kind::kCallArguments)) {
      out += close_item();
      item_open_ = true;
      output_index_ += 1;
      item_kind_ = d.kind == Kind::kCallStart ? Kind::kCallArguments : d.kind;
      item_text_.clear();
      if (d.kind == Kind::kReasoning) {
        item_id_ = "rs_" + hex_;
      } else if (d.kind == Kind::kText) {
        item_id_ = "msg_" + hex_;
      } else {
        item_id_ = fmt::format("fc_{}_{}", hex_, d.index);
        call_id_ = d.id;
        call_name_ = d.text;
      }
      out += event("response.output_item.added", ojson{{"output_index", output_index_}, {"item", open_item_json("in_progress")}});
      if (d.kind == Kind::kText) {
        out += event("response.content_part.added",
                     ojson{{"item_id", item_id_}, {"output_index", output_index_}, {"content_index", 0}, {"part", text_part("")}});
      }
      if (d.kind == Kind::kCallStart) continue;
    }
    item_text_ += d.text;
    if (d.kind == Kind::kReasoning) {
      out += event("response.reasoning_text.delta",
                   ojson{{"item_id", item_id_}, {"output_index", output_index_}, {"content_index", 0}, {"delta", d.text}});
    } else if (d.kind == Kind::kText) {
      out += event("response.output_text.delta", ojson{{"item_id", item_id_}, {"output_index", output_index_},
                                                       {"content_index", 0}, {"delta", d.text}, {"logprobs", ojson::array()}});
    } else {
      out += event("response.function_call_arguments.delta", ojson{{"item_id", item_id_}, {"output_index", output_index_}, {"delta", d.text}});
    }
  }
  return out;
}

std::string ResponsesWriter::stream_end(const AssistantOutput& out) {
  std::string events = close_item();
  const ojson response = response_json(&out);
  final_response = response;
  const bool incomplete = response["status"] == "incomplete";
  events += event(incomplete ? "response.incomplete" : "response.completed", ojson{{"response", response}});
  return events;
}

std::string ResponsesWriter::stream_error(const ApiError& e) {
  const char* code = error_code_name(e.type);
  return event("error", ojson{{"code", code == nullptr ? ojson(error_type_name(e.type)) : ojson(code)},
                              {"message", e.message},
                              {"param", e.param.empty() ? ojson(nullptr) : ojson(e.param)}});
}

void handle_responses(ServerState& state, const HttpRequest& req, Responder& out) {
  // The input as items (kept with the answer for a later previous_response_id); with a
  // previous_response_id the stored conversation's items go before them and the body is re-written.
  std::string spliced;
  ojson items;  // this request's conversation as input items (what a stored answer continues)
  ojson body = ojson::parse(req.body, nullptr, false);
  const bool is_object = body.is_object();
  if (is_object && body.contains("input")) {
    const ojson& input = body["input"];
    items = input.is_string() ? ojson::array({ojson{{"role", "user"}, {"content", input}}}) : input;
  }
  if (is_object && body.contains("previous_response_id") && body["previous_response_id"].is_string()) {
    const std::string id = body["previous_response_id"];
    std::optional<ResponseStore::Entry> previous = state.responses.get(id);
    if (!previous) {
      return out.respond(error_response({ErrorType::kNotFound,
                                         fmt::format("Previous response with id '{}' not found (kept in memory: at most {}, "
                                                     "none across restarts).", id, kMaxStoredResponses),
                                         "previous_response_id"}));
    }
    ojson all = previous->items;
    if (items.is_array()) {
      for (ojson& item : items) all.push_back(std::move(item));
    }
    items = std::move(all);
    body["input"] = items;
    spliced = body.dump(-1, ' ', false, ojson::error_handler_t::replace);
  }
  ojson echo;
  ChatApiRequest request;
  if (auto e = parse_responses_request(spliced.empty() ? std::string_view(req.body) : std::string_view(spliced),
                                       state.config.limits, &request, &echo,
                                       state.engine().model_info().default_sampling)) {
    return out.respond(error_response(*e));
  }
  const bool store = echo.value("store", true);
  ResponsesWriter writer(std::move(echo));
  run_chat_api(state, std::move(request), writer, req, out);
  if (store && writer.final_response) {
    for (const ojson& item : (*writer.final_response)["output"]) items.push_back(item);
    state.responses.put((*writer.final_response)["id"], ResponseStore::Entry{*writer.final_response, std::move(items)});
  }
}

HttpResponse stored_response(ServerState& state, const HttpRequest& req, const std::string& id) {
  if (req.method == "DELETE") {
    if (!state.responses.erase(id)) {
      return error_response({ErrorType::kNotFound, fmt::format("No response with id '{}' is stored.", id), ""});
    }
    return json_response(ojson{{"id", id}, {"object", "response"}, {"deleted", true}}.dump());
  }
  std::optional<ResponseStore::Entry> entry = state.responses.get(id);
  if (!entry) return error_response({ErrorType::kNotFound, fmt::format("No response with id '{}' is stored.", id), ""});
  return json_response(entry->response.dump(-1, ' ', false, ojson::error_handler_t::replace));
}

}  // namespace tessera::server
