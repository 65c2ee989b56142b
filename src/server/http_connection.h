// Connection: one accepted TCP connection, served with asynchronous I/O on its own strand, so
// that an idle, slow or half-sent connection holds no thread. Internal to src/server.
//
//   read header (deadline: header_timeout for the first request, keep_alive_timeout after one;
//                limits: header bytes, header fields; a Content-Length over the body limit -> 413 now)
//   read body   (deadline: body_timeout; counted as it arrives for every framing -> 413 at the limit)
//   hand the request to the host (on the strand); it answers through the Responder interface,
//   at once or from a worker thread. While it waits, a read stays pending on the socket: EOF or an
//   error there marks the client gone (client_gone()), and pipelined bytes are kept for later.
//   write the response (deadline: write_timeout per write), then the next request, in order.
//
// Error answers the connection makes itself (400, 408, 413, 431) close it afterwards, draining
// what the client still sends for a moment so that it reads the answer instead of a reset.
#pragma once
#include <array>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include "server/http_exchange.h"

namespace tessera::server {

struct ConnectionLimits {
  std::chrono::milliseconds header_timeout{10000};      // first byte to end of headers, first request
  std::chrono::milliseconds keep_alive_timeout{5000};   // idle + headers of each later request
  std::chrono::milliseconds body_timeout{30000};        // the whole body
  std::chrono::milliseconds write_timeout{30000};       // one write to the client
  uint32_t max_header_bytes = 16 * 1024;                // request line + headers (431 past it)
  size_t max_header_fields = 100;                       // 431 past it
  size_t max_body_bytes = 8u << 20;                     // 413 past it, for every framing
  size_t max_buffered_ahead = 64 * 1024;                // pipelined bytes kept while a request runs
  size_t max_queued_write_bytes = 256 * 1024;           // Responder::write blocks past it
};

class Connection;

// What a connection needs from its server. Called on the connection's strand.
class ConnectionHost {
 public:
  virtual ~ConnectionHost() = default;
  // A complete request: answer it through `connection` (now, or later from another thread).
  virtual void on_request(const std::shared_ptr<Connection>& connection, HttpRequest request) = 0;
  // Every response head written (counts the status).
  virtual void on_response(int status) = 0;
  // Draining: responses say Connection: close, and no further request is read.
  virtual bool draining() const = 0;
  virtual void on_closed(Connection* connection) = 0;
};

class Connection final : public Responder, public std::enable_shared_from_this<Connection> {
 public:
  using Socket = boost::asio::ip::tcp::socket;  // on a strand executor
  Connection(Socket socket, const ConnectionLimits& limits, ConnectionHost& host);
  ~Connection() override;

  void start();
  // Drain: closes the connection when no request is in progress (idle, or headers half sent).
  void close_if_idle();
  // Closes now; a handler still running sees client_gone() and its writes fail.
  void close();
  // Stop: closes once the bytes queued are on the socket (a finished stream's last events and its
  // terminator, and what a handler ending at the stop still adds), or now when nothing is queued;
  // bounded by the write timeout and by the server's wait for its connections.
  void close_when_written();

  // Responder
  void respond(HttpResponse response) override;
  void begin_stream(const HttpResponse& head) override;
  bool write(std::string data) override;
  void end_stream() override;
  bool client_gone() const override { return gone_.load(); }

 private:
  enum class Phase { kHeader, kBody, kHandling, kClosing };

  void read_request();
  void on_header(boost::system::error_code ec);
  void read_body();
  void on_body(boost::system::error_code ec);
  void fail_request(const ApiError& error);  // answers and closes (the stream cannot be trusted)
  void watch();                              // the pending read while a request is handled
  void on_watch(boost::system::error_code ec, size_t n);
  void finish_exchange();                    // after the last byte of a response
  void enqueue(std::string bytes, bool last);
  void write_next();
  void linger_close();
  void continue_linger();
  void arm(std::chrono::milliseconds timeout);
  void disarm();
  void on_timeout();
  void do_close();
  std::string head_bytes(const HttpResponse& response, bool chunked);
  void mark_gone();

  Socket socket_;
  boost::asio::steady_timer timer_;
  const ConnectionLimits& limits_;
  ConnectionHost& host_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  Phase phase_ = Phase::kHeader;
  bool first_request_ = true;
  bool keep_alive_ = true;       // of the request being handled
  std::string request_id_;       // its X-Request-ID when safe (backend_contract.h), echoed on the answer
  bool watching_ = false;        // a watch read is pending
  bool writing_ = false;         // an async write is pending
  bool response_done_ = false;   // the handler's last bytes are queued
  bool closed_ = false;
  bool close_when_written_ = false;  // close_when_written(): close once out_ is empty
  bool timed_out_ = false;       // the body deadline passed (-> 408)
  uint64_t timer_generation_ = 0;
  struct Pending {
    std::string bytes;
    bool counted;                // part of queued_bytes_ (a handler's write())
  };
  std::deque<Pending> out_;      // bytes queued for the socket (strand)
  std::array<char, 16384> discard_{};
  size_t lingered_bytes_ = 0;    // dropped while closing

  // Shared with handler threads.
  std::atomic<bool> gone_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  size_t queued_bytes_ = 0;      // written by handlers, not yet by the socket
};

}  // namespace tessera::server
