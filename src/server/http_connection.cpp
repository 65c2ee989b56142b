// The Beast side of one connection; see http_connection.h for the flow. Everything but the
// Responder calls runs on the connection's strand; the Responder posts onto it.
#include "server/http_connection.h"

#include "server/backend_contract.h"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>

#include <fmt/format.h>

namespace tessera::server {

namespace net = boost::asio;
namespace http = boost::beast::http;
using boost::system::error_code;

namespace {

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
// Reading what a refused client still sends: for at most this long, and this many bytes.
constexpr auto kLingerTime = std::chrono::milliseconds(1000);
constexpr size_t kLingerBytes = 4u << 20;

bool is_http_error(const error_code& ec) { return ec.category() == http::make_error_code(http::error::need_more).category(); }

}  // namespace

Connection::Connection(Socket socket, const ConnectionLimits& limits, ConnectionHost& host)
    : socket_(std::move(socket)), timer_(socket_.get_executor()), limits_(limits), host_(host) {}

Connection::~Connection() = default;

void Connection::start() {
  net::post(socket_.get_executor(), [self = shared_from_this()] { self->read_request(); });
}

void Connection::close_if_idle() {
  net::post(socket_.get_executor(), [self = shared_from_this()] {
    if (self->phase_ == Phase::kHeader && !self->writing_) self->do_close();
  });
}

void Connection::close() {
  net::post(socket_.get_executor(), [self = shared_from_this()] { self->do_close(); });
}

void Connection::close_when_written() {
  net::post(socket_.get_executor(), [self = shared_from_this()] {
    if (self->closed_) return;
    if (!self->writing_ && self->out_.empty()) return self->do_close();
    self->close_when_written_ = true;  // write_next() closes when the queue is empty
  });
}

void Connection::read_request() {
  if (closed_) return;
  phase_ = Phase::kHeader;
  parser_.emplace();
  parser_->header_limit(limits_.max_header_bytes);
  parser_->body_limit(limits_.max_body_bytes);
  response_done_ = false;
  timed_out_ = false;
  // One deadline for the whole header, however slowly it trickles in (slowloris).
  arm(first_request_ ? limits_.header_timeout : limits_.keep_alive_timeout);
  http::async_read_header(socket_, buffer_, *parser_,
                          [self = shared_from_this()](error_code ec, size_t) { self->on_header(ec); });
}

void Connection::on_header(error_code ec) {
  if (closed_) return;
  if (ec == http::error::body_limit) {  // Content-Length over the limit: refused before any body byte
    return fail_request({ErrorType::kPayloadTooLarge,
                         fmt::format("Request body too large (limit {} bytes)", limits_.max_body_bytes), ""});
  }
  if (ec == http::error::header_limit) {
    return fail_request({ErrorType::kHeaderTooLarge,
                         fmt::format("Request headers too large (limit {} bytes)", limits_.max_header_bytes), ""});
  }
  if (ec && is_http_error(ec) && ec != http::error::end_of_stream && ec != http::error::partial_message) {
    return fail_request({ErrorType::kInvalidRequest, "Malformed HTTP request: " + ec.message(), ""});
  }
  if (ec) return do_close();  // closed, reset or timed out: nobody to answer
  const auto& msg = parser_->get();
  if (static_cast<size_t>(std::distance(msg.begin(), msg.end())) > limits_.max_header_fields) {
    return fail_request({ErrorType::kHeaderTooLarge,
                         fmt::format("Too many request headers (limit {})", limits_.max_header_fields), ""});
  }
  if (parser_->is_done()) return on_body({});
  phase_ = Phase::kBody;
  arm(limits_.body_timeout);
  if (boost::beast::iequals(msg[http::field::expect], "100-continue")) {
    net::async_write(socket_, net::buffer(kContinue), [self = shared_from_this()](error_code wec, size_t) {
      if (wec || self->closed_) return self->do_close();
      self->read_body();
    });
    return;
  }
  read_body();
}

void Connection::read_body() {
  // Counted as it arrives, for every framing: the parser stops at the body limit.
  http::async_read(socket_, buffer_, *parser_, [self = shared_from_this()](error_code ec, size_t) { self->on_body(ec); });
}

void Connection::on_body(error_code ec) {
  if (closed_) return;
  disarm();
  if (ec == http::error::body_limit) {
    return fail_request({ErrorType::kPayloadTooLarge,
                         fmt::format("Request body too large (limit {} bytes)", limits_.max_body_bytes), ""});
  }
  if (ec && timed_out_) {
    return fail_request({ErrorType::kRequestTimeout,
                         fmt::format("The request body did not arrive within {:g} s",
                                     static_cast<double>(limits_.body_timeout.count()) / 1000.0),
                         ""});
  }
  if (ec && is_http_error(ec) && ec != http::error::end_of_stream && ec != http::error::partial_message) {
    return fail_request({ErrorType::kInvalidRequest, "Malformed HTTP request: " + ec.message(), ""});
  }
  if (ec) return do_close();
  auto& msg = parser_->get();
  HttpRequest request;
  request.method = std::string(msg.method_string());
  const std::string_view target(msg.target().data(), msg.target().size());
  const size_t question = target.find('?');
  request.path = std::string(target.substr(0, question));
  if (question != std::string_view::npos) request.query = std::string(target.substr(question + 1));
  for (const auto& field : msg) request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  request_id_ = safe_request_id(request.header("X-Request-ID")).value_or("");
  request.body = std::move(msg.body());
  keep_alive_ = msg.keep_alive();
  first_request_ = false;
  parser_.reset();
  phase_ = Phase::kHandling;
  watch();
  host_.on_request(shared_from_this(), std::move(request));
}

void Connection::fail_request(const ApiError& error) {
  keep_alive_ = false;  // the rest of the stream cannot be parsed: answer, then close
  bool anthropic = false;  // the target, when the request line was parsed (a body over the limit)
  if (parser_) {
    const auto target = parser_->get().target();
    anthropic = anthropic_route(std::string_view(target.data(), target.size()));
  }
  parser_.reset();
  phase_ = Phase::kHandling;
  HttpResponse response = error_response(error);
  if (anthropic) response.body = anthropic_error_body(error);
  host_.on_response(response.status);
  enqueue(head_bytes(response, false) + response.body, true);
}

void Connection::watch() {
  if (watching_ || closed_ || buffer_.size() >= limits_.max_buffered_ahead) return;
  watching_ = true;
  socket_.async_read_some(buffer_.prepare(4096),
                          [self = shared_from_this()](error_code ec, size_t n) { self->on_watch(ec, n); });
}

void Connection::on_watch(error_code ec, size_t n) {
  watching_ = false;
  if (closed_) return;
  if (phase_ == Phase::kClosing) {
    lingered_bytes_ += n;
    return ec || lingered_bytes_ > kLingerBytes ? do_close() : continue_linger();
  }
  if (phase_ == Phase::kHeader) {  // the exchange ended while this read was pending (or cancelled it)
    if (ec && ec != net::error::operation_aborted) return do_close();
    if (!ec) buffer_.commit(n);
    return read_request();
  }
  if (ec) {  // EOF or a failure while the request is handled: the client is gone
    mark_gone();
    keep_alive_ = false;
    return;
  }
  buffer_.commit(n);  // pipelined bytes: kept for after this answer
  watch();
}

void Connection::respond(HttpResponse response) {
  net::post(socket_.get_executor(), [self = shared_from_this(), response = std::move(response)] {
    if (self->closed_ || self->phase_ != Phase::kHandling || self->response_done_) return;
    self->host_.on_response(response.status);
    self->enqueue(self->head_bytes(response, false) + response.body, true);
  });
}

void Connection::begin_stream(const HttpResponse& head) {
  net::post(socket_.get_executor(), [self = shared_from_this(), head] {
    if (self->closed_ || self->phase_ != Phase::kHandling || self->response_done_) return;
    self->host_.on_response(head.status);
    self->enqueue(self->head_bytes(head, true), false);
  });
}

bool Connection::write(std::string data) {
  if (gone_.load()) return false;
  if (data.empty()) return true;  // an empty chunk would end the stream
  std::string chunk = fmt::format("{:x}\r\n", data.size());
  chunk += data;
  chunk += "\r\n";
  {
    std::unique_lock<std::mutex> lock(mu_);
    // A slow reader: wait for the socket to take what is queued (the write deadline bounds it).
    if (!cv_.wait_for(lock, limits_.write_timeout + std::chrono::seconds(1),
                      [&] { return gone_.load() || queued_bytes_ < limits_.max_queued_write_bytes; })) {
      return false;
    }
    if (gone_.load()) return false;
    queued_bytes_ += chunk.size();
  }
  net::post(socket_.get_executor(), [self = shared_from_this(), chunk = std::move(chunk)]() mutable {
    if (self->closed_) return;
    self->out_.push_back({std::move(chunk), true});
    if (!self->writing_) self->write_next();
  });
  return true;
}

void Connection::end_stream() {
  net::post(socket_.get_executor(), [self = shared_from_this()] {
    if (self->closed_ || self->response_done_) return;
    self->enqueue("0\r\n\r\n", true);
  });
}

void Connection::enqueue(std::string bytes, bool last) {
  if (closed_) return;
  if (last) response_done_ = true;
  out_.push_back({std::move(bytes), false});
  if (!writing_) write_next();
}

void Connection::write_next() {
  if (closed_) return;
  if (out_.empty()) {
    if (close_when_written_) return do_close();
    if (response_done_ && phase_ == Phase::kHandling) finish_exchange();
    return;
  }
  writing_ = true;
  arm(limits_.write_timeout);
  net::async_write(socket_, net::buffer(out_.front().bytes), [self = shared_from_this()](error_code ec, size_t) {
    self->writing_ = false;
    if (self->closed_) return;
    if (ec) {
      self->mark_gone();
      return self->do_close();
    }
    self->disarm();
    const Pending done = std::move(self->out_.front());
    self->out_.pop_front();
    if (done.counted) {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->queued_bytes_ -= std::min(self->queued_bytes_, done.bytes.size());
    }
    self->cv_.notify_all();
    self->write_next();
  });
}

void Connection::finish_exchange() {
  phase_ = Phase::kHeader;  // between requests: idle (a drain closes it)
  if (!keep_alive_ || gone_.load()) return linger_close();
  if (watching_) {  // stop the watch read (nothing else is pending); its handler reads on, in order
    error_code ignored;
    socket_.cancel(ignored);
    return;
  }
  read_request();
}

void Connection::linger_close() {
  // Half-close, then read (and drop) what the client still sends for a moment: closing a socket
  // with unread bytes resets it, and the client would lose the answer it has not read yet.
  phase_ = Phase::kClosing;
  error_code ignored;
  socket_.shutdown(Socket::shutdown_send, ignored);
  arm(kLingerTime);
  if (!watching_) continue_linger();  // else the pending read's handler continues it
}

void Connection::continue_linger() {
  watching_ = true;
  socket_.async_read_some(net::buffer(discard_), [self = shared_from_this()](error_code ec, size_t n) {
    self->on_watch(ec, n);
  });
}

void Connection::arm(std::chrono::milliseconds timeout) {
  const uint64_t generation = ++timer_generation_;
  timer_.expires_after(timeout);
  timer_.async_wait([self = shared_from_this(), generation](error_code ec) {
    if (ec || generation != self->timer_generation_ || self->closed_) return;
    self->on_timeout();
  });
}

void Connection::disarm() {
  ++timer_generation_;
  timer_.cancel();
}

void Connection::on_timeout() {
  if (phase_ == Phase::kBody) {  // answer 408: stop the read, keep the socket
    timed_out_ = true;
    error_code ignored;
    socket_.cancel(ignored);
    return;
  }
  do_close();  // headers too slow (slowloris), idle too long, a write stuck, or the linger over
}

void Connection::do_close() {
  if (closed_) return;
  closed_ = true;
  ++timer_generation_;
  timer_.cancel();
  error_code ignored;
  socket_.shutdown(Socket::shutdown_both, ignored);
  socket_.close(ignored);
  mark_gone();
  host_.on_closed(this);
}

void Connection::mark_gone() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    gone_.store(true);
  }
  cv_.notify_all();
}

std::string Connection::head_bytes(const HttpResponse& response, bool chunked) {
  keep_alive_ = keep_alive_ && !host_.draining() && !gone_.load();
  const auto reason = http::obsolete_reason(http::int_to_status(static_cast<unsigned>(response.status)));
  std::string head = fmt::format("HTTP/1.1 {} {}\r\nServer: tessera\r\nContent-Type: {}\r\n", response.status,
                                 std::string_view(reason.data(), reason.size()), response.content_type);
  for (const auto& [name, value] : response.headers) head += fmt::format("{}: {}\r\n", name, value);
  if (!request_id_.empty()) head += fmt::format("X-Request-ID: {}\r\n", request_id_);
  head += chunked ? std::string("Transfer-Encoding: chunked\r\n")
                  : fmt::format("Content-Length: {}\r\n", response.body.size());
  head += keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return head;
}

}  // namespace tessera::server
