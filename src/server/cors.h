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

namespace mamba::server {

class RouteTable;

/// Whether `s` is an origin as a browser's Origin header serializes one: scheme "://" host
/// [":" port], no path, query, fragment, userinfo, whitespace or trailing slash (e.g.
/// "http://localhost:3000", "https://app.example.com"); or "*" (any origin) or "null" (pages from
/// file:// and sandboxed frames).
bool is_cors_origin(std::string_view s);

/// Checks a --cors-allow-origin list: every entry passes is_cors_origin. Errors: kInvalidArgument
/// naming the flag, the entry and the expected form.
Status validate_cors_origins(const std::vector<std::string>& origins);

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
  /// send) for an allowed Origin, and "Vary: Origin" whenever the answer depends on it.
  void add_headers(const httplib::Request& req, httplib::Response& res) const;

  /// Answers a preflight request (OPTIONS with Origin and Access-Control-Request-Method) for a path
  /// in `routes`: 204 with Access-Control-Allow-Origin / -Methods (the path's methods) / -Headers
  /// (the headers the browser asked for) / -Max-Age for an allowed origin; 403 with a JSON error
  /// naming the origin and the flag otherwise. Returns false (nothing written) for any other
  /// request, or when the policy is off or the path unknown (the router's 404 / 405 then answer).
  bool answer_preflight(const RouteTable& routes, const httplib::Request& req, httplib::Response& res) const;

 private:
  std::vector<std::string> origins_;
  bool any_ = false;  ///< "*" is among origins_
};

}  // namespace mamba::server
