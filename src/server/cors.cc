#include "server/cors.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/route_table.h"

namespace mamba::server {

namespace {

/// The response headers a page's script may read besides the CORS-safelisted ones: TGI's timing
/// and token-count headers and the OpenAI routes' token counts.
constexpr const char* kExposedHeaders =
    "x-compute-type, x-compute-time, x-compute-characters, x-total-time, x-validation-time, x-queue-time, "
    "x-inference-time, x-time-per-token, x-prompt-tokens, x-generated-tokens";

/// How long a browser may cache a preflight's answer (seconds; browsers cap it: Chromium at 7200).
constexpr int kPreflightMaxAgeSeconds = 600;

/// Whether `s` is a comma-separated list of header names (RFC 9110 tokens), as browsers send in
/// Access-Control-Request-Headers; only then is it echoed back.
bool is_header_list(std::string_view s) {
  for (unsigned char c : s) {
    const bool token = std::isalnum(c) != 0 || std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
    if (!token && c != ',' && c != ' ') return false;
  }
  return s.size() <= 1024;
}

}  // namespace

bool is_cors_origin(std::string_view s) {
  if (s == "*" || s == "null") return true;
  const std::size_t sep = s.find("://");
  if (sep == std::string_view::npos || sep == 0) return false;
  const std::string_view scheme = s.substr(0, sep), host = s.substr(sep + 3);
  if (std::isalpha(static_cast<unsigned char>(scheme[0])) == 0) return false;
  for (unsigned char c : scheme)
    if (std::isalnum(c) == 0 && c != '+' && c != '-' && c != '.') return false;
  if (host.empty()) return false;
  for (unsigned char c : host)  // no path, query, fragment, userinfo, whitespace or control bytes
    if (c <= ' ' || c >= 0x7F || c == '/' || c == '?' || c == '#' || c == '@' || c == '\\' || c == ',') return false;
  return true;
}

Status validate_cors_origins(const std::vector<std::string>& origins) {
  for (const std::string& o : origins) {
    if (!is_cors_origin(o)) {
      std::string shown;
      for (unsigned char c : o.substr(0, 80)) shown += c < ' ' || c == 0x7F ? fmt::format("\\x{:02x}", c) : std::string(1, static_cast<char>(c));
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("--cors-allow-origin: '{}'{} is not an origin: expected scheme://host[:port] as a browser "
                                    "sends it (e.g. http://localhost:3000; no path or trailing slash), or * for any origin",
                                    shown, o.size() > 80 ? "…" : ""));
    }
  }
  return {};
}

CorsPolicy::CorsPolicy(std::vector<std::string> origins) : origins_(std::move(origins)) {
  any_ = std::find(origins_.begin(), origins_.end(), "*") != origins_.end();
}

std::string CorsPolicy::allow_origin(std::string_view origin) const {
  if (!enabled() || origin.empty()) return "";
  if (any_) return "*";
  return std::find(origins_.begin(), origins_.end(), origin) != origins_.end() ? std::string(origin) : "";
}

void CorsPolicy::add_headers(const httplib::Request& req, httplib::Response& res) const {
  // Off, or a preflight's answer (answer_preflight set its own headers).
  if (!enabled() || res.has_header("Access-Control-Allow-Origin")) return;
  // A cache must not hand one origin's answer (with its Allow-Origin, or without one) to another.
  if (!any_ && !res.has_header("Vary")) res.set_header("Vary", "Origin");
  const std::string allow = allow_origin(req.get_header_value("Origin"));
  if (allow.empty()) return;
  res.set_header("Access-Control-Allow-Origin", allow);
  res.set_header("Access-Control-Expose-Headers", kExposedHeaders);
}

bool CorsPolicy::answer_preflight(const RouteTable& routes, const httplib::Request& req, httplib::Response& res) const {
  if (!enabled() || req.method != "OPTIONS" || !req.has_header("Origin") || !req.has_header("Access-Control-Request-Method"))
    return false;
  const std::string methods = routes.allowed(req.path);
  if (methods.empty()) return false;
  const std::string origin = req.get_header_value("Origin");
  const std::string allow = allow_origin(origin);
  if (allow.empty()) {
    std::string shown;
    for (unsigned char c : origin.substr(0, 80)) shown += c < ' ' || c == 0x7F ? fmt::format("\\x{:02x}", c) : std::string(1, static_cast<char>(c));
    res.status = 403;
    res.set_content(ApiError{403, "forbidden",
                             fmt::format("origin '{}' is not allowed to call this server from a browser (the server's "
                                         "--cors-allow-origin list)", shown)}
                        .body(),
                    "application/json");
    return true;
  }
  res.status = 204;
  res.set_header("Access-Control-Allow-Origin", allow);
  res.set_header("Access-Control-Allow-Methods", methods);
  // The headers the page's request will carry (Content-Type: application/json, Authorization, the
  // OpenAI SDK's x-stainless-* ...): allowed as asked, as vLLM's and FastAPI's "*" do.
  if (const std::string asked = req.get_header_value("Access-Control-Request-Headers"); !asked.empty() && is_header_list(asked))
    res.set_header("Access-Control-Allow-Headers", asked);
  res.set_header("Access-Control-Max-Age", std::to_string(kPreflightMaxAgeSeconds));
  res.set_header("Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers");
  return true;
}

}  // namespace mamba::server
