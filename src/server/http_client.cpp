#include "server/http_client.h"

#include <limits>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

namespace tessera::server {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;

// Runs one asynchronous operation to completion on `ioc` (the stream's timer bounds it).
template <typename Launch>
error_code run(net::io_context& ioc, Launch&& launch) {
  error_code result;
  launch([&result](error_code ec, auto&&...) { result = ec; });
  ioc.restart();
  ioc.run();
  return result;
}

}  // namespace

ClientResponse http_request(const std::string& host, int port, const ClientRequest& request,
                            const ClientTimeouts& timeouts, const BodyCallback& on_body) {
  ClientResponse out;
  net::io_context ioc;
  net::ip::tcp::resolver resolver(ioc);
  error_code ec;
  const auto endpoints = resolver.resolve(host, std::to_string(port), ec);
  if (ec) {
    out.error = "resolve " + host + ": " + ec.message();
    return out;
  }
  beast::tcp_stream stream(ioc);
  stream.expires_after(timeouts.connect);
  ec = run(ioc, [&](auto handler) { stream.async_connect(endpoints, std::move(handler)); });
  if (ec) {
    out.error = "connect: " + ec.message();
    return out;
  }
  http::request<http::string_body> req{http::string_to_verb(request.method), request.target, 11};
  req.set(http::field::host, host);
  bool has_type = false;
  for (const auto& [name, value] : request.headers) {
    req.insert(name, value);
    has_type = has_type || beast::iequals(name, "Content-Type");
  }
  if (!request.body.empty() || request.method == "POST") {
    if (!has_type) req.set(http::field::content_type, "application/json");
    req.body() = request.body;
    req.prepare_payload();
  }
  stream.expires_after(timeouts.read);
  ec = run(ioc, [&](auto handler) { http::async_write(stream, req, std::move(handler)); });
  if (ec) {
    out.error = "write: " + ec.message();
    return out;
  }
  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  // NOTE(server): Boost 1.74 compares the Content-Length with an empty optional as "over the
  // limit", so "no limit" is the largest number, not boost::none.
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  stream.expires_after(timeouts.read);
  ec = run(ioc, [&](auto handler) { http::async_read_header(stream, buffer, parser, std::move(handler)); });
  if (ec) {
    out.error = "read: " + ec.message();
    return out;
  }
  out.status = static_cast<int>(parser.get().result_int());
  for (const auto& field : parser.get()) out.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  char piece[8192];
  while (!parser.is_done()) {
    parser.get().body().data = piece;
    parser.get().body().size = sizeof(piece);
    stream.expires_after(timeouts.read);
    ec = run(ioc, [&](auto handler) { http::async_read(stream, buffer, parser, std::move(handler)); });
    if (ec == http::error::need_buffer) ec = {};
    const size_t got = sizeof(piece) - parser.get().body().size;
    if (got > 0) {
      if (!on_body) {
        out.body.append(piece, got);
      } else if (!on_body(std::string_view(piece, got))) {
        stream.socket().shutdown(net::ip::tcp::socket::shutdown_both, ec);
        return out;  // hung up by the caller
      }
    }
    if (ec) {
      out.error = "read: " + ec.message();
      return out;
    }
  }
  error_code ignored;
  stream.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  return out;
}

std::optional<BaseUrl> parse_base_url(const std::string& url) {
  constexpr std::string_view kScheme = "http://";
  if (url.rfind(kScheme, 0) != 0) return std::nullopt;
  std::string rest = url.substr(kScheme.size());
  BaseUrl out;
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    out.prefix = rest.substr(slash);
    rest.resize(slash);
    while (!out.prefix.empty() && out.prefix.back() == '/') out.prefix.pop_back();
  }
  const size_t colon = rest.rfind(':');
  if (colon != std::string::npos && rest.find(']') == std::string::npos) {
    try {
      out.port = std::stoi(rest.substr(colon + 1));
    } catch (...) {
      return std::nullopt;
    }
    rest.resize(colon);
  }
  if (rest.empty() || out.port <= 0 || out.port > 65535) return std::nullopt;
  out.host = rest;
  return out;
}

}  // namespace tessera::server
