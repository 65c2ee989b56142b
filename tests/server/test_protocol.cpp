// Request parsing/validation, the error table and the response builders, without any engine.
#include <gtest/gtest.h>

#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/protocol.h"
#include "server/protocol_response.h"

namespace tessera::server {
namespace {

using json = nlohmann::json;

std::optional<ApiError> parse(ApiKind kind, const std::string& body, GenerateSpec* spec) {
  return parse_generate_request(kind, body, ProtocolLimits{}, spec);
}

ApiError expect_error(ApiKind kind, const std::string& body) {
  GenerateSpec spec;
  auto e = parse(kind, body, &spec);
  EXPECT_TRUE(e.has_value()) << body;
  return e.value_or(ApiError{});
}

TEST(ApiError, TableMapsTypesToStatusesAndOpenAiJson) {
  EXPECT_EQ(http_status(ErrorType::kInvalidRequest), 400);
  EXPECT_EQ(http_status(ErrorType::kContextLength), 400);
  EXPECT_EQ(http_status(ErrorType::kAuthentication), 401);
  EXPECT_EQ(http_status(ErrorType::kModelNotFound), 404);
  EXPECT_EQ(http_status(ErrorType::kMethodNotAllowed), 405);
  EXPECT_EQ(http_status(ErrorType::kRequestTimeout), 408);
  EXPECT_EQ(http_status(ErrorType::kPayloadTooLarge), 413);
  EXPECT_EQ(http_status(ErrorType::kHeaderTooLarge), 431);
  EXPECT_STREQ(error_code_name(ErrorType::kHeaderTooLarge), "request_header_fields_too_large");
  EXPECT_EQ(http_status(ErrorType::kRateLimit), 429);
  EXPECT_EQ(http_status(ErrorType::kInternal), 500);
  EXPECT_EQ(http_status(ErrorType::kUnavailable), 503);
  // Unsupported-but-known parameters are the client's to change: 400, never a retried 5xx.
  EXPECT_EQ(http_status(ErrorType::kNotImplemented), 400);
  EXPECT_STREQ(error_type_name(ErrorType::kNotImplemented), "invalid_request_error");
  EXPECT_EQ(error_body({ErrorType::kInvalidRequest, "'n' must be an integer", "n"}),
            R"({"error":{"code":null,"message":"'n' must be an integer","param":"n","type":"invalid_request_error"}})");
  EXPECT_EQ(error_body({ErrorType::kModelNotFound, "no", ""}),
            R"({"error":{"code":"model_not_found","message":"no","param":null,"type":"invalid_request_error"}})");
  // Invalid UTF-8 in a message is replaced, not thrown.
  const json j = json::parse(error_body({ErrorType::kInvalidRequest, std::string("bad \xff byte"), ""}));
  EXPECT_EQ(j["error"]["message"], "bad \xEF\xBF\xBD byte");
}

TEST(ApiError, EngineErrorsMapToStatuses) {
  EXPECT_EQ(from_engine_error({ErrorCode::kInvalidArgument, "x"}).type, ErrorType::kInvalidRequest);
  EXPECT_EQ(from_engine_error({ErrorCode::kOutOfRange, "x"}).type, ErrorType::kContextLength);
  EXPECT_EQ(from_engine_error({ErrorCode::kResourceExhausted, "x"}).type, ErrorType::kRateLimit);
  EXPECT_EQ(from_engine_error({ErrorCode::kInternal, "x"}).type, ErrorType::kInternal);
}

TEST(Utf8, AcceptsWellFormedRejectsMalformed) {
  EXPECT_TRUE(is_valid_utf8("plain ascii"));
  EXPECT_TRUE(is_valid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));
  size_t at = 99;
  EXPECT_FALSE(is_valid_utf8("ab\xFF", &at));
  EXPECT_EQ(at, 2u);
  EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate U+D800
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(is_valid_utf8("x\xE2\x82", &at));    // truncated
  EXPECT_EQ(at, 1u);
}

TEST(ParseCompletion, FullRequest) {
  GenerateSpec spec;
  const auto e = parse(ApiKind::kCompletion, R"({"model":"m","prompt":"hi","max_tokens":7,"temperature":0.5,
      "top_p":0.9,"top_k":40,"min_p":0.05,"n":3,"stop":["a","bc"],"seed":-1,"presence_penalty":0.5,
      "frequency_penalty":-0.5,"logprobs":2,"stream":true,"stream_options":{"include_usage":true},
      "user":"u","ignore_eos":true})", &spec);
  ASSERT_FALSE(e.has_value()) << e->message;
  EXPECT_EQ(spec.model, "m");
  ASSERT_EQ(spec.prompts.size(), 1u);
  EXPECT_EQ(spec.prompts[0].text, "hi");
  EXPECT_EQ(spec.params.max_tokens, 7);
  EXPECT_TRUE(spec.max_tokens_given);
  EXPECT_FLOAT_EQ(spec.params.temperature, 0.5f);
  EXPECT_FLOAT_EQ(spec.params.top_p, 0.9f);
  EXPECT_EQ(spec.params.top_k, 40);
  EXPECT_FLOAT_EQ(spec.params.min_p, 0.05f);
  EXPECT_EQ(spec.params.n, 3);
  EXPECT_EQ(spec.params.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(spec.params.seed, std::optional<uint64_t>(~0ull));
  EXPECT_FLOAT_EQ(spec.params.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(spec.params.frequency_penalty, -0.5f);
  EXPECT_EQ(spec.params.logprobs, std::optional<int32_t>(2));
  EXPECT_TRUE(spec.stream);
  EXPECT_TRUE(spec.include_usage);
  EXPECT_TRUE(spec.params.ignore_eos);
}

TEST(ParseCompletion, PromptForms) {
  GenerateSpec spec;
  ASSERT_FALSE(parse(ApiKind::kCompletion, R"({"prompt":["a","b"]})", &spec));
  ASSERT_EQ(spec.prompts.size(), 2u);
  EXPECT_EQ(spec.prompts[1].text, "b");
  EXPECT_EQ(spec.params.max_tokens, 16);  // OpenAI's default
  EXPECT_FALSE(spec.max_tokens_given);
  ASSERT_FALSE(parse(ApiKind::kCompletion, R"({"prompt":[1,2,3]})", &spec));
  ASSERT_EQ(spec.prompts.size(), 1u);
  EXPECT_TRUE(spec.prompts[0].is_ids);
  EXPECT_EQ(spec.prompts[0].ids, (std::vector<int32_t>{1, 2, 3}));
  ASSERT_FALSE(parse(ApiKind::kCompletion, R"({"prompt":[[1],[2,3]]})", &spec));
  ASSERT_EQ(spec.prompts.size(), 2u);
  EXPECT_EQ(spec.prompts[1].ids, (std::vector<int32_t>{2, 3}));
}

TEST(ParseCompletion, ErrorsNameTheFieldAndTheProblem) {
  struct Case {
    const char* body;
    const char* param;
    const char* message;
  };
  const Case cases[] = {
      {R"({"prompt":"x","temperature":"hot"})", "temperature", "'temperature' must be a number, got string"},
      {R"({"prompt":"x","temperature":-1})", "temperature", "'temperature' must be between 0 and 2, got -1"},
      {R"({"prompt":"x","n":0})", "n", "'n' must be an integer between 1 and 16"},
      {R"({"prompt":"x","n":1.5})", "n", "'n' must be an integer, got number"},
      {R"({"prompt":"x","max_tokens":-5})", "max_tokens", "'max_tokens' must be an integer between 1 and 1048576"},
      {R"({"prompt":"x","max_tokens":99999999999999999999})", "max_tokens", "'max_tokens' must be an integer, got number"},
      {R"({"prompt":"x","top_p":0})", "top_p", "'top_p' must be in (0, 1]"},
      {R"({"prompt":"x","stop":[1]})", "stop", "'stop' list items must be strings"},
      {R"({"prompt":"x","stop":""})", "stop", "'stop' strings must not be empty"},
      {R"({"prompt":"x","bogus":1})", "bogus", "Unrecognized request argument supplied: bogus"},
      {R"({"prompt":5})", "prompt", "'prompt' must be a string, a list of strings or a list of token ids, got integer"},
      {R"({"prompt":[]})", "prompt", "'prompt' must not be an empty list"},
      {R"({"prompt":["a",1]})", "prompt", "'prompt' list items must all be strings, all token ids, or all lists of token ids"},
      {R"({"prompt":[-1]})", "prompt", "'prompt' token id -1 is out of range"},
      {R"({})", "prompt", "'prompt' is required"},
      {R"({"prompt":"x","stream":"yes"})", "stream", "'stream' must be a boolean, got string"},
      {R"({"prompt":"x","stream_options":{"include_usage":true}})", "stream_options", "'stream_options' is only allowed with stream"},
      {R"({"prompt":"x","logprobs":21})", "logprobs", "'logprobs' must be an integer between 0 and 20"},
  };
  for (const Case& c : cases) {
    const ApiError e = expect_error(ApiKind::kCompletion, c.body);
    EXPECT_EQ(e.type, ErrorType::kInvalidRequest) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_EQ(e.message, c.message) << c.body;
  }
}

TEST(ParseBody, MalformedBodies) {
  EXPECT_EQ(expect_error(ApiKind::kCompletion, "").message, "Request body is empty; expected a JSON object");
  EXPECT_EQ(expect_error(ApiKind::kCompletion, "[1]").message, "Request body must be a JSON object, got array");
  EXPECT_EQ(expect_error(ApiKind::kCompletion, "{\"prompt\":\"\xff\"}").message,
            "Request body is not valid UTF-8 (first bad byte at offset 11)");
  EXPECT_EQ(expect_error(ApiKind::kCompletion, std::string(100, '[')).message,
            "Request body is nested deeper than 32 levels");
  const ApiError broken = expect_error(ApiKind::kCompletion, R"({"prompt": "x",)");
  EXPECT_EQ(broken.message.rfind("Malformed JSON body: parse error at line 1, column 16", 0), 0u) << broken.message;
}

// Finding 8 of issue 30: a number past a double's range was the JSON library's message as a 500.
TEST(ParseBody, NumberOverflowIsA400NamingTheField) {
  struct Case {
    ApiKind kind;
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {ApiKind::kCompletion, R"({"prompt":"x","temperature":1e400})", "temperature"},
      {ApiKind::kCompletion, R"({"prompt":"x","top_p":-1e400})", "top_p"},
      {ApiKind::kCompletion, R"({"prompt":"x","max_tokens":1e999})", "max_tokens"},
      {ApiKind::kCompletion, R"({"prompt":[1,2,3e400]})", "prompt[2]"},
      {ApiKind::kCompletion, R"({"prompt":"x","stream":true,"stream_options":{"include_usage":1e400}})",
       "stream_options.include_usage"},
      {ApiKind::kChat, R"({"messages":[{"role":"user","content":"x"}],"seed":1e400})", "seed"},
      {ApiKind::kChat, R"({"messages":[{"role":"user","content":"x"},{"role":"user","content":2e308}]})",
       "messages[1].content"},
      {ApiKind::kChat, R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"5":1e400}})",
       "logit_bias.5"},
  };
  for (const Case& c : cases) {
    const ApiError e = expect_error(c.kind, c.body);
    EXPECT_EQ(e.type, ErrorType::kInvalidRequest) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_EQ(e.message, fmt::format("'{}' is out of range: the number does not fit a 64-bit float", c.param))
        << c.body;
  }
  DetokenizeSpec d;
  const std::optional<ApiError> e = parse_detokenize_request(R"({"tokens":[5,1e400]})", &d);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "tokens[1]");
  TokenizeSpec t;
  EXPECT_EQ(parse_tokenize_request(R"({"prompt":"x","add_special_tokens":1e400})", {}, &t)->param,
            "add_special_tokens");
  EXPECT_EQ(expect_error(ApiKind::kCompletion, "1e400").param, "");
}

