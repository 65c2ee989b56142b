// The generate flow of /v1/completions and /v1/chat/completions:
//
//   body --parse_generate_request--> GenerateSpec --prepare--> prompt ids (tokenized, checked
//   against vocab and context) --Engine::submit (one request per prompt, n samples each)-->
//   RequestStreams --> one JSON body, or SSE chunks written through the Responder.
//
// Runs on a worker thread (never an I/O thread). Streaming pulls engine events with a short
// timeout, writes them as chunks, and writes an SSE comment after keep_alive_interval_ms of
// silence. Whenever the client is gone (the connection saw EOF while the request ran, or a write
// failed) every engine request of this HTTP request is aborted, so its KV blocks are freed
// between steps: non-streaming requests too, checked at every poll (stream_poll_ms).
#include <chrono>
#include <memory>
#include <random>

#include <fmt/format.h>

#include "server/chat_api.h"
#include "server/chat_output.h"
#include "server/lora_routes.h"
#include "server/protocol_response.h"
#include "server/server_state.h"

namespace tessera::server {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Prepared {
  std::vector<std::vector<int32_t>> prompt_ids;  // [num_prompts][num_tokens]
  std::vector<std::string> prompt_texts;         // for echo
};

std::optional<ApiError> prepare(const Engine& engine, GenerateSpec& spec, Prepared* out) {
  const ModelInfo& info = engine.model_info();
  if (spec.kind == ApiKind::kChat) {
    // The model's own template gets the messages as sent, the tools (left out when tool_choice is
    // "none": the model is not to call any) and chat_template_kwargs.
    ChatTemplateInput input{spec.chat.messages_json, spec.chat.tool_choice == ToolChoice::kNone ? "" : spec.chat.tools_json,
                            spec.chat.template_kwargs_json, /*add_generation_prompt=*/true};
    // Rendered and tokenized as one: text from the request never becomes a control token.
    Result<ChatPrompt> rendered = engine.chat_prompt(input, info.add_bos);
    if (!rendered.ok()) {
      ApiError e = from_engine_error(rendered.error());
      e.message = "Cannot apply the chat template: " + e.message;
      e.param = "messages";
      if (e.type == ErrorType::kInternal) e.type = ErrorType::kInvalidRequest;
      return e;
    }
    out->prompt_ids.push_back(std::move(rendered->ids));
    out->prompt_texts.push_back(std::move(rendered->text));
  } else {
    for (PromptInput& p : spec.prompts) {
      if (p.is_ids) {
        for (int32_t id : p.ids) {
          if (id >= info.vocab_size) {
            return ApiError{ErrorType::kInvalidRequest,
                            fmt::format("token id {} is out of range (vocabulary size {})", id, info.vocab_size),
                            "prompt"};
          }
        }
        out->prompt_texts.push_back(spec.echo ? engine.detokenize(p.ids) : std::string());
        out->prompt_ids.push_back(std::move(p.ids));
      } else {
        out->prompt_ids.push_back(engine.tokenize(p.text, info.add_bos, /*parse_special=*/true));
        out->prompt_texts.push_back(std::move(p.text));
      }
    }
  }
  const int64_t context = info.context_length;
  for (const std::vector<int32_t>& ids : out->prompt_ids) {
    const int64_t num_prompt = static_cast<int64_t>(ids.size());
    if (num_prompt == 0) {
      return ApiError{ErrorType::kInvalidRequest, "The prompt is empty (0 tokens)",
                      spec.kind == ApiKind::kChat ? "messages" : "prompt"};
    }
    if (num_prompt >= context) {
      return ApiError{ErrorType::kContextLength,
                      fmt::format("This model's maximum context length is {} tokens. However, your "
                                  "prompt has {} tokens (no room for output).", context, num_prompt),
                      spec.kind == ApiKind::kChat ? "messages" : "prompt"};
    }
    if (spec.max_tokens_given && spec.clamp_max_tokens && num_prompt + spec.params.max_tokens > context) {
      spec.params.max_tokens = static_cast<int32_t>(context - num_prompt);
    }
    if (spec.max_tokens_given && num_prompt + spec.params.max_tokens > context) {
      return ApiError{ErrorType::kContextLength,
                      fmt::format("This model's maximum context length is {} tokens. However, you "
                                  "requested {} tokens ({} in the prompt, {} for the completion). "
                                  "Please reduce the prompt or max_tokens.",
                                  context, num_prompt + spec.params.max_tokens, num_prompt,
                                  spec.params.max_tokens),
                      "max_tokens"};
    }
  }
  // Defaults: completions 16 (OpenAI's), chat the rest of the context; both within the context.
  if (!spec.max_tokens_given) {
    int64_t room = context;
    for (const auto& ids : out->prompt_ids) room = std::min<int64_t>(room, context - static_cast<int64_t>(ids.size()));
    spec.params.max_tokens = static_cast<int32_t>(
        spec.kind == ApiKind::kChat ? room : std::min<int64_t>(spec.params.max_tokens, room));
  }
  return check_min_tokens(spec);
}

// Everything one generate request holds while it runs (shared with the stream provider).
struct Job {
  ServerState& state;
  GenerateSpec spec;
  ResponseMeta meta;
  InFlightSlot slot;
  std::vector<std::shared_ptr<RequestStream>> streams;  // [num_prompts]
  std::vector<ChoiceState> choices;                     // [num_prompts * n]
  std::vector<int32_t> num_finished;                    // [num_prompts] samples finished
  std::vector<int32_t> prompt_tokens, cached_tokens;    // [num_prompts] from the latest event
  ChatShaping shaping;                                  // chat: reasoning / tool-call shaping
  std::vector<ChatStreamShaper> shapers;                // [num_prompts * n] when streaming chat
  ChatApiWriter* writer = nullptr;                      // agent APIs (chat_api.h); null: OpenAI shapes
  bool report_stop = false;                             // find the stop string that ended the answer
  std::string matched_stop;                             // ... that one (cut from the text)
  bool started = false;                                 // stream: initial chunks written
  bool completed = false;                               // every choice answered (or failed)
  std::optional<ApiError> failure;                      // an engine error / abort ends everything
  Clock::time_point last_write = Clock::now();

