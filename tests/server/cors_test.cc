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
  for (const char* ok : {"http://localhost:3000", "https://app.example.com", "http://127.0.0.1:8080", "http://[::1]:5173", "http://example.com.",
                         "https://a.example:8443", "http://a.example:443", "chrome-extension://abcdef", "tauri://localhost", "*", "null"})
    EXPECT_TRUE(is_cors_origin(ok)) << ok << ": " << cors_origin_problem(ok);
  for (const char* bad : {"", "localhost:3000", "http://", "://x", "3http://x", "http://x y", "http://u@x", "http://a,http://b",
                          "http://x\r\nSet-Cookie: a=b", "http://a.com:", "http://[::1", "http://[::1]x"})
    EXPECT_FALSE(is_cors_origin(bad)) << bad;
}

TEST(Cors, AnEntryNoBrowserCouldSendIsRefusedWithTheFormToUse) {
  // Each entry: what the message must say (browsers lower-case scheme and host, leave out the
  // default port and send no path: such an entry would never match, while the log said it was allowed).
  const std::pair<const char*, const char*> cases[] = {
      {"http://b.example/", "no path, query or trailing slash: use 'http://b.example'"},
      {"http://b.example/app?x=1", "use 'http://b.example'"},
      {"HTTP://B.Example:3000", "lower case: use 'http://b.example:3000'"},
      {"http://a.example:80", "leaves out the default port 80: use 'http://a.example'"},
      {"https://A.example:443", "leaves out the default port 443: use 'https://a.example'"},
      {"http://a.example:0", "the port must be a number from 1 to 65535"},
      {"http://a.example:99999", "the port must be a number from 1 to 65535"},
      {"http://a.example:8o", "the port must be a number from 1 to 65535"},
      {"http://a.example:", "the port after ':' is empty"},
      {"http://*.example.com", "wildcards in a host are not matched"},
      {"http://a..example", "the host 'a..example' has an empty label"},
      {"http://bücher.example", "punycode"},
      {"localhost:3000", "expected scheme://host[:port]"},
      // As the WHATWG URL serializer writes them (a fresh user's list).
      {"http://[0:0:0:0:0:0:0:1]:5173", "a browser writes this origin as 'http://[::1]:5173': use that"},
      {"http://[hello]", "'[hello]' is not an IPv6 address"},
      {"http://::1:5173", "an IPv6 host goes in brackets"},
      {"http://localhost:05173", "a browser writes this origin as 'http://localhost:5173'"},
      {"http://127.1", "a browser writes this origin as 'http://127.0.0.1'"},
      {"http://0x7f.1", "a browser writes this origin as 'http://127.0.0.1'"},
      {"http://1.2.3.4.5", "is not an IPv4 address"},
      {"http://a.example'", "a host holds letters, digits"},
      {"\"http://a.example\"", "drop the quotes: use http://a.example"},
      {"NULL", "use 'null' (lower case)"},
      {"file://", "pages opened from file:// send the Origin null: list null"},
      {"", "the entry is empty"},
      // A fresh user's: origins separated by ';' (the suggestion was 'http://a.example;http:'), and a
      // path after a host in capitals (the suggestion kept them, and the next run refused it).
      {"http://a.example;http://b.example", "one origin per entry: separate them by commas (or repeat the flag), not ';' or '|'"},
      {"http://A.example/", "no path, query or trailing slash (drop '/'); then 'http://A.example': "},
      {"http://A.example/", "lower case: use 'http://a.example'"},
  };
  for (const auto& [entry, says] : cases) {
    const Status s = validate_cors_origins({"http://ok.example", entry});
    ASSERT_FALSE(s.ok()) << entry;
    EXPECT_NE(s.message().find(std::string("--cors-allow-origin: '") + entry + "' is not an origin as a browser sends it: "), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find(says), std::string::npos) << s.message();
  }
  EXPECT_TRUE(validate_cors_origins({}).ok());
  EXPECT_TRUE(validate_cors_origins({"http://a.example", "http://localhost:3000"}).ok());
  EXPECT_TRUE(validate_cors_origins({"*"}).ok());
  // * with anything else makes the list pointless.
  for (const std::vector<std::string>& list : {std::vector<std::string>{"http://a.example", "*"}, std::vector<std::string>{"*", "*"}}) {
    const Status s = validate_cors_origins(list);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("* allows every origin: give it alone"), std::string::npos) << s.message();
  }
  // Control bytes are shown escaped, not written to the terminal.
  const Status c = validate_cors_origins({"http://x\x1b[2J"});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("http://x\\x1b[2J"), std::string::npos) << c.message();
}

