// The HTTP layer on the wire, over raw sockets against a FakeEngine: header and body deadlines,
// body limits for every framing, conflicting framing, pipelining, and a drain that closes idle
// connections. (tests/e2e/test_http_limits.py checks the same against the real model at scale.)
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include <fmt/format.h>

#include "server_fixture.h"

namespace tessera::testing {
namespace {

using Clock = std::chrono::steady_clock;

class RawSocket {
 public:
  explicit RawSocket(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    timeval tv{5, 0};  // no test waits longer for a byte
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~RawSocket() { ::close(fd_); }
  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  bool send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  // Everything until the server closes (or 5 s of silence).
  std::string read_all() {
    std::string out;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return out;
      out.append(buf, static_cast<size_t>(n));
    }
  }

 private:
  int fd_;
  bool connected_ = false;
};

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

TEST(HttpWire, HeadersThatTrickleAreCutAtTheDeadline) {
  server::ServerConfig sc;
  sc.header_timeout_ms = 300;
  ServerFixture f(sc);
  RawSocket s(f.port());
  ASSERT_TRUE(s.connected());
  const auto start = Clock::now();
  s.send("GET /health HTTP/1.1\r\n");
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    s.send("X-Slow: 1\r\n");
  }
  EXPECT_EQ(s.read_all(), "");  // closed without an answer
  const auto waited = Clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(290));
  EXPECT_LT(waited, std::chrono::milliseconds(1500));
  EXPECT_EQ(f.get("/health").first, 200);
}

TEST(HttpWire, BodyThatNeverArrivesIs408) {
  server::ServerConfig sc;
  sc.body_timeout_ms = 300;
  ServerFixture f(sc);
  RawSocket s(f.port());
  s.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\"");
  const std::string got = s.read_all();
  EXPECT_EQ(got.rfind("HTTP/1.1 408 Request Timeout\r\n", 0), 0u) << got;
  EXPECT_NE(got.find("The request body did not arrive within 0.3 s"), std::string::npos) << got;
  EXPECT_EQ(f.engine().num_submitted(), 0);
}

TEST(HttpWire, BodyLimitsHoldForEveryFraming) {
  server::ServerConfig sc;
  sc.max_body_bytes = 1000;
  ServerFixture f(sc);
  {  // declared too large: refused before a body byte is read
    RawSocket s(f.port());
    s.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n");
    const std::string got = s.read_all();
    EXPECT_EQ(got.rfind("HTTP/1.1 413 Payload Too Large\r\n", 0), 0u) << got;
    EXPECT_NE(got.find("Request body too large (limit 1000 bytes)"), std::string::npos) << got;
    EXPECT_NE(got.find("Connection: close\r\n"), std::string::npos) << got;
  }
  {  // chunked: counted as it arrives
    RawSocket s(f.port());
    std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 3; ++i) req += "190\r\n" + std::string(400, 'a') + "\r\n";
    req += "0\r\n\r\n";
    s.send(req);
    const std::string got = s.read_all();
    EXPECT_EQ(got.rfind("HTTP/1.1 413 Payload Too Large\r\n", 0), 0u) << got;
  }
  {  // chunked within the limit: served
    RawSocket s(f.port());
    const std::string body = R"({"prompt": "abc", "max_tokens": 2})";
    s.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
           fmt::format("{:x}\r\n", body.size()) + body + "\r\n0\r\n\r\n");
    const std::string got = s.read_all();
    EXPECT_EQ(got.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << got;
  }
  EXPECT_EQ(f.engine().num_submitted(), 1);  // only the one within the limit
  {  // two different lengths
    RawSocket s(f.port());
    s.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}");
    const std::string got = s.read_all();
    EXPECT_EQ(got.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << got;
    EXPECT_NE(got.find("Malformed HTTP request"), std::string::npos) << got;
  }
  const server::ServerCounters c = f.server().counters();
  EXPECT_EQ(c.num_http_requests, 1);  // the refused ones never reached the router
  EXPECT_EQ(c.num_http_errors_4xx, 3);
}

TEST(HttpWire, PipelinedRequestsAreAnsweredInOrder) {
  ServerFixture f;
  RawSocket s(f.port());
  const std::string completion = R"({"prompt": "abc", "max_tokens": 3, "temperature": 0})";
  std::string req;
  req += "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  req += fmt::format("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{}", completion.size(), completion);
  req += "GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n";
  req += "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n";
  req += "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  s.send(req);
  const std::string got = s.read_all();
  EXPECT_EQ(count(got, "HTTP/1.1 "), 5u) << got;
  const size_t a = got.find("{\"status\":\"ok\"}"), b = got.find("\"text_completion\""), c = got.find("Unknown route"),
               d = got.find("\"object\":\"list\""), e = got.rfind("{\"status\":\"ok\"}");
  EXPECT_TRUE(a < b && b < c && c < d && d < e && e != a) << got;
}

