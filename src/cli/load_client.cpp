// The network side of the load generator: one streaming request per thread (httplib client with a
// content receiver that splits SSE lines), dispatched at the arrival times under a concurrency cap.
#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "cli/load_gen.h"

namespace tessera::cli {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

httplib::Headers auth_headers(const LoadConfig& c) {
  httplib::Headers h;
  if (!c.api_key.empty()) h.emplace("Authorization", "Bearer " + c.api_key);
  return h;
}

RequestRecord run_one(const LoadConfig& c, const std::string& model, const BenchPrompt& prompt) {
  RequestRecord rec;
  const int32_t max_tokens = prompt.max_tokens > 0 ? prompt.max_tokens : c.output_len;
  // ignore_eos and min_tokens = max_tokens ask the same thing two ways (see load_gen.h).
  json body = {{"model", model},          {"max_tokens", max_tokens}, {"min_tokens", max_tokens},
               {"temperature", 0.0},      {"ignore_eos", true},       {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (c.endpoint.find("chat") != std::string::npos) {
    body["messages"] = json::array({{{"role", "user"}, {"content", prompt.text}}});
  } else {
    body["prompt"] = prompt.text;
  }
  body.update(c.extra_body);  // --extra-body: server-specific fields, last so they can override
  httplib::Client client(c.base_url);
  client.set_connection_timeout(30);
  client.set_read_timeout(c.timeout_s);
  httplib::Request req;
  req.method = "POST";
  req.path = c.endpoint;
  req.headers = auth_headers(c);
  req.set_header("Content-Type", "application/json");
  req.body = body.dump();
  std::string pending, error_body;
  int32_t num_chunks = 0, usage_completion = -1;
  bool done = false;
  const Clock::time_point start = Clock::now();
  Clock::time_point last = start;
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    pending.append(data, len);
    size_t pos;
    while ((pos = pending.find('\n')) != std::string::npos) {
      std::string line = pending.substr(0, pos);
      pending.erase(0, pos + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.rfind("data:", 0) != 0) {
        if (!line.empty() && line[0] != ':') error_body += line;
        continue;
      }
      std::string payload = line.substr(5);
      if (!payload.empty() && payload[0] == ' ') payload.erase(0, 1);
      if (payload == "[DONE]") {
        done = true;
        continue;
      }
      json chunk = json::parse(payload, nullptr, false);
      if (chunk.is_discarded()) continue;
      if (chunk.contains("error")) {
        rec.error = "stream error: " + chunk["error"].value("message", std::string("?")).substr(0, 80);
        continue;
      }
      if (chunk.contains("usage") && chunk["usage"].is_object()) {
        rec.prompt_tokens = chunk["usage"].value("prompt_tokens", 0);
        usage_completion = chunk["usage"].value("completion_tokens", -1);
      }
      if (!chunk.contains("choices") || !chunk["choices"].is_array() || chunk["choices"].empty()) continue;
      const json& choice = chunk["choices"][0];
      std::string text;
      if (choice.contains("text") && choice["text"].is_string()) text = choice["text"];
      if (choice.contains("delta") && choice["delta"].contains("content") && choice["delta"]["content"].is_string()) {
        text = choice["delta"]["content"];
      }
      if (text.empty()) continue;
      const Clock::time_point now = Clock::now();
      if (num_chunks == 0) {
        rec.ttft_ms = ms_between(start, now);
      } else {
        rec.itl_ms.push_back(ms_between(last, now));
      }
      last = now;
      ++num_chunks;
    }
    return true;
  };
  httplib::Result res = client.send(req);
  rec.e2e_ms = ms_between(start, Clock::now());
  if (!res) {
    rec.error = "connection: " + httplib::to_string(res.error());
  } else if (res->status != 200) {
    rec.error = "HTTP " + std::to_string(res->status);
  } else if (rec.error.empty() && (!done || num_chunks == 0)) {
    rec.error = "stream ended without [DONE] or text";
  }
  rec.output_tokens = usage_completion >= 0 ? usage_completion : num_chunks;
  rec.ok = rec.error.empty();
  return rec;
}

}  // namespace

std::string discover_model(const LoadConfig& c) {
  httplib::Client client(c.base_url);
  client.set_connection_timeout(10);
  client.set_read_timeout(30);
  auto res = client.Get("/v1/models", auth_headers(c));
  if (!res || res->status != 200) return {};
  const json j = json::parse(res->body, nullptr, false);
  if (j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty()) return {};
  return j["data"][0].value("id", std::string());
}

std::vector<RequestRecord> run_load(const LoadConfig& c, const std::vector<BenchPrompt>& prompts, double* duration_s) {
  const std::string model = c.model.empty() ? discover_model(c) : c.model;
  const std::vector<double> offsets =
      arrival_offsets(static_cast<int32_t>(prompts.size()), c.request_rate, c.burstiness, c.seed);
  std::vector<RequestRecord> records(prompts.size());
  std::mutex mu;
  std::condition_variable cv;
  int32_t in_flight = 0;
  Clock::time_point last_finish;
  std::vector<std::thread> threads;
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(offsets[i])));
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return c.max_concurrency <= 0 || in_flight < c.max_concurrency; });
      ++in_flight;
    }
    threads.emplace_back([&, i] {
      records[i] = run_one(c, model, prompts[i]);
      std::lock_guard<std::mutex> lock(mu);
      --in_flight;
      last_finish = std::max(last_finish, Clock::now());
      cv.notify_all();
    });
  }
  for (std::thread& t : threads) t.join();
  *duration_s = std::chrono::duration<double>(last_finish - start).count();
  return records;
}

}  // namespace tessera::cli
