// The server's life: the listening socket, the I/O threads that run every connection
// (http_connection.cpp), the worker pool that runs handlers which may block, the registry of open
// connections, and the drain. Routing is in routes.cpp, the generate flow in generate_handler.cpp.
#include "server/http_server.h"

#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <condition_variable>
#include <future>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>

#include "server/http_connection.h"
#include "server/server_state.h"
#include "server/worker_pool.h"
#include "util/log.h"

namespace tessera::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

struct HttpServer::Impl final : ConnectionHost {
  ServerState state;
  ConnectionLimits limits;
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  net::steady_timer accept_retry{ioc};
  int bound_port = -1;

  std::mutex conns_mu;
  std::condition_variable conns_cv;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> conns;

  std::mutex life_mu;  // orders listen() against stop()
  std::condition_variable life_cv;
  bool listening = false;  // listen() is running the I/O threads
  bool stopped = false;

  // Declared last: destroyed first, so no task outlives the state and connections it uses.
  WorkerPool pool;

  explicit Impl(ServerConfig config)
      : state(std::move(config)), pool(static_cast<size_t>(std::max(2, state.config.num_http_threads))) {
    state.id_salt = std::random_device{}() * 0x100000001B3ull ^ std::random_device{}();
    limits.max_body_bytes = state.config.max_body_bytes;
    limits.header_timeout = std::chrono::milliseconds(state.config.header_timeout_ms);
    limits.body_timeout = std::chrono::milliseconds(state.config.body_timeout_ms);
  }

  void accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](error_code ec, tcp::socket socket) {
      if (!acceptor.is_open() || ec == net::error::operation_aborted) return;
      if (ec) {
        // Out of file descriptors (or another transient failure): back off instead of spinning.
        TESSERA_LOG_WARN("server: accept failed: {}", ec.message());
        accept_retry.expires_after(std::chrono::milliseconds(50));
        accept_retry.async_wait([this](error_code) {
          if (acceptor.is_open()) accept();
        });
        return;
      }
      auto connection = std::make_shared<Connection>(std::move(socket), limits, *this);
      {
        std::lock_guard<std::mutex> lock(conns_mu);
        conns.emplace(connection.get(), connection);
      }
      connection->start();
      accept();
    });
  }

  // ConnectionHost
  void on_request(const std::shared_ptr<Connection>& connection, HttpRequest request) override {
    Routed routed = route(state, request);
    if (routed.now) return connection->respond(std::move(*routed.now));
    auto task = [connection, request = std::move(request), handler = std::move(routed.later)] {
      handler(request, *connection);
    };
    if (state.stopping.load() || !pool.post(std::move(task))) {
      connection->respond(error_response({ErrorType::kUnavailable, "The server is shutting down", ""}));
    }
  }
  void on_response(int status) override {
    if (status >= 500) {
      state.num_errors_5xx.fetch_add(1);
    } else if (status >= 400) {
      state.num_errors_4xx.fetch_add(1);
    }
  }
  bool draining() const override { return state.draining.load(); }
  void on_closed(Connection* connection) override {
    std::lock_guard<std::mutex> lock(conns_mu);
    conns.erase(connection);
    conns_cv.notify_all();
  }

  std::vector<std::shared_ptr<Connection>> open_connections() {
    std::vector<std::shared_ptr<Connection>> out;
    std::lock_guard<std::mutex> lock(conns_mu);
    for (auto& [ptr, weak] : conns) {
      if (auto c = weak.lock()) out.push_back(std::move(c));
    }
    return out;
  }

  // Waits until every connection has closed, up to `deadline`.
  void wait_for_connections(Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(conns_mu);
    conns_cv.wait_until(lock, deadline, [this] { return conns.empty(); });
  }
};

HttpServer::HttpServer(ServerConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}

HttpServer::HttpServer(Engine& engine, ServerConfig config) : HttpServer(std::move(config)) { attach(engine); }

void HttpServer::attach(Engine& engine) {
  if (impl_->state.config.served_model_name.empty()) {
    impl_->state.config.served_model_name = engine.model_info().name;
  }
  impl_->state.attach(engine);  // published last: route() reads the name only once ready()
}

HttpServer::~HttpServer() { stop(); }

