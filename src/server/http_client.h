// A small blocking HTTP/1.1 client over Boost.Beast: one request per connection, timeouts on
// connecting and on every read, the body either kept or handed over as it arrives (SSE). Used by
// the load generator (`tessera bench serve`) and the server tests.
#pragma once
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::server {

struct ClientRequest {
  std::string method = "GET";
  std::string target = "/";  // path and query
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;          // sent with Content-Type application/json unless headers name one
};

struct ClientResponse {
  int status = -1;           // -1: no response (see error)
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;          // empty when a body callback took it
  std::string error;         // "" when a complete response was read (or the callback hung up)
};

struct ClientTimeouts {
  std::chrono::milliseconds connect{10000};
  std::chrono::milliseconds read{30000};  // the longest wait for any next bytes
};

// Called with each piece of the body as it arrives; false hangs up.
using BodyCallback = std::function<bool(std::string_view)>;

ClientResponse http_request(const std::string& host, int port, const ClientRequest& request,
                            const ClientTimeouts& timeouts = {}, const BodyCallback& on_body = {});

// "http://host[:port][/prefix]" -> {host, port (80 by default), prefix without a trailing '/'}.
struct BaseUrl {
  std::string host;
  int port = 80;
  std::string prefix;
};
std::optional<BaseUrl> parse_base_url(const std::string& url);

}  // namespace tessera::server