TEST(Cors, VaryListsEachTokenOnce) {
  httplib::Response res;
  add_vary(res, "Origin");
  add_vary(res, "Accept-Encoding");
  add_vary(res, "origin");
  EXPECT_EQ(res.get_header_value_count("Vary"), 1u);
  EXPECT_EQ(res.get_header_value("Vary"), "Origin, Accept-Encoding");
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
  EXPECT_NE(ok.get_header_value("Access-Control-Expose-Headers").find("x-request-id"), std::string::npos);
  EXPECT_EQ(ok.get_header_value("Vary"), "Origin");
  httplib::Response other;
  p.add_headers(request("POST", "/generate", {{"Origin", "http://evil.example"}}), other);
  EXPECT_FALSE(other.has_header("Access-Control-Allow-Origin"));
  EXPECT_EQ(other.get_header_value("Vary"), "Origin");  // the answer depends on the Origin
  httplib::Response none;
  CorsPolicy().add_headers(request("POST", "/generate", {{"Origin", "http://a.example"}}), none);
  EXPECT_TRUE(none.headers.empty());
}

TEST(Cors, PreflightsAreAnsweredForAllowedOriginsOnly) {
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

  // A method the path does not take: allowed too, so the page reads the request's 405.
  httplib::Response del;
  ASSERT_TRUE(p.answer_preflight(routes, request("OPTIONS", "/generate", {{"Origin", "http://a.example"}, {"Access-Control-Request-Method", "DELETE"}}), del));
  EXPECT_EQ(del.get_header_value("Access-Control-Allow-Methods"), "POST, DELETE");

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

  // A path that is no route: allowed, so the page can read the 404 its request then gets.
  httplib::Response nope;
  ASSERT_TRUE(p.answer_preflight(routes, request("OPTIONS", "/nope", {{"Origin", "http://a.example"}, {"Access-Control-Request-Method", "GET"}}), nope));
  EXPECT_EQ(nope.status, 204);
  EXPECT_EQ(nope.get_header_value("Access-Control-Allow-Methods"), "GET, HEAD, POST");

  // Chrome's Private Network Access question is answered for an allowed origin.
  httplib::Response pna;
  ASSERT_TRUE(p.answer_preflight(routes, request("OPTIONS", "/generate", {{"Origin", "http://a.example"}, {"Access-Control-Request-Method", "POST"},
                                                                          {"Access-Control-Request-Private-Network", "true"}}),
                                 pna));
  EXPECT_EQ(pna.get_header_value("Access-Control-Allow-Private-Network"), "true");
  EXPECT_FALSE(res.has_header("Access-Control-Allow-Private-Network"));  // not asked: not said

  // Two Origin headers (no browser sends that): refused, whichever comes first.
  for (const auto& order : {std::vector<std::string>{"http://a.example", "http://evil.example"}, std::vector<std::string>{"http://evil.example", "http://a.example"}}) {
    httplib::Response two;
    httplib::Request req = request("OPTIONS", "/generate", {{"Access-Control-Request-Method", "POST"}});
    for (const auto& o : order) req.headers.emplace("Origin", o);
    ASSERT_TRUE(p.answer_preflight(routes, req, two));
    EXPECT_EQ(two.status, 403);
    EXPECT_NE(two.body.find("several Origin headers"), std::string::npos) << two.body;
    httplib::Response normal;
    req.method = "POST";
    p.add_headers(req, normal);
    EXPECT_FALSE(normal.has_header("Access-Control-Allow-Origin"));
  }

  // Not a preflight, or CORS off: left to the router (404 / 405).
  httplib::Response untouched;
  EXPECT_FALSE(p.answer_preflight(routes, request("OPTIONS", "/generate", {{"Origin", "http://a.example"}}), untouched));
  EXPECT_FALSE(p.answer_preflight(routes, request("POST", "/generate", {{"Origin", "http://a.example"}, {"Access-Control-Request-Method", "POST"}}),
                                  untouched));
  EXPECT_FALSE(CorsPolicy().answer_preflight(
      routes, request("OPTIONS", "/generate", {{"Origin", "http://a.example"}, {"Access-Control-Request-Method", "POST"}}), untouched));
  EXPECT_EQ(untouched.status, -1);
  EXPECT_TRUE(untouched.headers.empty());
}

}  // namespace
}  // namespace mamba::server
