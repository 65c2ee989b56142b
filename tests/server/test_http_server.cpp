// The HTTP server over loopback against the FakeEngine: completions and chat, JSON and SSE,
// n > 1, stop strings, EOS, seeds, usage, logprobs, echo, metrics, disconnects, shutdown.
#include <gtest/gtest.h>

#include <atomic>
#include <random>

#include "server_fixture.h"

namespace tessera::testing {
namespace {

std::string concat_stream_text(const ServerFixture::SseResult& r, int index, bool chat) {
  std::string text;
  for (const std::string& d : r.data) {
    if (d == "[DONE]") continue;
    const json j = json::parse(d);
    for (const json& c : j["choices"]) {
      if (c["index"] != index) continue;
      if (chat) {
        if (c["delta"].contains("content")) text += c["delta"]["content"].get<std::string>();
      } else {
        text += c["text"].get<std::string>();
      }
    }
  }
  return text;
}

TEST(HttpServer, CompletionGreedyUsageAndLength) {
  ServerFixture f;
  auto [status, body] = f.post("/v1/completions",
                               json{{"model", "fake-model"}, {"prompt", "abc"}, {"max_tokens", 5}, {"temperature", 0}});
  ASSERT_EQ(status, 200) << body.dump();
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["model"], "fake-model");
  EXPECT_EQ(body["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  ASSERT_EQ(body["choices"].size(), 1u);
  EXPECT_EQ(body["choices"][0]["text"], "abcab");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["prompt_tokens"], 4);  // BOS + 3 bytes
  EXPECT_EQ(body["usage"]["completion_tokens"], 5);
  EXPECT_EQ(body["usage"]["total_tokens"], 9);
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

TEST(HttpServer, StopStringsEosAndPrefixCacheUsage) {
  ServerFixture f;
  auto [s1, stop] = f.post("/v1/completions", json{{"prompt", "hello world"}, {"max_tokens", 20},
                                                   {"temperature", 0}, {"stop", {"wor", "zz"}}});
  ASSERT_EQ(s1, 200);
  EXPECT_EQ(stop["choices"][0]["text"], "hello ");
  EXPECT_EQ(stop["choices"][0]["finish_reason"], "stop");
  auto [s2, eos] = f.post("/v1/completions", json{{"prompt", "ab#"}, {"max_tokens", 20}, {"temperature", 0}});
  ASSERT_EQ(s2, 200);
  EXPECT_EQ(eos["choices"][0]["text"], "ab");
  EXPECT_EQ(eos["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(eos["usage"]["completion_tokens"], 3);
  const std::string long_prompt(40, 'q');
  f.post("/v1/completions", json{{"prompt", long_prompt}, {"max_tokens", 1}});
  auto [s3, cached] = f.post("/v1/completions", json{{"prompt", long_prompt}, {"max_tokens", 1}});
  ASSERT_EQ(s3, 200);
  EXPECT_EQ(cached["usage"]["prompt_tokens"], 41);
  EXPECT_EQ(cached["usage"]["prompt_tokens_details"]["cached_tokens"], 32);
}

TEST(HttpServer, NSamplesListPromptsTokenIdsEchoAndSeeds) {
  ServerFixture f;
  const json req = {{"prompt", {"ab", "cd"}}, {"n", 2}, {"max_tokens", 4}, {"seed", 7}};
  auto [s1, a] = f.post("/v1/completions", req);
  auto [s2, b] = f.post("/v1/completions", req);
  ASSERT_EQ(s1, 200);
  ASSERT_EQ(a["choices"].size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(a["choices"][i]["index"], i);
    EXPECT_EQ(a["choices"][i]["text"].get<std::string>().size(), 4u);
    EXPECT_EQ(a["choices"][i]["text"], b["choices"][i]["text"]);  // same seed, same text
  }
  EXPECT_NE(a["choices"][0]["text"], a["choices"][1]["text"]);  // samples differ
  EXPECT_EQ(a["usage"]["prompt_tokens"], 6);
  EXPECT_EQ(a["usage"]["completion_tokens"], 16);
  auto [s3, ids] = f.post("/v1/completions", json{{"prompt", {97, 98}}, {"max_tokens", 3}, {"temperature", 0}});
  ASSERT_EQ(s3, 200);
  EXPECT_EQ(ids["choices"][0]["text"], "aba");
  EXPECT_EQ(ids["usage"]["prompt_tokens"], 2);  // ids are used as given (no BOS added)
  auto [s4, echo] = f.post("/v1/completions",
                           json{{"prompt", "xy"}, {"max_tokens", 2}, {"temperature", 0}, {"echo", true}});
  ASSERT_EQ(s4, 200);
  EXPECT_EQ(echo["choices"][0]["text"], "xyxy");
}

TEST(HttpServer, CompletionLogprobs) {
  ServerFixture f;
  auto [status, body] = f.post("/v1/completions",
                               json{{"prompt", "AB"}, {"max_tokens", 2}, {"temperature", 0}, {"logprobs", 2}});
  ASSERT_EQ(status, 200) << body.dump();
  const json& lp = body["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json({"A", "B"}));
  EXPECT_EQ(lp["token_logprobs"], json({-0.5, -0.5}));
  EXPECT_EQ(lp["top_logprobs"][0], json({{"A", -0.5}, {"B", -1.5}}));
  EXPECT_EQ(lp["text_offset"], json({0, 1}));
}

TEST(HttpServer, ChatNonStreamingUsesTheTemplate) {
  ServerFixture f;
  auto [status, body] = f.post("/v1/chat/completions",
                               json{{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                    {"max_tokens", 4}, {"temperature", 0}});
  ASSERT_EQ(status, 200) << body.dump();
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "<|us");  // greedy fake echoes the prompt
  const std::string rendered = "<|user|>\nhi\n<|assistant|>\n";
  EXPECT_EQ(body["usage"]["prompt_tokens"], static_cast<int>(rendered.size()) + 1);
  // Without max_tokens the chat default is the rest of the context.
  auto [s2, rest] = f.post("/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                                        {"temperature", 0}});
  ASSERT_EQ(s2, 200);
  EXPECT_EQ(rest["usage"]["completion_tokens"], 256 - static_cast<int>(rendered.size()) - 1);
  EXPECT_EQ(rest["choices"][0]["finish_reason"], "length");
}

TEST(HttpServer, CompletionStreamMatchesNonStreamAndEndsWithDone) {
  ServerFixture f;
  const json req = {{"prompt", "stream me"}, {"max_tokens", 12}, {"temperature", 0}};
  auto [status, whole] = f.post("/v1/completions", req);
  ASSERT_EQ(status, 200);
  json sreq = req;
  sreq["stream"] = true;
  sreq["stream_options"] = {{"include_usage", true}};
  const ServerFixture::SseResult r = f.post_stream("/v1/completions", sreq);
  ASSERT_EQ(r.status, 200);
  ASSERT_GE(r.data.size(), 3u);
  EXPECT_EQ(r.data.back(), "[DONE]");
  EXPECT_EQ(concat_stream_text(r, 0, false), whole["choices"][0]["text"]);
  const json usage = json::parse(r.data[r.data.size() - 2]);
  EXPECT_EQ(usage["choices"].size(), 0u);
  EXPECT_EQ(usage["usage"]["completion_tokens"], 12);
  EXPECT_EQ(usage["usage"]["prompt_tokens"], 10);
  const json last_choice_chunk = json::parse(r.data[r.data.size() - 3]);
  EXPECT_EQ(last_choice_chunk["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(last_choice_chunk["usage"].is_null());
  EXPECT_EQ(r.raw.find("\n\ndata: [DONE]\n\n"), r.raw.size() - 16);
}

TEST(HttpServer, ChatStreamRoleFirstThenContentThenFinish) {
  ServerFixture f;
  const ServerFixture::SseResult r = f.post_stream(
      "/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", "yo"}}}}, {"max_tokens", 6},
                                   {"temperature", 0}, {"stream", true}, {"n", 2}});
  ASSERT_EQ(r.status, 200);
  const json first = json::parse(r.data[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_EQ(concat_stream_text(r, 0, true), "<|user");
  EXPECT_EQ(concat_stream_text(r, 1, true), "<|user");
  int finishes = 0;
  for (const std::string& d : r.data) {
    if (d == "[DONE]") continue;
    if (!json::parse(d)["choices"][0]["finish_reason"].is_null()) ++finishes;
  }
  EXPECT_EQ(finishes, 2);
  EXPECT_EQ(r.data.back(), "[DONE]");
}

TEST(HttpServer, ModelsHealthTokenizeDetokenizeMetrics) {
  ServerFixture f;
  auto [s1, models] = f.get("/v1/models");
  ASSERT_EQ(s1, 200);
  EXPECT_EQ(models["data"][0]["id"], "fake-model");
  EXPECT_EQ(models["data"][0]["max_model_len"], 256);
  EXPECT_EQ(f.get("/v1/models/fake-model").first, 200);
  EXPECT_EQ(f.get("/v1/models/other").second["error"]["code"], "model_not_found");
  auto [s2, health] = f.get("/health");
  EXPECT_EQ(s2, 200);
  EXPECT_EQ(health["status"], "ok");
  auto [s3, tok] = f.post("/tokenize", json{{"prompt", "hi"}});
  ASSERT_EQ(s3, 200);
  EXPECT_EQ(tok["tokens"], json({256, 104, 105}));
  EXPECT_EQ(tok["count"], 3);
  auto [s4, detok] = f.post("/detokenize", json{{"tokens", {104, 105}}});
  ASSERT_EQ(s4, 200);
  EXPECT_EQ(detok["prompt"], "hi");
  EXPECT_EQ(f.post("/detokenize", json{{"tokens", {9999}}}).first, 400);
  f.post("/v1/completions", json{{"prompt", "abc"}, {"max_tokens", 5}});
  const std::string metrics = f.get_text("/metrics");
  EXPECT_NE(metrics.find("tessera:prompt_tokens_total{model_name=\"fake-model\"} 4\n"), std::string::npos);
  EXPECT_NE(metrics.find("tessera:generation_tokens_total{model_name=\"fake-model\"} 5\n"), std::string::npos);
  EXPECT_NE(metrics.find("tessera:num_requests_running{model_name=\"fake-model\"} 0\n"), std::string::npos);
  EXPECT_NE(metrics.find("tessera:time_to_first_token_seconds_count{model_name=\"fake-model\"} 1\n"),
            std::string::npos);
}

TEST(HttpServer, ClientDisconnectMidStreamAbortsAndFreesBlocks) {
  FakeEngineConfig ec;
  ec.step_delay = std::chrono::milliseconds(5);
  ServerFixture f({}, ec);
  const ServerFixture::SseResult r = f.post_stream(
      "/v1/completions", json{{"prompt", "long"}, {"max_tokens", 200}, {"stream", true}}, /*hang_up_after=*/3);
  EXPECT_EQ(r.data.size(), 3u);
  for (int i = 0; i < 400 && f.engine().num_unfinished_requests() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(f.engine().num_unfinished_requests(), 0);
  EXPECT_EQ(f.engine().num_aborted(), 1);
  EXPECT_EQ(f.engine().num_blocks_in_use(), 0);
  EXPECT_EQ(f.server().counters().num_client_disconnects, 1);
  EXPECT_EQ(f.server().counters().num_requests_in_flight, 0);
  // The server is still fine.
  EXPECT_EQ(f.post("/v1/completions", json{{"prompt", "ok"}, {"max_tokens", 2}}).first, 200);
}

TEST(HttpServer, DisconnectWhileQueuedIsDetectedByKeepAlive) {
  FakeEngineConfig ec;
  ec.max_num_seqs = 1;  // the second request waits behind the first
  ec.step_delay = std::chrono::milliseconds(5);
  server::ServerConfig sc;
  sc.keep_alive_interval_ms = 50;
  ServerFixture f(sc, ec);
  std::thread blocker([&] { f.post("/v1/completions", json{{"prompt", "a"}, {"max_tokens", 120}}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // Hang up as soon as headers + the first bytes arrive (nothing but keep-alive comments).
  f.send("POST", "/v1/completions", json{{"prompt", "b"}, {"max_tokens", 100}, {"stream", true}}.dump(), {},
         [](std::string_view) { return false; });
  blocker.join();
  for (int i = 0; i < 400 && f.engine().num_unfinished_requests() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(f.engine().num_aborted(), 1);
  EXPECT_EQ(f.engine().num_blocks_in_use(), 0);
}

TEST(HttpServer, NonStreamingClientThatGivesUpHasItsRequestAborted) {
  FakeEngineConfig ec;
  ec.step_delay = std::chrono::milliseconds(40);
  ServerFixture f({}, ec);
  server::ClientRequest req;
  req.method = "POST";
  req.target = "/v1/completions";
  // 250 steps of >= 40 ms: >= 10 s, so the request cannot end by itself before the server notices
  // the hang-up, however slow the host; num_aborted() == 1 says it was cut, not finished.
  req.body = json{{"prompt", "long"}, {"max_tokens", 250}}.dump();
  server::ClientTimeouts timeouts;
  timeouts.read = std::chrono::milliseconds(200);
  const server::ClientResponse res = server::http_request("127.0.0.1", f.port(), req, timeouts);
  EXPECT_EQ(res.status, -1) << res.error;  // the client timed out and closed
  const auto hung_up = std::chrono::steady_clock::now();
  ASSERT_TRUE(wait_until([&] { return f.engine().num_unfinished_requests() == 0; }));
  // Noticed long before the request's end (a quiet host: ~10 ms; 3 s of room for a loaded one).
  EXPECT_LT(std::chrono::steady_clock::now() - hung_up, std::chrono::seconds(3));
  EXPECT_EQ(f.engine().num_aborted(), 1);
  EXPECT_EQ(f.engine().num_blocks_in_use(), 0);
  EXPECT_EQ(f.server().counters().num_client_disconnects, 1);
  ASSERT_TRUE(wait_until([&] { return f.server().counters().num_requests_in_flight == 0; }));
}

TEST(HttpServer, ConcurrentStreamsWithRandomDisconnects) {
  FakeEngineConfig ec;
  ec.step_delay = std::chrono::milliseconds(2);
  // Room for hung-up requests that run >= 6 s unless aborted: the engine must not be able to
  // finish one before the server notices its hang-up, even when the server lags the engine (an
  // ASan build on a loaded 2-core host streamed 7 of 16 400-ms requests to the end first).
  ec.context_length = 4096;
  ec.num_kv_blocks = 4096;
  ServerFixture f({}, ec);
  constexpr int kClients = 64;
  std::atomic<int> num_ok{0}, num_hung_up{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      const bool hang_up = i % 4 == 0;
      // Hung-up requests are long, so they cannot end before the server notices the hang-up.
      const int max_tokens = hang_up ? 3000 : 20 + i;
      std::mt19937 rng(i);
      const int hang_up_after = hang_up ? 1 + static_cast<int>(rng() % 10) : -1;
      const std::string prompt = "client " + std::to_string(i) + " ";
      const ServerFixture::SseResult r = f.post_stream(
          "/v1/completions", json{{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"stream", true}},
          hang_up_after);
      if (hang_up) {
        num_hung_up += 1;
        return;
      }
      std::string want;
      for (int k = 0; k < max_tokens; ++k) want += prompt[k % prompt.size()];
      if (r.status == 200 && !r.data.empty() && r.data.back() == "[DONE]" &&
          concat_stream_text(r, 0, false) == want) {
        num_ok += 1;
      } else {
        ADD_FAILURE() << "client " << i << " status " << r.status << " events " << r.data.size() << " raw "
                      << r.raw.substr(0, 300);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(num_ok.load(), kClients * 3 / 4);
  EXPECT_EQ(num_hung_up.load(), kClients / 4);
  for (int i = 0; i < 400 && f.engine().num_unfinished_requests() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(f.engine().num_unfinished_requests(), 0);
  EXPECT_EQ(f.engine().num_blocks_in_use(), 0);
  EXPECT_EQ(f.engine().num_aborted(), kClients / 4);
  const std::string metrics = f.get_text("/metrics");
  EXPECT_NE(metrics.find("tessera:kv_cache_blocks_free{model_name=\"fake-model\"} 4096\n"), std::string::npos);
  EXPECT_NE(metrics.find("tessera:request_aborted_total{model_name=\"fake-model\"} 16\n"), std::string::npos);
  EXPECT_NE(metrics.find("tessera:requests_finished_total{model_name=\"fake-model\"} 64\n"), std::string::npos);
}

TEST(HttpServer, HealthIs503WhileTheModelLoadsThen200) {
  server::ServerConfig config;
  config.served_model_name = "smol";
  ServerFixture f(config, {}, /*attach_engine=*/false);
  const server::ClientResponse health = f.send("GET", "/health", "");
  EXPECT_EQ(health.status, 503);
  EXPECT_EQ(health.body, R"({"status":"loading"})");
  bool retry_after = false;
  for (const auto& [name, value] : health.headers) retry_after |= name == "Retry-After" && value == "1";
  EXPECT_TRUE(retry_after);
  // Every other route waits for the model too, and nothing reaches the (not yet attached) engine.
  for (const char* path : {"/v1/models", "/v1/loads", "/metrics", "/server_info"}) {
    const server::ClientResponse res = f.send("GET", path, "");
    EXPECT_EQ(res.status, 503) << path;
    EXPECT_NE(res.body.find("The model is loading"), std::string::npos) << path << ": " << res.body;
  }
  const auto [status, body] = f.post("/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 2}});
  EXPECT_EQ(status, 503);
  EXPECT_EQ(body["error"]["code"], "service_unavailable") << body.dump();
  EXPECT_EQ(f.engine().num_unfinished_requests(), 0);

  f.attach();
  EXPECT_EQ(f.send("GET", "/health", "").status, 200);
  const auto [models_status, models] = f.get("/v1/models");
  EXPECT_EQ(models_status, 200);
  EXPECT_EQ(models["data"][0]["id"], "smol");
  const auto [gen_status, gen] = f.post("/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 2}, {"temperature", 0}});
  EXPECT_EQ(gen_status, 200) << gen.dump();
  EXPECT_EQ(gen["choices"][0]["text"], "hi");
}

TEST(HttpServer, GracefulShutdownFinishesInFlightStreams) {
  FakeEngineConfig ec;
  ec.step_delay = std::chrono::milliseconds(5);
  ServerFixture f({}, ec);
  ServerFixture::SseResult r;
  std::thread client([&] {
    r = f.post_stream("/v1/completions", json{{"prompt", "abc"}, {"max_tokens", 40}, {"temperature", 0},
                                             {"stream", true}});
  });
  ASSERT_TRUE(wait_until([&] { return f.engine().num_submitted() > 0; }));
  f.server().shutdown(std::chrono::seconds(10));
  client.join();
  f.join();
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.data.back(), "[DONE]");
  EXPECT_EQ(concat_stream_text(r, 0, false).size(), 40u);
  EXPECT_EQ(f.engine().num_aborted(), 0);
}

TEST(HttpServer, ShutdownPastGraceAbortsWithAnErrorEvent) {
  FakeEngineConfig ec;
  ec.step_delay = std::chrono::milliseconds(5);
  ServerFixture f({}, ec);
  ServerFixture::SseResult r;
  std::thread client([&] {
    r = f.post_stream("/v1/completions", json{{"prompt", "abc"}, {"max_tokens", 250}, {"stream", true}});
  });
  ASSERT_TRUE(wait_until([&] { return f.engine().num_submitted() > 0; }));
  f.server().shutdown(std::chrono::milliseconds(50));
  client.join();
  f.join();
  ASSERT_GE(r.data.size(), 2u);
  EXPECT_EQ(r.data.back(), "[DONE]");
  const json err = json::parse(r.data[r.data.size() - 2]);
  EXPECT_EQ(err["error"]["type"], "server_error");
  EXPECT_EQ(f.engine().num_aborted(), 1);
}

}  // namespace
}  // namespace tessera::testing
