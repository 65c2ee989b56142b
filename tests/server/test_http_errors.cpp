// Hostile and wrong requests over HTTP: each gets the right status and OpenAI error body, and the
// server stays up. Also auth, limits (body size, context, in-flight), and engine failures.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace tessera::testing {
namespace {

void expect_error(const std::pair<int, json>& got, int status, const std::string& type,
                  const std::string& message_part) {
  EXPECT_EQ(got.first, status) << got.second.dump();
  ASSERT_TRUE(got.second.contains("error")) << got.second.dump();
  const json& e = got.second["error"];
  EXPECT_EQ(e["type"], type) << got.second.dump();
  EXPECT_NE(e["message"].get<std::string>().find(message_part), std::string::npos) << e.dump();
  EXPECT_TRUE(e.contains("param"));
  EXPECT_TRUE(e.contains("code"));
}

TEST(HttpErrors, MalformedAndWrongRequestsGetOpenAiErrors) {
  server::ServerConfig sc;
  sc.max_body_bytes = 4096;
  ServerFixture f(sc);
  expect_error(f.post("/v1/completions", std::string("{\"prompt\": ")), 400, "invalid_request_error",
               "Malformed JSON body");
  expect_error(f.post("/v1/completions", std::string("not json at all")), 400, "invalid_request_error",
               "Malformed JSON body");
  expect_error(f.post("/v1/completions", std::string("{\"prompt\": \"\xC3\x28\"}")), 400,
               "invalid_request_error", "not valid UTF-8");
  expect_error(f.post("/v1/completions", json{{"prompt", "x"}, {"max_tokens", "ten"}}), 400,
               "invalid_request_error", "'max_tokens' must be an integer, got string");
  expect_error(f.post("/v1/completions", json{{"prompt", "x"}, {"n", 100000}}), 400, "invalid_request_error",
               "'n' must be an integer between 1 and 16");
  expect_error(f.post("/v1/completions", json{{"prompt", "x"}, {"temperature", 1e30}}), 400,
               "invalid_request_error", "'temperature' must be between 0 and 2");
  expect_error(f.post("/v1/chat/completions", json{{"messages", "hi"}}), 400, "invalid_request_error",
               "'messages' must be a list of messages, got string");
  expect_error(f.post("/v1/completions", std::string(5000, ' ')), 413, "invalid_request_error",
               "Request body too large (limit 4096 bytes)");
  expect_error(f.post("/v1/completions", json{{"prompt", {300}}}), 400, "invalid_request_error",
               "token id 300 is out of range (vocabulary size 258)");
  // Unknown model: 404 model_not_found.
  auto unknown = f.post("/v1/completions", json{{"model", "gpt-9"}, {"prompt", "x"}});
  expect_error(unknown, 404, "invalid_request_error", "The model `gpt-9` does not exist");
  EXPECT_EQ(unknown.second["error"]["code"], "model_not_found");
  EXPECT_EQ(unknown.second["error"]["param"], "model");
  // Prompt longer than the context (256), and prompt + max_tokens over it.
  auto too_long = f.post("/v1/completions", json{{"prompt", std::string(300, 'a')}});
  expect_error(too_long, 400, "invalid_request_error", "maximum context length is 256 tokens");
  EXPECT_EQ(too_long.second["error"]["code"], "context_length_exceeded");
  expect_error(f.post("/v1/completions", json{{"prompt", std::string(200, 'a')}, {"max_tokens", 100}}), 400,
               "invalid_request_error", "you requested 301 tokens (201 in the prompt, 100 for the completion)");
  // Routes and methods.
  expect_error(f.get("/v1/nothing"), 404, "not_found_error", "Unknown route: GET /v1/nothing");
  expect_error(f.get("/v1/completions"), 405, "invalid_request_error", "Method GET is not allowed");
  // The server is still up and serving.
  EXPECT_EQ(f.post("/v1/completions", json{{"prompt", "ok"}, {"max_tokens", 2}}).first, 200);
  EXPECT_EQ(f.server().counters().num_http_errors_5xx, 0);
  EXPECT_EQ(f.server().counters().num_http_errors_4xx, 14);
}

TEST(HttpErrors, ApiKeyGuardsEveryRouteButHealth) {
  server::ServerConfig sc;
  sc.api_key = "sekret";
  ServerFixture f(sc);
  const json req = {{"prompt", "x"}, {"max_tokens", 1}};
  auto missing = f.post("/v1/completions", req);
  expect_error(missing, 401, "authentication_error", "Missing API key");
  EXPECT_EQ(missing.second["error"]["code"], "invalid_api_key");
  expect_error(f.post("/v1/completions", req, {{"Authorization", "Bearer wrong!"}}), 401,
               "authentication_error", "Incorrect API key");
  expect_error(f.get("/v1/models"), 401, "authentication_error", "Missing API key");
  EXPECT_EQ(f.post("/v1/completions", req, {{"Authorization", "Bearer sekret"}}).first, 200);
  EXPECT_EQ(f.get("/health").first, 200);
  // Issue 30, finding 13: the key covers every route but /health.
  expect_error(f.post("/tokenize", json{{"prompt", "x"}}), 401, "authentication_error", "Missing API key");
  expect_error(f.post("/detokenize", json{{"tokens", {1}}}), 401, "authentication_error", "Missing API key");
  EXPECT_EQ(f.get("/metrics").first, 401);
  EXPECT_EQ(f.get("/metrics", {{"Authorization", "Bearer sekret"}}).first, 200);
  EXPECT_EQ(f.post("/tokenize", json{{"prompt", "x"}}, {{"Authorization", "Bearer sekret"}}).first, 200);
  server::ServerConfig open_metrics = sc;
  open_metrics.metrics_without_key = true;
  ServerFixture g(open_metrics);
  EXPECT_FALSE(g.get_text("/metrics").empty());
  EXPECT_EQ(g.post("/tokenize", json{{"prompt", "x"}}).first, 401);
}

TEST(HttpErrors, EngineFailuresStayWithTheirRequest) {
  FakeEngineConfig ec;
  ec.step_delay = std::chrono::milliseconds(2);
  ServerFixture f({}, ec);
  expect_error(f.post("/v1/completions", json{{"prompt", "REJECT me"}}), 400, "invalid_request_error",
               "prompt rejected by the fake engine");
  expect_error(f.post("/v1/completions", json{{"prompt", "CRASH"}, {"max_tokens", 10}}), 500, "server_error",
               "injected failure (CRASH)");
  expect_error(f.post("/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", "TEMPLATE_FAIL"}}}}}),
               400, "invalid_request_error", "Cannot apply the chat template: template refused");
  // A failing stream ends with an error event and [DONE]; a healthy one beside it completes.
  ServerFixture::SseResult bad, good;
  std::thread t1([&] {
    bad = f.post_stream("/v1/completions", json{{"prompt", "CRASH"}, {"max_tokens", 10}, {"stream", true}});
  });
  std::thread t2([&] {
    good = f.post_stream("/v1/completions", json{{"prompt", "fine"}, {"max_tokens", 30}, {"stream", true}});
  });
  t1.join();
  t2.join();
  ASSERT_GE(bad.data.size(), 2u);
  EXPECT_EQ(bad.data.back(), "[DONE]");
  EXPECT_EQ(json::parse(bad.data[bad.data.size() - 2])["error"]["type"], "server_error");
  ASSERT_GE(good.data.size(), 2u);
  EXPECT_EQ(json::parse(good.data[good.data.size() - 2])["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(f.engine().num_blocks_in_use(), 0);
}

TEST(HttpErrors, TooManyRequestsInFlightGets429) {
  FakeEngineConfig ec;
  ec.step_delay = std::chrono::milliseconds(5);
  server::ServerConfig sc;
  sc.max_queued_requests = 1;
  ServerFixture f(sc, ec);
  std::thread holder([&] { f.post("/v1/completions", json{{"prompt", "a"}, {"max_tokens", 60}}); });
  ASSERT_TRUE(wait_until([&] { return f.engine().num_submitted() > 0; }));
  auto got = f.post("/v1/completions", json{{"prompt", "b"}, {"max_tokens", 1}});
  expect_error(got, 429, "rate_limit_error", "Too many requests in flight (limit 1)");
  holder.join();
  // The holder's slot is released after its last byte is written, which the client can see first.
  ASSERT_TRUE(wait_until([&] { return f.server().counters().num_requests_in_flight == 0; }));
  EXPECT_EQ(f.post("/v1/completions", json{{"prompt", "b"}, {"max_tokens", 1}}).first, 200);
}

TEST(HttpErrors, DrainingServerRefusesNewWork) {
  ServerFixture f;
  std::thread stopper([&] { f.server().shutdown(std::chrono::milliseconds(0)); });
  stopper.join();
  f.join();
  // The listener is closed: the client cannot connect at all.
  EXPECT_EQ(f.post("/v1/completions", json{{"prompt", "x"}}).first, -1);
}

}  // namespace
}  // namespace tessera::testing
