// The chat page served at GET / (and /index.html) unless ServerConfig::webui is off: one
// self-contained HTML file, src/server/webui/index.html (inline CSS and JS, no CDN, works offline),
// compiled into the binary at build time (webui/embed.cmake writes its bytes into a generated
// .cpp). The page holds no secret, so it is served without the API key; it asks the user for the
// key when the API answers 401. It talks only to this server's /v1/models and /v1/chat/completions.
// Internal to src/server.
#pragma once
#include <string_view>

#include "server/http_exchange.h"

namespace tessera::server {

// The page's bytes as built (with the nonce placeholder kWebuiNoncePlaceholder in its <script>
// and <style> tags); defined in the generated webui_page.cpp.
std::string_view webui_page_source();
inline constexpr std::string_view kWebuiNoncePlaceholder = "__TESSERA_CSP_NONCE__";

// 200 text/html with Cache-Control: no-cache and a Content-Security-Policy that lets only the
// page's own <script> and <style> run (a fresh random nonce per response): no inline event
// handler, injected script or remote resource runs even if model text ever reached the DOM as
// HTML; fetches go only to this origin.
HttpResponse webui_response();

}  // namespace tessera::server