  Job(ServerState& s, GenerateSpec sp) : state(s), spec(std::move(sp)), slot(s) {}

  int32_t n() const { return spec.params.n; }
  TokenTextFn token_text() const {
    const Engine* engine = &state.engine();
    return [engine](int32_t id) { return engine->token_piece(id); };
  }
  void abort_all() {
    for (const auto& s : streams) state.engine().abort(s->request_id());
  }
  UsageCounts usage() const {
    UsageCounts u;
    for (size_t i = 0; i < streams.size(); ++i) {
      u.prompt_tokens += prompt_tokens[i];
      u.cached_tokens += cached_tokens[i];
    }
    for (const ChoiceState& c : choices) u.completion_tokens += c.num_output_tokens;
    return u;
  }
  bool prompt_done(size_t i) const { return num_finished[i] >= n(); }
  bool all_done() const {
    for (size_t i = 0; i < streams.size(); ++i) {
      if (!prompt_done(i)) return false;
    }
    return true;
  }
  HttpResponse error(const ApiError& e) const { return writer != nullptr ? writer->error(e) : error_response(e); }
  // With report_stop the engine keeps the stop string in the text (include_stop_str_in_output);
  // its final event ends with it (text that may begin one is held back until it matches): cut it.
  void cut_stop(size_t prompt_index, RequestOutput& ev) {
    if (!report_stop || ev.finish_reason != FinishReason::kStop) return;
    const std::string text = choices[prompt_index * n()].text + ev.text_delta;
    for (const std::string& s : spec.params.stop) {
      if (text.size() >= s.size() && text.compare(text.size() - s.size(), s.size(), s) == 0) {
        matched_stop = s;
        ev.text_delta.resize(ev.text_delta.size() - std::min(s.size(), ev.text_delta.size()));
        return;
      }
    }
  }
  // The one answer of an agent-API request (n = 1, one prompt).
  AssistantOutput output() const {
    bool made_calls = false;
    AssistantOutput out = assistant_output(chat_message(choices[0].text, shaping, 0, &made_calls));
    out.finish = choices[0].finish_reason;
    out.stop_sequence = matched_stop;
    out.usage = usage();
    return out;
  }
  // Records one event; returns its choice.
  ChoiceState& record(size_t prompt_index, const RequestOutput& ev) {
    const int32_t sample = std::clamp(ev.sample_index, 0, n() - 1);
    ChoiceState& c = choices[prompt_index * n() + sample];
    prompt_tokens[prompt_index] = ev.num_prompt_tokens;
    cached_tokens[prompt_index] = ev.num_cached_prompt_tokens;
    apply_event(ev, &c);
    if (ev.finish_reason != FinishReason::kNone) {
      num_finished[prompt_index] += 1;
      if (ev.finish_reason == FinishReason::kAbort && !failure) {
        failure = ApiError{ErrorType::kUnavailable, "The request was aborted (server shutting down)", ""};
      } else if (ev.finish_reason == FinishReason::kError && !failure) {
        failure = ApiError{ErrorType::kInternal, "The engine failed this request: " + ev.error, ""};
      }
    }
    return c;
  }
  // Pulls the next event of prompt i; nullopt on timeout. Marks the prompt done when its stream
  // ended without the expected final events (defensive).
  std::optional<RequestOutput> pull(size_t i, std::chrono::milliseconds timeout) {
    std::optional<RequestOutput> ev = streams[i]->next(timeout);
    if (!ev && streams[i]->finished()) {
      ev = streams[i]->next(std::chrono::milliseconds(0));
      if (!ev && !prompt_done(i)) {
        num_finished[i] = n();
        if (!failure) failure = ApiError{ErrorType::kInternal, "The request ended without a result", ""};
      }
    }
    return ev;
  }
};

std::optional<ApiError> submit_all(Job& job, Prepared& prepared) {
  for (size_t i = 0; i < prepared.prompt_ids.size(); ++i) {
    GenerateRequest request{std::move(prepared.prompt_ids[i]), job.spec.params, job.spec.cache_salt,
                            job.spec.lora_name};
    Result<std::shared_ptr<RequestStream>> stream = job.state.engine().submit(std::move(request));
    if (!stream.ok()) {
      job.abort_all();
      return from_engine_error(stream.error());
    }
    job.streams.push_back(std::move(stream.value()));
  }
  const size_t num_prompts = job.streams.size();
  job.choices.resize(num_prompts * job.n());
  for (size_t i = 0; i < job.choices.size(); ++i) {
    job.choices[i].index = static_cast<int32_t>(i);
    if (job.spec.echo) job.choices[i].prefix = prepared.prompt_texts[i / job.n()];
  }
  job.num_finished.assign(num_prompts, 0);
  job.prompt_tokens.assign(num_prompts, 0);
  job.cached_tokens.assign(num_prompts, 0);
  return std::nullopt;
}

// Counts a client that went away and aborts what it asked for.
void abandon(Job& job) {
  job.state.num_client_disconnects.fetch_add(1);
  job.abort_all();
}

void run_to_completion(Job& job, Responder& out) {
  const auto poll = std::chrono::milliseconds(job.state.config.stream_poll_ms);
  for (size_t i = 0; i < job.streams.size(); ++i) {
    while (!job.prompt_done(i)) {
      if (out.client_gone()) return abandon(job);  // nobody to answer: free the engine's work now
      if (job.state.stopping.load()) {
        job.abort_all();
        return out.respond(job.error({ErrorType::kUnavailable, "The server is shutting down", ""}));
      }
      if (std::optional<RequestOutput> ev = job.pull(i, poll)) {
        job.cut_stop(i, *ev);
        job.record(i, *ev);
      }
    }
  }
  if (job.failure) {
    job.abort_all();
    return out.respond(job.error(*job.failure));
  }
  if (job.writer != nullptr) return out.respond(json_response(job.writer->body(job.output())));
  out.respond(json_response(job.spec.kind == ApiKind::kChat
                                ? chat_response(job.meta, job.choices, job.usage(), job.spec, job.token_text(), &job.shaping)
                                : completion_response(job.meta, job.choices, job.usage(), job.spec, job.token_text())));
}

// The chunks for one event of one choice.
std::string event_chunks(Job& job, const ChoiceState& before, size_t text_before,
                         const RequestOutput& ev) {
  const TokenTextFn token_text = job.token_text();
  if (job.writer != nullptr) {
    ChatStreamShaper& shaper = job.shapers[static_cast<size_t>(before.index)];
    std::vector<json> deltas = shaper.push(ev.text_delta);
    if (ev.finish_reason != FinishReason::kNone) {
      for (json& d : shaper.finish()) deltas.push_back(std::move(d));
    }
    std::vector<OutputDelta> pieces;
    for (const json& d : deltas) {
      for (OutputDelta& p : output_deltas(d)) pieces.push_back(std::move(p));
    }
    return pieces.empty() ? std::string() : job.writer->stream_deltas(pieces);
  }
  if (job.spec.kind == ApiKind::kChat && job.shaping.active()) {
    ChatStreamShaper& shaper = job.shapers[static_cast<size_t>(before.index)];
    std::vector<json> deltas = shaper.push(ev.text_delta);
    if (ev.finish_reason != FinishReason::kNone) {
      for (json& d : shaper.finish()) deltas.push_back(std::move(d));
    }
    // This event's logprobs ride on its first chunk (an empty delta when the text is held back);
    // the finish chunk carries only the finish reason.
    RequestOutput tokens_only = ev;
    tokens_only.finish_reason = FinishReason::kNone;
    RequestOutput finish_only = ev;
    finish_only.token_ids.clear();
    finish_only.logprobs.clear();
    finish_only.top_logprobs.clear();
    if (deltas.empty() && job.spec.return_logprobs && !ev.token_ids.empty()) deltas.push_back(json::object());
    std::string out;
    for (size_t k = 0; k < deltas.size(); ++k) {
      out += sse_event(chat_chunk(job.meta, job.spec, before.index, deltas[k], k == 0 ? &tokens_only : nullptr, token_text));
    }
    if (ev.finish_reason != FinishReason::kNone) {
      json last = json::parse(chat_chunk(job.meta, job.spec, before.index, json::object(), &finish_only, token_text));
      if (shaper.made_tool_calls()) last["choices"][0]["finish_reason"] = "tool_calls";
      out += sse_event(last.dump());
    }
    return out;
  }
  if (job.spec.kind == ApiKind::kChat) {
    json delta = json::object();
    if (!ev.text_delta.empty() || ev.finish_reason == FinishReason::kNone) delta["content"] = ev.text_delta;
    return sse_event(chat_chunk(job.meta, job.spec, before.index, delta, &ev, token_text));
  }
  return sse_event(completion_chunk(job.meta, job.spec, before.index, ev.text_delta, &ev,
                                    before.prefix.size() + text_before, token_text));
}

// One round of the stream: what is ready (or a keep-alive comment after silence) goes out.
// Returns false once the stream has ended (answered, failed, or the client gone).
bool stream_round(Job& job, Responder& out_to) {
  if (out_to.client_gone()) {
    abandon(job);
    return false;
  }
  std::string out;
  if (!job.started) {
    job.started = true;
    if (job.writer != nullptr) out += job.writer->stream_start();
    for (const ChoiceState& c : job.choices) {
      if (job.writer != nullptr) break;
      if (job.spec.kind == ApiKind::kChat) {
        out += sse_event(chat_chunk(job.meta, job.spec, c.index, json{{"role", "assistant"}, {"content", ""}},
                                    nullptr, job.token_text()));
      } else if (!c.prefix.empty()) {
        out += sse_event(completion_chunk(job.meta, job.spec, c.index, c.prefix, nullptr, 0, job.token_text()));
      }
    }
  } else if (job.failure || job.all_done() || job.state.stopping.load()) {
    if (job.failure || !job.all_done()) {
      job.abort_all();
      ApiError e = job.failure ? *job.failure : ApiError{ErrorType::kUnavailable, "The server is shutting down", ""};
      out += job.writer != nullptr ? job.writer->stream_error(e) : sse_event(error_body(e));
    } else if (job.writer != nullptr) {
      out += job.writer->stream_end(job.output());
    } else if (job.spec.include_usage) {
      out += sse_event(usage_chunk(job.meta, job.spec, job.usage()));
    }
    if (job.writer == nullptr) out += kSseDone;
    job.completed = true;
    out_to.write(std::move(out));
    out_to.end_stream();
    return false;
  } else {
    size_t num_open = 0;
    for (size_t i = 0; i < job.streams.size(); ++i) num_open += job.prompt_done(i) ? 0 : 1;
    const auto poll = std::chrono::milliseconds(num_open <= 1 ? job.state.config.stream_poll_ms : 2);
    for (size_t i = 0; i < job.streams.size(); ++i) {
      if (job.prompt_done(i)) continue;
      // Drain what is ready; wait (briefly) only for the first event.
      auto timeout = poll;
      while (std::optional<RequestOutput> ev = job.pull(i, timeout)) {
        timeout = std::chrono::milliseconds(0);
        const int32_t sample = std::clamp(ev->sample_index, 0, job.n() - 1);
        const ChoiceState& c = job.choices[i * job.n() + sample];
        const size_t text_before = c.text.size();
        job.cut_stop(i, *ev);
        job.record(i, *ev);
        if (ev->finish_reason == FinishReason::kAbort || ev->finish_reason == FinishReason::kError) break;
        out += event_chunks(job, c, text_before, *ev);
        if (job.prompt_done(i)) break;
      }
    }
  }
  const auto now = Clock::now();
  if (out.empty() && now - job.last_write < std::chrono::milliseconds(job.state.config.keep_alive_interval_ms)) {
    return true;  // nothing yet
  }
  // An SSE comment (or the API's own ping): ignored by clients, detects gone ones.
  if (out.empty()) out = job.writer != nullptr ? job.writer->keep_alive() : std::string(": keep-alive\n\n");
  job.last_write = now;
  if (!out_to.write(std::move(out))) {
    abandon(job);
    return false;
  }
  return true;
}

}  // namespace

