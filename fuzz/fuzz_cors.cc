// libFuzzer target: the CORS checks of src/server/cors.h, which read the Origin and
// Access-Control-Request-Headers values of every request when --cors-allow-origin is set (and the
// flag's own entries at start). Contract checked besides memory safety: an Origin is allowed only
// as itself or as "*"; a value is_cors_origin accepts has no byte that could end a header line;
// a preflight's answer is 204 or 403, and none of its header values holds CR, LF or NUL.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <httplib.h>

#include "server/cors.h"
#include "server/route_table.h"

using mamba::server::CorsPolicy;
using mamba::server::RouteTable;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Input: origin '\n' request-headers '\n' configured-origin.
  const std::string in(reinterpret_cast<const char*>(data), size);
  const std::size_t a = in.find('\n'), b = a == std::string::npos ? a : in.find('\n', a + 1);
  const std::string origin = in.substr(0, a);
  const std::string asked = a == std::string::npos ? "" : in.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
  const std::string listed = b == std::string::npos ? "http://a.example" : in.substr(b + 1);

  if (mamba::server::is_cors_origin(listed))
    for (char c : listed)
      if (c == '\r' || c == '\n' || c == '\0') std::abort();
  if (mamba::server::validate_cors_origins({listed}).ok() != mamba::server::is_cors_origin(listed)) std::abort();

  static httplib::Server svr;
  static RouteTable routes = [] {
    RouteTable r;
    r.add(svr, "POST", "/generate", [](const httplib::Request&, httplib::Response&) {});
    return r;
  }();
  // The server builds its policy from validated entries only (validate_server_options).
  const std::string entry = mamba::server::is_cors_origin(listed) ? listed : "http://b.example";
  for (const CorsPolicy& p : {CorsPolicy({"*"}), CorsPolicy({entry}), CorsPolicy({"http://a.example", "null"})}) {
    const std::string allow = p.allow_origin(origin);
    if (!allow.empty() && allow != "*" && allow != origin) std::abort();
    httplib::Request req;
    req.method = "OPTIONS";
    req.path = "/generate";
    req.headers.emplace("Origin", origin);
    req.headers.emplace("Access-Control-Request-Method", "POST");
    req.headers.emplace("Access-Control-Request-Headers", asked);
    httplib::Response res;
    if (!p.answer_preflight(routes, req, res)) std::abort();
    if (res.status != 204 && res.status != 403) std::abort();
    p.add_headers(req, res);
    for (const auto& [k, v] : res.headers)
      for (char c : v)
        if (c == '\r' || c == '\n' || c == '\0') std::abort();
  }
  return 0;
}
