// Test fixture: a FakeEngine behind a real HttpServer on a free loopback port, plus small client
// helpers over server/http_client.h (JSON POST, SSE POST that can hang up after k events).
#pragma once
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "fake_engine.h"
#include "server/http_client.h"
#include "server/http_server.h"

namespace tessera::testing {

using json = nlohmann::json;

// Polls `pred` every 2 ms for up to `timeout`; true once it holds.
template <typename Pred>
bool wait_until(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

class ServerFixture {
 public:
  explicit ServerFixture(server::ServerConfig config = {}, FakeEngineConfig engine_config = {},
                         bool attach_engine = true)
      : engine_(std::make_unique<FakeEngine>(engine_config)) {
    config.host = "127.0.0.1";
    config.port = 0;
    server_ = attach_engine ? std::make_unique<server::HttpServer>(*engine_, config)
                            : std::make_unique<server::HttpServer>(config);  // "loading" until attach()
    port_ = server_->bind().value();
    thread_ = std::thread([this] { server_->listen(); });
  }
  // The model "finished loading" (for a fixture made with attach_engine = false).
  void attach() { server_->attach(*engine_); }
  ~ServerFixture() {
    server_->stop();
    if (thread_.joinable()) thread_.join();
  }

  FakeEngine& engine() { return *engine_; }
  server::HttpServer& server() { return *server_; }
  int port() const { return port_; }
  void join() {
    if (thread_.joinable()) thread_.join();
  }

  using Headers = std::vector<std::pair<std::string, std::string>>;

  // One request on a fresh connection; `on_body` (optional) receives the body as it arrives.
  server::ClientResponse send(const std::string& method, const std::string& path, const std::string& body,
                              const Headers& headers = {}, const server::BodyCallback& on_body = {}) const {
    server::ClientRequest req;
    req.method = method;
    req.target = path;
    req.headers = headers;
    req.body = body;
    return server::http_request("127.0.0.1", port_, req, {}, on_body);
  }

  // POST a raw body; returns {status, parsed body or the raw text under "raw"}.
  std::pair<int, json> post(const std::string& path, const std::string& body, const Headers& headers = {}) const {
    const server::ClientResponse res = send("POST", path, body, headers);
    if (res.status < 0) return {-1, json{{"raw", res.error}}};
    return {res.status, parse(res.body)};
  }
  std::pair<int, json> post(const std::string& path, const json& body, const Headers& headers = {}) const {
    return post(path, body.dump(), headers);
  }
  std::pair<int, json> get(const std::string& path, const Headers& headers = {}) const {
    const server::ClientResponse res = send("GET", path, "", headers);
    if (res.status < 0) return {-1, json{{"raw", res.error}}};
    return {res.status, parse(res.body)};
  }
  std::string get_text(const std::string& path) const { return send("GET", path, "").body; }

  struct SseResult {
    int status = -1;
    std::vector<std::string> data;  // payloads of "data: " lines, in order ("[DONE]" included)
    std::string raw;                // everything received
  };
  // Streams a POST; hangs up after `hang_up_after` data events when >= 0.
  SseResult post_stream(const std::string& path, const json& body, int hang_up_after = -1,
                        const Headers& headers = {}) const {
    SseResult out;
    std::string pending;
    const server::ClientResponse res = send("POST", path, body.dump(), headers, [&](std::string_view piece) {
      out.raw.append(piece);
      pending.append(piece);
      size_t pos;
      while ((pos = pending.find("\n\n")) != std::string::npos) {
        const std::string event = pending.substr(0, pos);
        pending.erase(0, pos + 2);
        if (event.rfind("data: ", 0) == 0) out.data.push_back(event.substr(6));
        if (hang_up_after >= 0 && static_cast<int>(out.data.size()) >= hang_up_after) return false;
      }
      return true;
    });
    out.status = res.status;
    if (!res.error.empty()) out.raw += "client error: " + res.error;
    return out;
  }

  static json parse(const std::string& body) {
    try {
      return json::parse(body);
    } catch (...) {
      return json{{"raw", body}};
    }
  }

 private:
  std::unique_ptr<FakeEngine> engine_;
  std::unique_ptr<server::HttpServer> server_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace tessera::testing
