// The network side of the load generator: one streaming request per thread (server/http_client.h,
// with a body callback that splits SSE lines), dispatched at the arrival times under a concurrency cap.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "cli/load_gen.h"
#include "server/http_client.h"

namespace tessera::cli {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

std::vector<std::pair<std::string, std::string>> auth_headers(const LoadConfig& c) {
  std::vector<std::pair<std::string, std::string>> h;
  if (!c.api_key.empty()) h.emplace_back("Authorization", "Bearer " + c.api_key);
  return h;
}

// GET or POST `path` under the base URL (its path prefix included).
server::ClientResponse send(const LoadConfig& c, const char* method, const std::string& path, std::string body,
                            const server::ClientTimeouts& timeouts, const server::BodyCallback& on_body = {},
                            const std::string& session = "") {
  const std::optional<server::BaseUrl> base = server::parse_base_url(c.base_url);
  if (!base) {
    server::ClientResponse bad;
    bad.error = "not an http:// URL: " + c.base_url;
    return bad;
  }
  server::ClientRequest req;
  req.method = method;
  req.target = base->prefix + path;
  req.headers = auth_headers(c);
  if (!session.empty()) req.headers.emplace_back(c.session_header, session);
  req.body = std::move(body);
  return server::http_request(base->host, base->port, req, timeouts, on_body);
}

RequestRecord run_one(const LoadConfig& c, const std::string& model, const BenchPrompt& prompt) {
  RequestRecord rec;
  const int32_t max_tokens = prompt.max_tokens > 0 ? prompt.max_tokens : c.output_len;
  // ignore_eos and min_tokens = max_tokens ask the same thing two ways (see load_gen.h).
  json body = {{"model", model},          {"max_tokens", max_tokens}, {"min_tokens", max_tokens},
               {"temperature", 0.0},      {"ignore_eos", true},       {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (!prompt.messages.is_null()) {
    body["messages"] = prompt.messages;
  } else if (c.endpoint.find("chat") != std::string::npos) {
    body["messages"] = json::array({{{"role", "user"}, {"content", prompt.text}}});
  } else {
    body["prompt"] = prompt.text;
  }
  body.update(c.extra_body);  // --extra-body: server-specific fields, last so they can override
  std::string pending, error_body;
  int32_t num_chunks = 0, usage_completion = -1;
  bool done = false;
  const Clock::time_point start = Clock::now();
  Clock::time_point last = start;
  const auto on_body = [&](std::string_view data) {
    pending.append(data);
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
  server::ClientTimeouts timeouts;
  timeouts.connect = std::chrono::seconds(30);
  timeouts.read = std::chrono::seconds(c.timeout_s);
  const std::string session = prompt.session >= 0 ? "session-" + std::to_string(prompt.session) : std::string();
  const server::ClientResponse res = send(c, "POST", c.endpoint, body.dump(), timeouts, on_body, session);
  rec.e2e_ms = ms_between(start, Clock::now());
  if (res.status < 0) {
    rec.error = "connection: " + res.error;
  } else if (res.status != 200) {
    rec.error = "HTTP " + std::to_string(res.status);
  } else if (rec.error.empty() && (!done || num_chunks == 0)) {
    rec.error = "stream ended without [DONE] or text";
  }
  rec.output_tokens = usage_completion >= 0 ? usage_completion : num_chunks;
  rec.ok = rec.error.empty();
  return rec;
}

}  // namespace

std::string discover_model(const LoadConfig& c) {
  server::ClientTimeouts timeouts;
  timeouts.connect = std::chrono::seconds(10);
  const server::ClientResponse res = send(c, "GET", "/v1/models", "", timeouts);
  if (res.status != 200) return {};
  const json j = json::parse(res.body, nullptr, false);
  if (j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty()) return {};
  return j["data"][0].value("id", std::string());
}

std::vector<RequestRecord> run_load(const LoadConfig& c, const std::vector<BenchPrompt>& prompts, double* duration_s) {
  const std::string model = c.model.empty() ? discover_model(c) : c.model;
  // A unit is what arrives: one request, or a session's turns sent one after another.
  std::vector<std::pair<size_t, size_t>> units;  // [first, last) prompt indices
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (i > 0 && prompts[i].session >= 0 && prompts[i].session == prompts[i - 1].session) {
      units.back().second = i + 1;
    } else {
      units.emplace_back(i, i + 1);
    }
  }
  const std::vector<double> offsets =
      arrival_offsets(static_cast<int32_t>(units.size()), c.request_rate, c.burstiness, c.seed);
  std::vector<RequestRecord> records(prompts.size());
  std::mutex mu;
  std::condition_variable cv;
  int32_t in_flight = 0;
  Clock::time_point last_finish;
  std::vector<std::thread> threads;
  const Clock::time_point start = Clock::now();
  for (size_t u = 0; u < units.size(); ++u) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(offsets[u])));
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return c.max_concurrency <= 0 || in_flight < c.max_concurrency; });
      ++in_flight;
    }
    threads.emplace_back([&, u] {
      for (size_t i = units[u].first; i < units[u].second; ++i) records[i] = run_one(c, model, prompts[i]);
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