// Finding 9: min_tokens above max_tokens reached the scheduler and came back as a 500.
TEST(ParseBody, MinTokensAboveMaxTokensIsA400) {
  ApiError e = expect_error(ApiKind::kCompletion, R"({"prompt":"x","max_tokens":4,"min_tokens":5})");
  EXPECT_EQ(e.type, ErrorType::kInvalidRequest);
  EXPECT_EQ(e.param, "min_tokens");
  EXPECT_EQ(e.message, "'min_tokens' (5) must not exceed 'max_tokens' (4)");
  e = expect_error(ApiKind::kCompletion, R"({"prompt":"x","min_tokens":17})");
  EXPECT_EQ(e.message, "'min_tokens' (17) must not exceed 'max_tokens' (16, the default)");
  e = expect_error(ApiKind::kChat, R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":2,"min_tokens":3})");
  EXPECT_EQ(e.param, "min_tokens");
  GenerateSpec spec;
  EXPECT_FALSE(parse(ApiKind::kCompletion, R"({"prompt":"x","max_tokens":5,"min_tokens":5})", &spec));
  // Chat without max_tokens: bounded later by the context room (the handler calls check_min_tokens).
  EXPECT_FALSE(parse(ApiKind::kChat, R"({"messages":[{"role":"user","content":"x"}],"min_tokens":100})", &spec));
  spec.params.max_tokens = 50;
  EXPECT_EQ(check_min_tokens(spec)->message, "'min_tokens' (100) must not exceed 'max_tokens' (50, the default)");
}

