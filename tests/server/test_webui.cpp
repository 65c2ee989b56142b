// The chat page route (server/webui.h): GET / and /index.html serve the embedded page with a fresh
// CSP nonce per response, without the API key and while the model loads; --no-webui makes / a 404.
#include <gtest/gtest.h>

#include <regex>

#include "server/webui.h"
#include "server_fixture.h"

namespace tessera::testing {
namespace {

std::string header(const server::ClientResponse& res, const std::string& name) {
  for (const auto& [k, v] : res.headers) {
    if (k == name) return v;
  }
  return "";
}

// The nonce of a page response, checked against its Content-Security-Policy and body.
std::string check_page(const server::ClientResponse& res) {
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(header(res, "Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(header(res, "Cache-Control"), "no-cache");
  std::smatch m;
  const std::string csp = header(res, "Content-Security-Policy");
  const bool matched = std::regex_match(
      csp, m,
      std::regex("default-src 'none'; script-src 'nonce-([0-9a-f]{32})'; style-src 'nonce-\\1'; connect-src 'self'; "
                 "img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"));
  EXPECT_TRUE(matched) << csp;
  if (!matched) return "";
  const std::string nonce = m[1];
  // The body is the embedded page with each placeholder (one per <script>/<style>) replaced.
  std::string want(server::webui_page_source());
  const std::string_view ph = server::kWebuiNoncePlaceholder;
  int replaced = 0;
  for (size_t at; (at = want.find(ph)) != std::string::npos; ++replaced) want.replace(at, ph.size(), nonce);
  EXPECT_EQ(replaced, 2);
  EXPECT_EQ(res.body, want);
  EXPECT_NE(res.body.find("<title>tessera chat</title>"), std::string::npos);
  return nonce;
}

TEST(WebUi, PageServedWithAFreshNonceEachTime) {
  ServerFixture f;
  const std::string a = check_page(f.send("GET", "/", ""));
  const std::string b = check_page(f.send("GET", "/index.html", ""));
  EXPECT_NE(a, b);
  const server::ClientResponse post = f.send("POST", "/", "{}");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(header(post, "Allow"), "GET");
}

TEST(WebUi, PageNeedsNoKeyButTheApiStillDoes) {
  server::ServerConfig sc;
  sc.api_key = "sekret";
  ServerFixture f(sc);
  check_page(f.send("GET", "/", ""));
  EXPECT_EQ(f.get("/v1/models").first, 401);
  EXPECT_EQ(f.get("/v1/models", {{"Authorization", "Bearer sekret"}}).first, 200);
}

TEST(WebUi, PageServedWhileTheModelLoads) {
  ServerFixture f({}, {}, /*attach_engine=*/false);
  check_page(f.send("GET", "/", ""));
  EXPECT_EQ(f.get("/v1/models").first, 503);  // the page shows "loading" and retries
}

TEST(WebUi, OffMeansNotFound) {
  server::ServerConfig sc;
  sc.webui = false;
  ServerFixture f(sc);
  for (const char* path : {"/", "/index.html"}) {
    const auto [status, body] = f.get(path);
    EXPECT_EQ(status, 404);
    EXPECT_EQ(body["error"]["message"], std::string("Unknown route: GET ") + path);
  }
}

}  // namespace
}  // namespace tessera::testing
