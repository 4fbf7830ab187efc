// CORS (server/cors.h): which origins pass, the headers of normal answers and of preflights.
#include <gtest/gtest.h>
#include <httplib.h>

#include <string>
#include <vector>

#include "server/cors.h"
#include "server/route_table.h"

namespace mamba::server {
namespace {

TEST(Cors, OriginsAreSchemeHostPortAsBrowsersSendThem) {
  for (const char* ok : {"http://localhost:3000", "https://app.example.com", "http://127.0.0.1:8080", "http://[::1]:5173",
                         "chrome-extension://abcdef", "*", "null"})
    EXPECT_TRUE(is_cors_origin(ok)) << ok;
  for (const char* bad : {"", "localhost:3000", "http://", "http://x/", "http://x/app", "http://x?y", "http://x#y",
                          "http://u@x", "http://x y", "3http://x", "://x", "http://a,http://b", "http://x\r\nSet-Cookie: a=b"})
    EXPECT_FALSE(is_cors_origin(bad)) << bad;
}

TEST(Cors, ValidationNamesTheFlagAndTheEntry) {
  EXPECT_TRUE(validate_cors_origins({}).ok());
  EXPECT_TRUE(validate_cors_origins({"http://a.example", "*"}).ok());
  const Status s = validate_cors_origins({"http://a.example", "http://b.example/"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--cors-allow-origin: 'http://b.example/' is not an origin"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("no path or trailing slash"), std::string::npos) << s.message();
  // Control bytes are shown escaped, not written to the terminal.
  const Status c = validate_cors_origins({"http://x\x1b[2J"});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("http://x\\x1b[2J"), std::string::npos) << c.message();
}

TEST(Cors, AllowOriginIsTheListedOriginAStarOrNothing) {
  const CorsPolicy off;
  EXPECT_FALSE(off.enabled());
  EXPECT_EQ(off.allow_origin("http://a.example"), "");
  const CorsPolicy listed({"http://a.example", "http://b.example:8080"});
  EXPECT_EQ(listed.allow_origin("http://a.example"), "http://a.example");
  EXPECT_EQ(listed.allow_origin("http://b.example:8080"), "http://b.example:8080");
  EXPECT_EQ(listed.allow_origin("http://b.example"), "");  // another port is another origin
  EXPECT_EQ(listed.allow_origin("https://a.example"), "");
  EXPECT_EQ(listed.allow_origin(""), "");
  const CorsPolicy any({"*"});
  EXPECT_EQ(any.allow_origin("http://anything.example"), "*");
  EXPECT_EQ(any.allow_origin(""), "");  // no Origin: not a cross-origin request
}

httplib::Request request(const std::string& method, const std::string& path, std::vector<std::pair<std::string, std::string>> headers) {
  httplib::Request req;
  req.method = method;
  req.path = path;
  for (auto& [k, v] : headers) req.headers.emplace(k, v);
  return req;
}

TEST(Cors, NormalAnswersCarryAllowOriginForAllowedOriginsOnly) {
  const CorsPolicy p({"http://a.example"});
  httplib::Response ok;
  p.add_headers(request("POST", "/generate", {{"Origin", "http://a.example"}}), ok);
  EXPECT_EQ(ok.get_header_value("Access-Control-Allow-Origin"), "http://a.example");
  EXPECT_NE(ok.get_header_value("Access-Control-Expose-Headers").find("x-generated-tokens"), std::string::npos);
  EXPECT_EQ(ok.get_header_value("Vary"), "Origin");
  httplib::Response other;
  p.add_headers(request("POST", "/generate", {{"Origin", "http://evil.example"}}), other);
  EXPECT_FALSE(other.has_header("Access-Control-Allow-Origin"));
  EXPECT_EQ(other.get_header_value("Vary"), "Origin");  // the answer depends on the Origin
  httplib::Response none;
  CorsPolicy().add_headers(request("POST", "/generate", {{"Origin", "http://a.example"}}), none);
  EXPECT_TRUE(none.headers.empty());
}

TEST(Cors, PreflightOfAKnownPathIsAnsweredBeforeAnythingElse) {
  httplib::Server svr;
  RouteTable routes;
  routes.add(svr, "POST", "/generate", [](const httplib::Request&, httplib::Response&) {});
  routes.add(svr, "GET", "/info", [](const httplib::Request&, httplib::Response&) {});
  const CorsPolicy p({"http://a.example"});

  httplib::Response res;
  ASSERT_TRUE(p.answer_preflight(routes, request("OPTIONS", "/generate", {{"Origin", "http://a.example"}, {"Access-Control-Request-Method", "POST"},
                                                                          {"Access-Control-Request-Headers", "content-type, authorization, x-stainless-os"}}),
                                 res));
  EXPECT_EQ(res.status, 204);
  EXPECT_EQ(res.get_header_value("Access-Control-Allow-Origin"), "http://a.example");
  EXPECT_EQ(res.get_header_value("Access-Control-Allow-Methods"), "POST");
  EXPECT_EQ(res.get_header_value("Access-Control-Allow-Headers"), "content-type, authorization, x-stainless-os");
  EXPECT_EQ(res.get_header_value("Access-Control-Max-Age"), "600");
  // add_headers (every answer's post-routing step) does not add a second Allow-Origin.
  p.add_headers(request("OPTIONS", "/generate", {{"Origin", "http://a.example"}}), res);
  EXPECT_EQ(res.get_header_value_count("Access-Control-Allow-Origin"), 1u);
  EXPECT_EQ(res.get_header_value_count("Vary"), 1u);

  httplib::Response info;
  ASSERT_TRUE(p.answer_preflight(routes, request("OPTIONS", "/info", {{"Origin", "http://a.example"}, {"Access-Control-Request-Method", "GET"}}), info));
  EXPECT_EQ(info.get_header_value("Access-Control-Allow-Methods"), "GET, HEAD");
  EXPECT_FALSE(info.has_header("Access-Control-Allow-Headers"));

  // A header list that is not one (CR/LF, quotes) is not echoed.
  httplib::Response odd;
  ASSERT_TRUE(p.answer_preflight(routes, request("OPTIONS", "/info", {{"Origin", "http://a.example"}, {"Access-Control-Request-Method", "GET"},
                                                                      {"Access-Control-Request-Headers", "a\r\nSet-Cookie: x"}}),
                                 odd));
  EXPECT_FALSE(odd.has_header("Access-Control-Allow-Headers"));

  httplib::Response denied;
  ASSERT_TRUE(p.answer_preflight(routes, request("OPTIONS", "/generate", {{"Origin", "http://evil.example"}, {"Access-Control-Request-Method", "POST"}}),
                                 denied));
  EXPECT_EQ(denied.status, 403);
  EXPECT_FALSE(denied.has_header("Access-Control-Allow-Origin"));
  EXPECT_NE(denied.body.find("\"error_type\":\"forbidden\""), std::string::npos) << denied.body;
  EXPECT_NE(denied.body.find("origin 'http://evil.example' is not allowed"), std::string::npos) << denied.body;

  // Not a preflight, an unknown path, or CORS off: left to the router (404 / 405).
  httplib::Response untouched;
  EXPECT_FALSE(p.answer_preflight(routes, request("OPTIONS", "/generate", {{"Origin", "http://a.example"}}), untouched));
  EXPECT_FALSE(p.answer_preflight(routes, request("OPTIONS", "/nope", {{"Origin", "http://a.example"}, {"Access-Control-Request-Method", "GET"}}),
                                  untouched));
  EXPECT_FALSE(p.answer_preflight(routes, request("POST", "/generate", {{"Origin", "http://a.example"}, {"Access-Control-Request-Method", "POST"}}),
                                  untouched));
  EXPECT_FALSE(CorsPolicy().answer_preflight(
      routes, request("OPTIONS", "/generate", {{"Origin", "http://a.example"}, {"Access-Control-Request-Method", "POST"}}), untouched));
  EXPECT_EQ(untouched.status, -1);
  EXPECT_TRUE(untouched.headers.empty());
}

}  // namespace
}  // namespace mamba::server