std::string ServerState::make_response_id(const char* prefix) {
  const uint64_t x = (next_response_id.fetch_add(1) + 1) * 0x9E3779B97F4A7C15ull ^ id_salt;
  return fmt::format("{}-{:016x}", prefix, x);
}

namespace {

// The flow every generate API shares once its body is parsed: drain and in-flight checks, render
// + tokenize, submit, then one body or a stream. writer == nullptr: OpenAI's shapes.
void run_spec(ServerState& state, GenerateSpec spec, ChatApiWriter* writer, bool report_stop, const std::string& model,
              const HttpRequest& req, Responder& out) {
  auto fail = [&](const ApiError& e) { out.respond(writer != nullptr ? writer->error(e) : error_response(e)); };
  if (state.draining.load()) return fail({ErrorType::kUnavailable, "The server is shutting down", ""});
  if (state.num_in_flight.fetch_add(1) >= state.config.max_queued_requests) {
    state.num_in_flight.fetch_sub(1);
    return fail({ErrorType::kRateLimit,
                 fmt::format("Too many requests in flight (limit {}); retry later", state.config.max_queued_requests), ""});
  }
  const ApiKind kind = spec.kind;
  // From here the slot is owned by the Job (released when the Job dies).
  Job job(state, std::move(spec));
  job.writer = writer;
  job.report_stop = report_stop;
  Prepared prepared;
  if (auto e = prepare(state.engine(), job.spec, &prepared)) return fail(*e);
  const std::string rendered_prompt = kind == ApiKind::kChat ? prepared.prompt_texts[0] : std::string();
  const int64_t num_prompt_tokens = static_cast<int64_t>(prepared.prompt_ids[0].size());
  if (out.client_gone()) return;  // left while the prompt was tokenized: nothing to submit
  if (auto e = submit_all(job, prepared)) return fail(*e);
  // A safe X-Request-ID names the response (as vLLM does): the gateway's and the client's logs agree.
  const char* id_prefix = kind == ApiKind::kChat ? "chatcmpl" : "cmpl";
  const auto client_id = safe_request_id(req.header("X-Request-ID"));
  job.meta = ResponseMeta{client_id ? fmt::format("{}-{}", id_prefix, *client_id) : state.make_response_id(id_prefix),
                          std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch()).count(),
                          job.spec.lora_name.empty() ? state.config.served_model_name : job.spec.lora_name};
  if (kind == ApiKind::kChat) {
    job.shaping = chat_shaping(job.spec.chat, rendered_prompt, job.meta.id);
    if (writer != nullptr) {
      const std::string hex = state.make_response_id("x").substr(2);
      job.shaping.call_id_prefix = writer->call_id_prefix() + "_" + hex;
      writer->begin(hex, job.meta.created, model.empty() ? state.config.served_model_name : model, num_prompt_tokens);
    }
    for (const ChoiceState& c : job.choices) job.shapers.emplace_back(job.shaping, c.index);
  }
  if (!job.spec.stream) return run_to_completion(job, out);

