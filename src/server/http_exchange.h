// One HTTP exchange as the handlers see it: the request as plain data, the response as plain data,
// and the Responder, a handler's way back to its client (the Beast connection in
// http_connection.cpp implements it). No Beast type appears here, so handlers do not depend on the
// transport. Internal to src/server.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/api_error.h"

namespace tessera::server {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ... as sent
  std::string path;    // the target without its query string
  std::string query;   // the target after '?' (raw, not decoded), "" when none
  HeaderList headers;  // as received, in order
  std::string body;    // complete (the connection read it all, within the body limit)

  // The first value of header `name` (case-insensitive), "" when absent.
  std::string header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  HeaderList headers;  // extra headers (Content-Length, Connection and Content-Type are added)
};

// 200 with a JSON body.
HttpResponse json_response(std::string body);
// The error's status and OpenAI body from the one table (api_error.h); a 503 carries Retry-After.
HttpResponse error_response(const ApiError& error);

// A handler's way back to its client. Callable from any thread (one handler thread at a time).
// Either respond() once, or begin_stream(), write()..., end_stream().
class Responder {
 public:
  virtual ~Responder() = default;
  virtual void respond(HttpResponse response) = 0;
  // A chunked response: the head (status, content type, headers; its body is ignored) goes now.
  virtual void begin_stream(const HttpResponse& head) = 0;
  // Queues one chunk; blocks while too much is queued for a slow reader. False once the client is
  // gone (a failed write, or it closed its side), or the connection was closed by the server.
  virtual bool write(std::string data) = 0;
  virtual void end_stream() = 0;
  // True once the client closed its side or the connection failed: noticed by a read the
  // connection keeps pending while the handler waits, so an abandoned request can be aborted.
  virtual bool client_gone() const = 0;
};

}  // namespace tessera::server
