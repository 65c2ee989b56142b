// /v1/messages, /v1/messages/count_tokens and /v1/responses over HTTP against the FakeEngine (its
// template is "<|role|>\ncontent\n" per message then "<|assistant|>\n"; greedy output cycles the
// prompt's bytes, '#' is EOS): answers, stop reasons, usage, streams equal to the bodies, the
// Anthropic error shape on its routes, x-api-key, the in-flight limit.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace tessera::testing {
namespace {

// The data payloads of a named-event SSE stream, with their event names.
std::vector<std::pair<std::string, json>> named_events(const std::string& raw) {
  std::vector<std::pair<std::string, json>> out;
  size_t pos = 0;
  while ((pos = raw.find("event: ", pos)) != std::string::npos) {
    const size_t nl = raw.find('\n', pos);
    const size_t end = raw.find("\n\n", nl);
    out.emplace_back(raw.substr(pos + 7, nl - pos - 7), json::parse(raw.substr(nl + 7, end - nl - 7)));
    pos = end;
  }
  return out;
}

const json kHello = {{"model", "claude-sonnet-4-5"}, {"max_tokens", 8}, {"temperature", 0},
                     {"messages", {{{"role", "user"}, {"content", "hello"}}}}};

TEST(AgentHttp, MessagesCreateStreamAndCountTokens) {
  ServerFixture f;
  auto [status, msg] = f.post("/v1/messages?beta=true", kHello, {{"anthropic-version", "2023-06-01"}, {"anthropic-beta", "x"}});
  ASSERT_EQ(status, 200) << msg.dump();
  EXPECT_EQ(msg["type"], "message");
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["model"], "claude-sonnet-4-5");  // any model id: the served model answers
  EXPECT_EQ(msg["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(msg["content"], json::parse(R"([{"type":"text","text":"<|user|>"}])"));
  EXPECT_EQ(msg["stop_reason"], "max_tokens");
  EXPECT_TRUE(msg["stop_sequence"].is_null());
  const int64_t prompt_tokens = 1 + std::string("<|user|>\nhello\n<|assistant|>\n").size();
  EXPECT_EQ(msg["usage"]["input_tokens"].get<int64_t>() + msg["usage"]["cache_read_input_tokens"].get<int64_t>(), prompt_tokens);
  EXPECT_EQ(msg["usage"]["output_tokens"], 8);

  json count_body = kHello;
  count_body.erase("max_tokens");
  auto [cs, count] = f.post("/v1/messages/count_tokens?beta=true", count_body);
  ASSERT_EQ(cs, 200) << count.dump();
  EXPECT_EQ(count, json({{"input_tokens", prompt_tokens}}));

  json stream_body = kHello;
  stream_body["stream"] = true;
  const auto r = f.post_stream("/v1/messages", stream_body);
  ASSERT_EQ(r.status, 200);
  const auto events = named_events(r.raw);
  ASSERT_GE(events.size(), 6u);
  EXPECT_EQ(events.front().first, "message_start");
  EXPECT_EQ(events.front().second["message"]["usage"]["input_tokens"], prompt_tokens);
  EXPECT_EQ(events[1].first, "ping");
  std::string text;
  for (const auto& [name, data] : events) {
    if (name == "content_block_delta") text += data["delta"]["text"].get<std::string>();
  }
  EXPECT_EQ(text, "<|user|>");  // the streamed text equals the non-streamed
  EXPECT_EQ(events[events.size() - 2].first, "message_delta");
  EXPECT_EQ(events[events.size() - 2].second["delta"]["stop_reason"], "max_tokens");
  EXPECT_EQ(events[events.size() - 2].second["usage"]["output_tokens"], 8);
  EXPECT_EQ(events.back().first, "message_stop");
}

TEST(AgentHttp, MessagesStopReasons) {
  ServerFixture f;
  json stop = kHello;
  stop["max_tokens"] = 20;
  stop["stop_sequences"] = {"ser", "zz"};
  auto [s1, m1] = f.post("/v1/messages", stop);
  ASSERT_EQ(s1, 200) << m1.dump();
  EXPECT_EQ(m1["content"][0]["text"], "<|u");
  EXPECT_EQ(m1["stop_reason"], "stop_sequence");
  EXPECT_EQ(m1["stop_sequence"], "ser");
  stop["stream"] = true;
  std::string text;
  std::string reason, sequence;
  for (const auto& [name, data] : named_events(f.post_stream("/v1/messages", stop).raw)) {
    if (name == "content_block_delta") text += data["delta"]["text"].get<std::string>();
    if (name == "message_delta") {
      reason = data["delta"]["stop_reason"];
      sequence = data["delta"]["stop_sequence"];
    }
  }
  EXPECT_EQ(text, "<|u");
  EXPECT_EQ(reason, "stop_sequence");
  EXPECT_EQ(sequence, "ser");
  json eos = kHello;
  eos["max_tokens"] = 40;
  eos["messages"][0]["content"] = "ab#";
  auto [s2, m2] = f.post("/v1/messages", eos);
  ASSERT_EQ(s2, 200);
  EXPECT_EQ(m2["content"][0]["text"], "<|user|>\nab");
  EXPECT_EQ(m2["stop_reason"], "end_turn");
  // Claude Code asks for its model's max_tokens (32000-128000): cut to the room the context leaves.
  json big = kHello;
  big["max_tokens"] = 128000;
  auto [s3, m3] = f.post("/v1/messages", big);
  ASSERT_EQ(s3, 200) << m3.dump();
  EXPECT_EQ(m3["stop_reason"], "max_tokens");
  const int64_t prompt_tokens = 1 + std::string("<|user|>\nhello\n<|assistant|>\n").size();
  EXPECT_EQ(m3["usage"]["input_tokens"].get<int64_t>() + m3["usage"]["cache_read_input_tokens"].get<int64_t>(), prompt_tokens);
  EXPECT_EQ(m3["usage"]["cache_read_input_tokens"], 16);  // the same prompt ran above: one 16-token block cached
  EXPECT_EQ(m3["usage"]["output_tokens"], 256 - prompt_tokens);
}

TEST(AgentHttp, MessagesErrorsInAnthropicShape) {
  server::ServerConfig sc;
  sc.api_key = "sekret";
  ServerFixture f(sc);
  auto expect_anthropic = [](const std::pair<int, json>& got, int status, const char* type) {
    EXPECT_EQ(got.first, status) << got.second.dump();
    EXPECT_EQ(got.second["type"], "error") << got.second.dump();
    EXPECT_EQ(got.second["error"]["type"], type) << got.second.dump();
  };
  expect_anthropic(f.post("/v1/messages", kHello), 401, "authentication_error");
  expect_anthropic(f.post("/v1/messages", kHello, {{"x-api-key", "wrong"}}), 401, "authentication_error");
  const ServerFixture::Headers key = {{"x-api-key", "sekret"}};
  EXPECT_EQ(f.post("/v1/messages", kHello, key).first, 200);
  EXPECT_EQ(f.post("/v1/messages", kHello, {{"Authorization", "Bearer sekret"}}).first, 200);
  EXPECT_EQ(f.post("/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}}, key).first,
            200);
  json no_max = kHello;
  no_max.erase("max_tokens");
  expect_anthropic(f.post("/v1/messages", no_max, key), 400, "invalid_request_error");
  expect_anthropic(f.post("/v1/messages", std::string("{\"max_tokens\": "), key), 400, "invalid_request_error");
  expect_anthropic(f.get("/v1/messages", key), 405, "invalid_request_error");
  expect_anthropic(f.post("/v1/messages/batches", kHello, key), 404, "not_found_error");
  json too_long = kHello;
  too_long["messages"][0]["content"] = std::string(300, 'a');  // the fake's context is 256
  expect_anthropic(f.post("/v1/messages", too_long, key), 400, "invalid_request_error");
}

TEST(AgentHttp, ResponsesCreateAndStream) {
  ServerFixture f;
  const json body = {{"model", "gpt-5-codex"}, {"input", "hello"}, {"instructions", "S"}, {"max_output_tokens", 6},
                     {"temperature", 0}, {"store", false}};
  auto [status, r] = f.post("/v1/responses", body);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["model"], "gpt-5-codex");
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(r["instructions"], "S");
  ASSERT_EQ(r["output"].size(), 1u);
  EXPECT_EQ(r["output"][0]["type"], "message");
  EXPECT_EQ(r["output"][0]["content"][0]["text"], "<|syst");
  const int64_t prompt_tokens = 1 + std::string("<|system|>\nS\n<|user|>\nhello\n<|assistant|>\n").size();
  EXPECT_EQ(r["usage"]["input_tokens"], prompt_tokens);
  EXPECT_EQ(r["usage"]["output_tokens"], 6);
  EXPECT_EQ(r["usage"]["total_tokens"], prompt_tokens + 6);

  json stream_body = body;
  stream_body["stream"] = true;
  const auto s = f.post_stream("/v1/responses", stream_body);
  ASSERT_EQ(s.status, 200);
  const auto events = named_events(s.raw);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events[0].first, "response.created");
  EXPECT_EQ(events[1].first, "response.in_progress");
  std::string text;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].second["sequence_number"], i);
    if (events[i].first == "response.output_text.delta") text += events[i].second["delta"].get<std::string>();
  }
  EXPECT_EQ(text, "<|syst");
  EXPECT_EQ(events.back().first, "response.incomplete");
  EXPECT_EQ(events.back().second["response"]["output"][0]["content"][0]["text"], "<|syst");

  auto [bad_status, bad] = f.post("/v1/responses", json{{"input", json::array()}});
  EXPECT_EQ(bad_status, 400);
  EXPECT_EQ(bad["error"]["type"], "invalid_request_error");
  EXPECT_EQ(f.get("/v1/responses").first, 405);
}

TEST(AgentHttp, ModelsCardServesBothClients) {
  ServerFixture f;
  auto [status, models] = f.get("/v1/models");
  ASSERT_EQ(status, 200);
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["has_more"], false);
  EXPECT_EQ(models["data"][0]["id"], "fake-model");
  EXPECT_EQ(models["data"][0]["type"], "model");
  EXPECT_EQ(models["data"][0]["display_name"], "fake-model");
}

}  // namespace
}  // namespace tessera::testing