  HttpResponse head;
  head.content_type = "text/event-stream";
  head.headers = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
  out.begin_stream(head);
  while (stream_round(job, out)) {
  }
  if (!job.completed) job.abort_all();  // ended early: the engine must not keep it
}

}  // namespace

void handle_generate(ServerState& state, ApiKind kind, const HttpRequest& req, Responder& out) {
  GenerateSpec spec;
  if (auto e = parse_generate_request(kind, req.body, state.config.limits, &spec,
                                      state.engine().model_info().default_sampling)) {
    return out.respond(error_response(*e));
  }
  if (auto e = resolve_model(state, spec.model, /*strict=*/true, &spec.lora_name)) return out.respond(error_response(*e));
  run_spec(state, std::move(spec), nullptr, false, "", req, out);
}

void run_chat_api(ServerState& state, ChatApiRequest request, ChatApiWriter& writer, const HttpRequest& req,
                  Responder& out) {
  // Any model id is answered (with the served model), but a loaded adapter's name selects it.
  (void)resolve_model(state, request.model, /*strict=*/false, &request.spec.lora_name);
  run_spec(state, std::move(request.spec), &writer, request.report_stop_sequence, request.model, req, out);
}

std::optional<ApiError> count_chat_api_tokens(ServerState& state, ChatApiRequest& request, int64_t* num_tokens) {
  Prepared prepared;
  GenerateSpec spec = request.spec;
  spec.max_tokens_given = false;  // only the prompt is counted
  if (auto e = prepare(state.engine(), spec, &prepared)) return e;
  *num_tokens = static_cast<int64_t>(prepared.prompt_ids[0].size());
  return std::nullopt;
}

std::string sse_named_event(const std::string& name, const nlohmann::ordered_json& data) {
  return "event: " + name + "\ndata: " + data.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace tessera::server
