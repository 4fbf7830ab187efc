// Cross-origin resource sharing (CORS, the Fetch standard §3.2): which web pages' scripts may call
// the API from a browser. Off unless origins are configured (`--cors-allow-origin`, as TGI's flag);
// then an allowed Origin gets Access-Control-Allow-Origin on every answer (errors included, so a
// page can read a 401's or 422's JSON), and a preflight (OPTIONS with Access-Control-Request-Method)
// is answered before authentication, as browsers send it without credentials.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <httplib.h>

#include "mamba/status.h"
#include "server/api_error.h"

namespace mamba::server {

class RouteTable;

/// Why `s` could never equal an Origin header as browsers serialize one (RFC 6454 §6.2: scheme
/// "://" host [":" port], lower case, no default port, no path, query, fragment, userinfo or
/// trailing slash; e.g. "http://localhost:3000", "https://app.example.com", "http://[::1]:5173"),
/// with the form to use where there is one (lower case, the default port left out, the path cut);
/// "" when it could, or for "*" (any origin) and "null" (pages from file:// and sandboxed frames).
std::string cors_origin_problem(std::string_view s);
/// cors_origin_problem(s) is "".
bool is_cors_origin(std::string_view s);

/// Checks a --cors-allow-origin list: every entry passes is_cors_origin, and "*" comes alone.
/// Errors: kInvalidArgument naming the flag, the entry and what is wrong with it.
Status validate_cors_origins(const std::vector<std::string>& origins);

/// Adds `token` to the answer's Vary header (one header, comma-separated; nothing when listed).
void add_vary(httplib::Response& res, std::string_view token);

/// The configured origins and what they allow. Origins compare as exact strings, as browsers send
/// them (a scheme or host in capitals in the list never matches: validate_cors_origins does not
/// lower-case; the documented form is lower-case).
class CorsPolicy {
 public:
  CorsPolicy() = default;
  explicit CorsPolicy(std::vector<std::string> origins);

  /// Whether any origin is configured (else no CORS header is ever sent and OPTIONS is a 405).
  bool enabled() const { return !origins_.empty(); }

  /// The Access-Control-Allow-Origin value for a request's Origin header: "*" when any origin is
  /// allowed, the origin itself when listed, "" when not allowed (or no Origin was sent).
  std::string allow_origin(std::string_view origin) const;

  /// Adds the CORS headers of a normal (non-preflight) answer: Access-Control-Allow-Origin and
  /// Access-Control-Expose-Headers (the x-* timing and token-count headers TGI and the OpenAI routes
  /// send, and the generation routes' x-request-id) for an allowed Origin, and "Vary: Origin" whenever the answer depends on it.
  void add_headers(const httplib::Request& req, httplib::Response& res) const;

  /// Answers a preflight request (OPTIONS with Origin and Access-Control-Request-Method), whatever
  /// the path: 204 with Access-Control-Allow-Origin / -Methods (the path's methods in `routes`; for a
  /// path that is none, those of any route, so the page reads the request's 404) / -Headers (the
  /// headers the browser asked for) / -Max-Age, and -Private-Network when asked (Chrome's Private
  /// Network Access), for an allowed origin; 403 with a JSON error naming the origin and the flag
  /// otherwise (also for several Origin headers), that error also in `*refused` when given.
  /// Returns false (nothing written) for any other request, or when the policy is off (the router's
  /// 405 / 404 then answer).
  bool answer_preflight(const RouteTable& routes, const httplib::Request& req, httplib::Response& res,
                        ApiError* refused = nullptr) const;

 private:
  std::vector<std::string> origins_;
  bool any_ = false;  ///< "*" is among origins_
};

}  // namespace mamba::server