TEST(ParseChat, MessagesAndChatFields) {
  GenerateSpec spec;
  const auto e = parse(ApiKind::kChat, R"({"model":"m","messages":[{"role":"system","content":"be brief"},
      {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
      {"role":"assistant","content":null}],"max_completion_tokens":9,"logprobs":true,"top_logprobs":3,
      "stream":true,"stream_options":{"include_usage":false}})", &spec);
  ASSERT_FALSE(e.has_value()) << e->message;
  ASSERT_EQ(spec.messages.size(), 3u);
  EXPECT_EQ(spec.messages[0].role, "system");
  EXPECT_EQ(spec.messages[1].content, "ab");
  EXPECT_EQ(spec.messages[2].content, "");
  EXPECT_EQ(spec.params.max_tokens, 9);
  EXPECT_TRUE(spec.return_logprobs);
  EXPECT_EQ(spec.params.logprobs, std::optional<int32_t>(3));
  EXPECT_FALSE(spec.include_usage);

  EXPECT_EQ(expect_error(ApiKind::kChat, R"({"messages":[]})").message, "'messages' must not be empty");
  EXPECT_EQ(expect_error(ApiKind::kChat, R"({"messages":[{"role":"wizard","content":"x"}]})").param,
            "messages[0].role");
  EXPECT_EQ(expect_error(ApiKind::kChat, R"({"messages":[{"role":"user"}]})").message,
            "'messages[0].content' is required");
  EXPECT_EQ(expect_error(ApiKind::kChat, R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})").message,
            "'top_logprobs' requires 'logprobs': true");
  EXPECT_EQ(expect_error(ApiKind::kChat, R"({"messages":[{"role":"user","content":"x"}],"prompt":"x"})").message,
            "Unrecognized request argument supplied: prompt");
  EXPECT_EQ(expect_error(ApiKind::kChat, R"({"messages":[{"role":"user","content":"x"}],"tools":[{}]})").param,
            "tools[0]");
  EXPECT_EQ(expect_error(ApiKind::kChat, R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}})").param,
            "tool_choice");
  EXPECT_EQ(expect_error(ApiKind::kChat, R"({"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":3})").param,
            "chat_template_kwargs");
}

