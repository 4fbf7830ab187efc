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

/// `s` for a message: its first 80 bytes, control bytes as \xNN, "…" when cut.
std::string shown_value(std::string_view s) {
  std::string out;
  for (unsigned char c : s.substr(0, 80)) out += c < ' ' || c == 0x7F ? fmt::format("\\x{:02x}", c) : std::string(1, static_cast<char>(c));
  return s.size() > 80 ? out + "…" : out;
}

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

std::string cors_origin_problem(std::string_view s) {
  if (s == "*" || s == "null") return "";
  auto lower = [](std::string_view v) {
    std::string out(v);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  const std::size_t sep = s.find("://");
  const std::string_view scheme = sep == std::string_view::npos ? std::string_view() : s.substr(0, sep);
  bool scheme_ok = !scheme.empty() && std::isalpha(static_cast<unsigned char>(scheme[0])) != 0;
  for (unsigned char c : scheme)
    if (std::isalnum(c) == 0 && c != '+' && c != '-' && c != '.') scheme_ok = false;
  if (!scheme_ok) return "expected scheme://host[:port], e.g. http://localhost:3000";
  std::string_view rest = s.substr(sep + 3);
  for (unsigned char c : rest)
    if (c <= ' ' || c == 0x7F || c == '@' || c == '\\' || c == ',')
      return "expected scheme://host[:port], e.g. http://localhost:3000 (no spaces, control bytes, user name or commas)";
  if (const std::size_t cut = rest.find_first_of("/?#"); cut != std::string_view::npos)
    return fmt::format("a browser's Origin has no path, query or trailing slash: use '{}'", s.substr(0, sep + 3 + cut));
  // host [":" port]; an IPv6 host in brackets.
  std::string_view host = rest, port;
  if (!rest.empty() && rest.front() == '[') {
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos) return "an IPv6 host needs its closing ']'";
    host = rest.substr(0, close + 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') return "expected scheme://host[:port] after the IPv6 host";
      port = rest.substr(close + 2);
      if (port.empty()) return "the port after ':' is empty";
    }
  } else if (const std::size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (port.empty()) return "the port after ':' is empty";
  }
  if (host.empty()) return "the host is empty";
  if (host.find('*') != std::string_view::npos)
    return "wildcards in a host are not matched: list each origin, or give * alone for any origin";
  for (unsigned char c : host)
    if (c >= 0x80) return "a browser sends a non-ASCII host in its punycode form (xn--...): list that";
  if (host.front() != '[') {
    std::size_t label = 0;
    for (std::size_t i = 0; i <= host.size(); ++i) {
      if (i == host.size() || host[i] == '.') {
        if (label == 0) return fmt::format("the host '{}' has an empty label", host);
        label = 0;
      } else {
        ++label;
      }
    }
  }
  if (!port.empty()) {
    long value = 0;
    for (unsigned char c : port) {
      if (std::isdigit(c) == 0 || value > 65535) return "the port must be a number from 1 to 65535";
      value = value * 10 + (c - '0');
    }
    if (value < 1 || value > 65535) return "the port must be a number from 1 to 65535";
    const std::string sch = lower(scheme);
    if ((sch == "http" && value == 80) || (sch == "https" && value == 443))
      return fmt::format("a browser leaves out the default port {}: use '{}'", value,
                         lower(s.substr(0, sep + 3)) + lower(host));
  }
  if (lower(s) != s) return fmt::format("a browser sends scheme and host in lower case: use '{}'", lower(s));
  return "";
}

bool is_cors_origin(std::string_view s) { return cors_origin_problem(s).empty(); }

Status validate_cors_origins(const std::vector<std::string>& origins) {
  for (const std::string& o : origins) {
    if (const std::string problem = cors_origin_problem(o); !problem.empty()) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("--cors-allow-origin: '{}' is not an origin as a browser sends it: {}", shown_value(o), problem));
    }
    if (o == "*" && origins.size() > 1)
      return make_error(ErrorCode::kInvalidArgument,
                        "--cors-allow-origin: * allows every origin: give it alone, or list the origins without it");
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
  if (req.get_header_value_count("Origin") != 1) return;  // none, or several (no browser sends that)
  const std::string allow = allow_origin(req.get_header_value("Origin"));
  if (allow.empty()) return;
  res.set_header("Access-Control-Allow-Origin", allow);
  res.set_header("Access-Control-Expose-Headers", kExposedHeaders);
}

bool CorsPolicy::answer_preflight(const RouteTable& routes, const httplib::Request& req, httplib::Response& res) const {
  if (!enabled() || req.method != "OPTIONS" || !req.has_header("Origin") || !req.has_header("Access-Control-Request-Method"))
    return false;
  // A path that is no route gets the methods any route has: the page's request then gets its 404
  // with the CORS headers, which it can read (a refused preflight is only a "CORS error" there).
  std::string methods = routes.allowed(req.path);
  if (methods.empty()) methods = "GET, HEAD, POST";
  const std::string origin = req.get_header_value("Origin");
  const std::string allow = req.get_header_value_count("Origin") == 1 ? allow_origin(origin) : "";
  if (allow.empty()) {
    res.status = 403;
    res.set_content(ApiError{403, "forbidden",
                             req.get_header_value_count("Origin") != 1
                                 ? std::string("a preflight with several Origin headers is not answered")
                                 : fmt::format("origin '{}' is not allowed to call this server from a browser (the server's "
                                               "--cors-allow-origin list)", shown_value(origin))}
                        .body(),
                    "application/json");
    return true;
  }
  res.status = 204;
  res.set_header("Access-Control-Allow-Origin", allow);
  res.set_header("Access-Control-Allow-Methods", methods);
  // Chrome's Private Network Access: a public page calling a server on a private address (the
  // default 127.0.0.1) asks first; a listed origin was allowed by the operator.
  if (req.get_header_value("Access-Control-Request-Private-Network") == "true")
    res.set_header("Access-Control-Allow-Private-Network", "true");
  // The headers the page's request will carry (Content-Type: application/json, Authorization, the
  // OpenAI SDK's x-stainless-* ...): allowed as asked, as vLLM's and FastAPI's "*" do.
  if (const std::string asked = req.get_header_value("Access-Control-Request-Headers"); !asked.empty() && is_header_list(asked))
    res.set_header("Access-Control-Allow-Headers", asked);
  res.set_header("Access-Control-Max-Age", std::to_string(kPreflightMaxAgeSeconds));
  res.set_header("Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers");
  return true;
}

}  // namespace mamba::server