TEST(HttpWire, DrainClosesIdleConnectionsRefusesWithRetryAfterAndFinishesInFlight) {
  FakeEngineConfig ec;
  ec.step_delay = std::chrono::milliseconds(5);
  ServerFixture f({}, ec);
  RawSocket idle(f.port());
  idle.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string first;
  char buf[4096];
  while (first.find("{\"status\":\"ok\"}") == std::string::npos) {
    const ssize_t n = ::recv(idle.fd(), buf, sizeof(buf), 0);
    ASSERT_GT(n, 0);
    first.append(buf, static_cast<size_t>(n));
  }
  ServerFixture::SseResult stream;
  std::thread client([&] {
    stream = f.post_stream("/v1/completions", json{{"prompt", "abc"}, {"max_tokens", 100}, {"stream", true}});
  });
  ASSERT_TRUE(wait_until([&] { return f.engine().num_submitted() > 0; }));
  std::thread drain([&] { f.server().shutdown(std::chrono::seconds(5)); });
  EXPECT_EQ(idle.read_all(), "");  // the kept-alive connection is closed by the drain
  RawSocket late(f.port());
  late.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string refused = late.read_all();
  EXPECT_EQ(refused.rfind("HTTP/1.1 503 Service Unavailable\r\n", 0), 0u) << refused;
  EXPECT_NE(refused.find("Retry-After: 1\r\n"), std::string::npos) << refused;
  EXPECT_NE(refused.find("Connection: close\r\n"), std::string::npos) << refused;
  EXPECT_EQ(f.post("/v1/completions", json{{"prompt", "x"}}).first, 503);
  client.join();
  drain.join();
  f.join();
  ASSERT_EQ(stream.status, 200);
  EXPECT_EQ(stream.data.back(), "[DONE]");
  EXPECT_EQ(f.engine().num_aborted(), 0);
  EXPECT_EQ(f.engine().num_submitted(), 1);
}

// Issue 28: a client disconnect aborts its request within one engine step. Steps of 200 ms (far
// longer than the server's 50 ms poll): after the hang-up the engine may finish the step it is in,
// but the abort is queued before the next one, so at most one more token is generated for the
// request, streaming or not. Raw sockets, so the hang-up comes right after the 3rd event (the
// client helper reads in 8 KiB pieces). The fake engine counts every token; this request is alone.
TEST(HttpWire, DisconnectAbortsWithinOneStep) {
  constexpr auto kStep = std::chrono::milliseconds(200);
  FakeEngineConfig ec;
  ec.step_delay = kStep;
  ServerFixture f({}, ec);
  for (const bool stream : {true, false}) {
    const int64_t aborted_before = f.engine().num_aborted();
    const std::string body = json{{"prompt", "long"}, {"max_tokens", 100}, {"stream", stream}}.dump();
    int64_t tokens_at_hang_up = 0;
    Clock::time_point hung_up;
    {
      RawSocket s(f.port());
      ASSERT_TRUE(s.send(fmt::format("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                     "Content-Length: {}\r\n\r\n{}", body.size(), body)));
      if (stream) {
        std::string got;
        char buf[4096];
        while (count(got, "data: ") < 3) {
          const ssize_t n = ::recv(s.fd(), buf, sizeof(buf), 0);
          ASSERT_GT(n, 0);
          got.append(buf, static_cast<size_t>(n));
        }
      } else {
        std::this_thread::sleep_for(3 * kStep + kStep / 2);  // gives up in the middle of the 4th step
      }
      tokens_at_hang_up = f.engine().metrics().generation_tokens;
      hung_up = Clock::now();
    }  // closed
    ASSERT_TRUE(wait_until([&] { return f.engine().num_aborted() == aborted_before + 1; }));
    const auto to_abort = Clock::now() - hung_up;
    const int64_t tokens_after = f.engine().metrics().generation_tokens - tokens_at_hang_up;
    EXPECT_GE(tokens_at_hang_up, 3) << stream;
    // "Within one step" is counted in steps: the engine made at most one more token after the
    // hang-up, a measure that stretches with the host (a loaded one runs the server and the
    // engine's steps late alike). The wall-clock bound only catches an abort that waits for
    // something else (a poll interval, the end of the request: 96 more steps, 19 s); it leaves two
    // steps of room for a host whose threads wake late under load (ctest -j2 beside a CPU hog).
    EXPECT_LE(tokens_after, 1) << stream;
    EXPECT_LT(to_abort, 3 * kStep) << stream;
    ASSERT_TRUE(wait_until([&] { return f.server().counters().num_requests_in_flight == 0; }));
    EXPECT_EQ(f.engine().num_blocks_in_use(), 0);
    EXPECT_EQ(f.engine().num_unfinished_requests(), 0);
  }
  EXPECT_EQ(f.server().counters().num_client_disconnects, 2);
}

}  // namespace
}  // namespace tessera::testing