TEST(ParseTokenize, PromptOrMessages) {
  TokenizeSpec t;
  ASSERT_FALSE(parse_tokenize_request(R"({"prompt":"ab","add_special_tokens":false})", {}, &t));
  EXPECT_EQ(t.prompt, "ab");
  EXPECT_FALSE(t.add_special_tokens);
  EXPECT_TRUE(parse_tokenize_request(R"({"prompt":"a","messages":[]})", {}, &t).has_value());
  DetokenizeSpec d;
  ASSERT_FALSE(parse_detokenize_request(R"({"tokens":[5,6]})", &d));
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(parse_detokenize_request(R"({"tokens":"x"})", &d)->message, "'tokens' must be a list of token ids, got string");
}

TEST(Response, CompletionBodyAndChunks) {
  GenerateSpec spec;
  spec.kind = ApiKind::kCompletion;
  spec.return_logprobs = true;
  const ResponseMeta meta{"cmpl-1", 1700000000, "m"};
  ChoiceState c;
  RequestOutput ev;
  ev.token_ids = {104, 105};
  ev.text_delta = "hi";
  ev.logprobs = {{104, -0.5f}, {105, -1.0f}};
  ev.top_logprobs = {{{104, -0.5f}}, {{105, -1.0f}}};
  ev.finish_reason = FinishReason::kLength;
  ev.num_output_tokens = 2;
  apply_event(ev, &c);
  const TokenTextFn text = [](int32_t id) { return std::string(1, static_cast<char>(id)); };
  const json body = json::parse(completion_response(meta, {c}, {5, 2, 4}, spec, text));
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["text"], "hi");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["choices"][0]["logprobs"]["tokens"], json({"h", "i"}));
  EXPECT_EQ(body["choices"][0]["logprobs"]["text_offset"], json({0, 1}));
  EXPECT_EQ(body["choices"][0]["logprobs"]["top_logprobs"][1], json({{"i", -1.0}}));
  EXPECT_EQ(body["usage"], json::parse(R"({"prompt_tokens":5,"completion_tokens":2,"total_tokens":7,
                                           "prompt_tokens_details":{"cached_tokens":4}})"));
  spec.include_usage = true;
  const json chunk = json::parse(completion_chunk(meta, spec, 3, "hi", &ev, 10, text));
  EXPECT_EQ(chunk["choices"][0]["index"], 3);
  EXPECT_EQ(chunk["choices"][0]["logprobs"]["text_offset"], json({10, 11}));
  EXPECT_TRUE(chunk["usage"].is_null());
  EXPECT_EQ(sse_event("{}"), "data: {}\n\n");
}

