// GET / : the embedded chat page with a per-response CSP nonce (see webui.h).
#include "server/webui.h"

#include <random>
#include <string>

#include <fmt/format.h>

namespace tessera::server {

HttpResponse webui_response() {
  // 128 random bits as 32 hex digits (hex is a subset of the base64 alphabet CSP asks for).
  std::random_device rd;
  const std::string nonce = fmt::format("{:08x}{:08x}{:08x}{:08x}", rd(), rd(), rd(), rd());
  const std::string_view page = webui_page_source();
  HttpResponse res;
  res.content_type = "text/html; charset=utf-8";
  res.body.reserve(page.size() + 64);
  size_t from = 0;
  for (size_t at; (at = page.find(kWebuiNoncePlaceholder, from)) != std::string_view::npos;
       from = at + kWebuiNoncePlaceholder.size()) {
    res.body.append(page.substr(from, at - from)).append(nonce);
  }
  res.body.append(page.substr(from));
  res.headers.emplace_back(
      "Content-Security-Policy",
      fmt::format("default-src 'none'; script-src 'nonce-{0}'; style-src 'nonce-{0}'; connect-src 'self'; "
                  "img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
                  nonce));
  res.headers.emplace_back("Cache-Control", "no-cache");
  res.headers.emplace_back("X-Content-Type-Options", "nosniff");
  res.headers.emplace_back("Referrer-Policy", "no-referrer");
  return res;
}

}  // namespace tessera::server