Result<int> HttpServer::bind() {
  ::signal(SIGPIPE, SIG_IGN);  // asio writes with MSG_NOSIGNAL; this covers everything else
  const ServerConfig& c = impl_->state.config;
  error_code ec;
  const net::ip::address address = net::ip::make_address(c.host, ec);
  if (ec) return make_error(ErrorCode::kIo, "cannot bind {}: not an IP address ({})", c.host, ec.message());
  tcp::acceptor& acceptor = impl_->acceptor;
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(c.port));
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(1024, ec);  // a burst of clients must not overflow the accept queue
  if (ec) {
    error_code ignored;
    acceptor.close(ignored);
    return make_error(ErrorCode::kIo, "cannot bind {}:{} ({})", c.host, c.port, ec.message());
  }
  impl_->bound_port = acceptor.local_endpoint().port();
  return impl_->bound_port;
}

void HttpServer::listen() {
  Impl& s = *impl_;
  TESSERA_CHECK(s.bound_port > 0, "HttpServer::listen() before bind()");
  {
    std::lock_guard<std::mutex> lock(s.life_mu);
    if (s.stopped) return;
    s.listening = true;
  }
  s.accept();
  std::vector<std::thread> threads;
  for (int32_t i = 1; i < std::max(1, s.state.config.num_io_threads); ++i) {
    threads.emplace_back([&s] { s.ioc.run(); });
  }
  s.ioc.run();
  for (std::thread& t : threads) t.join();
  std::lock_guard<std::mutex> lock(s.life_mu);
  s.listening = false;
  s.life_cv.notify_all();
}

void HttpServer::shutdown(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  const auto deadline = Clock::now() + grace;
  s.state.draining.store(true);  // new generate requests and /health: 503 with Retry-After
  // Idle keep-alive connections and half-sent headers (a trickling client) are closed now; a
  // request being handled gets its answer with Connection: close.
  for (const auto& c : s.open_connections()) c->close_if_idle();
  if (s.state.ready()) s.state.engine().shutdown(grace);  // in-flight requests finish until the deadline, the rest abort
  // Let handlers write the last events of what finished or was aborted. Half a second with no
  // handler ending cuts the rest (a slow reader); while they keep ending (a loaded host runs the
  // handlers of many cut streams one after another) they get up to 2 s past the deadline.
  const auto after_deadline = std::max(Clock::now(), deadline);
  const auto hard_deadline = after_deadline + std::chrono::seconds(2);
  auto flush_deadline = after_deadline + std::chrono::milliseconds(500);
  int64_t in_flight = s.state.num_in_flight.load();
  while (in_flight > 0 && Clock::now() < flush_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const int64_t now_in_flight = s.state.num_in_flight.load();
    if (now_in_flight < in_flight) {  // progress: another half second, within the hard deadline
      flush_deadline = std::min(hard_deadline, Clock::now() + std::chrono::milliseconds(500));
    }
    in_flight = now_in_flight;
  }
  stop();
}

void HttpServer::stop() {
  Impl& s = *impl_;
  bool was_listening = false;
  {
    std::lock_guard<std::mutex> lock(s.life_mu);
    if (s.stopped) return;
    s.stopped = true;
    was_listening = s.listening;
  }
  s.state.stopping.store(true);  // handlers end: streams with an error event, waits with a 503
  if (was_listening) {  // the acceptor belongs to the I/O threads: close it there, and wait for that
    std::promise<void> closed;
    net::post(s.ioc, [&s, &closed] {
      error_code ignored;
      s.acceptor.close(ignored);
      s.accept_retry.cancel();
      closed.set_value();
    });
    closed.get_future().wait();
  } else {
    error_code ignored;
    s.acceptor.close(ignored);
  }
  s.pool.stop();  // handlers see stopping (or a closed connection) within one poll, queue their last
                  // events (a cut stream's error event and [DONE]) and return
  // Only now, with every handler's last bytes queued, does each connection close once they are
  // written (a finished handler's end also comes before the I/O thread has written its bytes).
  // Closing earlier (or outright) cut a stream whose queue was momentarily empty before its handler
  // had queued the error event. A reader that takes none of it is cut at the wait's deadline.
  for (const auto& c : s.open_connections()) c->close_when_written();
  if (was_listening) s.wait_for_connections(Clock::now() + std::chrono::milliseconds(500));
  s.ioc.stop();
  std::unique_lock<std::mutex> lock(s.life_mu);
  s.life_cv.wait(lock, [&s] { return !s.listening; });
}

ServerCounters HttpServer::counters() const { return impl_->state.counters(); }
const ServerConfig& HttpServer::config() const { return impl_->state.config; }

}  // namespace tessera::server