TEST(Response, ChatBodyWithLogprobs) {
  GenerateSpec spec;
  spec.kind = ApiKind::kChat;
  spec.return_logprobs = true;
  ChoiceState c;
  RequestOutput ev;
  ev.token_ids = {65};
  ev.text_delta = "A";
  ev.logprobs = {{65, -0.25f}};
  ev.top_logprobs = {{{65, -0.25f}, {66, -2.0f}}};
  ev.finish_reason = FinishReason::kStop;
  ev.num_output_tokens = 1;
  apply_event(ev, &c);
  const TokenTextFn text = [](int32_t id) { return std::string(1, static_cast<char>(id)); };
  const json body = json::parse(chat_response({"chatcmpl-1", 1, "m"}, {c}, {3, 1, 0}, spec, text));
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"], json({{"role", "assistant"}, {"content", "A"}}));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["choices"][0]["logprobs"]["content"][0]["bytes"], json({65}));
  EXPECT_EQ(body["choices"][0]["logprobs"]["content"][0]["top_logprobs"][1]["token"], "B");
}

// Issue 30, finding 13: a piece that splits a UTF-8 character shows as bytes:\xNN (it was U+FFFD,
// so distinct pieces collided as top_logprobs keys), a special token by its text, and the chosen
// token's entry is never overwritten by another token with the same text.
TEST(Response, LogprobKeysOfSplitPiecesSpecialsAndTwins) {
  GenerateSpec spec;
  spec.kind = ApiKind::kCompletion;
  spec.return_logprobs = true;
  const std::map<int32_t, std::string> pieces = {{1, "\xE2\x82"}, {2, "\xE2\x80"}, {3, "<|im_end|>"}, {4, "A"}, {5, "A"}};
  const TokenTextFn text = [&](int32_t id) { return pieces.at(id); };
  ChoiceState c;
  RequestOutput ev;
  ev.token_ids = {1, 4};
  ev.logprobs = {{1, -0.25f}, {4, -1.0f}};
  ev.top_logprobs = {{{1, -0.25f}, {2, -0.5f}, {3, -3.0f}}, {{4, -1.0f}, {5, -2.0f}}};
  ev.num_output_tokens = 2;
  apply_event(ev, &c);
  const json lp = json::parse(completion_response({"cmpl-1", 1, "m"}, {c}, {1, 2, 0}, spec, text))["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json({"bytes:\\xe2\\x82", "A"}));
  EXPECT_EQ(lp["top_logprobs"][0], json::parse(R"({"bytes:\\xe2\\x82": -0.25, "bytes:\\xe2\\x80": -0.5, "<|im_end|>": -3.0})"));
  EXPECT_EQ(lp["top_logprobs"][1], json({{"A", -1.0}}));  // the chosen 4, not 5's -2.0 written after it
  EXPECT_EQ(lp["text_offset"], json({0, 2}));
  spec.kind = ApiKind::kChat;
  const json content = json::parse(chat_response({"c", 1, "m"}, {c}, {1, 2, 0}, spec, text))["choices"][0]["logprobs"]["content"];
  EXPECT_EQ(content[0]["token"], "bytes:\\xe2\\x82");
  EXPECT_EQ(content[0]["bytes"], json({0xE2, 0x82}));
  EXPECT_EQ(content[0]["top_logprobs"][1]["token"], "bytes:\\xe2\\x80");
  EXPECT_EQ(content[0]["top_logprobs"][2]["token"], "<|im_end|>");
}

}  // namespace
}  // namespace tessera::server
