#include "server/cors.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <utility>

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/route_table.h"

namespace mamba::server {

namespace {

/// The response headers a page's script may read besides the CORS-safelisted ones: TGI's timing
/// and token-count headers, the OpenAI routes' token counts and the generation routes' request id.
constexpr const char* kExposedHeaders =
    "x-compute-type, x-compute-time, x-compute-characters, x-total-time, x-validation-time, x-queue-time, "
    "x-inference-time, x-time-per-token, x-prompt-tokens, x-generated-tokens, x-request-id";

/// How long a browser may cache a preflight's answer (seconds; browsers cap it: Chromium at 7200).
constexpr int kPreflightMaxAgeSeconds = 600;

/// `s` for a message also shown on a terminal (a refused flag): cut as shown_text cuts a client's
/// value (80 bytes), control bytes as \xNN.
std::string shown_value(std::string_view s) {
  std::string out;
  for (unsigned char c : shown_text(std::string(s), 80)) out += c < ' ' || c == 0x7F ? fmt::format("\\x{:02x}", c) : std::string(1, static_cast<char>(c));
  return out;
}

/// Whether `s` is a comma-separated list of header names (RFC 9110 tokens), as browsers send in
/// Access-Control-Request-Headers; only then is it echoed back.
bool is_header_list(std::string_view s) {
  for (unsigned char c : s) {
    const bool token = std::isalnum(c) != 0 || std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
    if (!token && c != ',' && c != ' ') return false;
  }
  return true;  // (a header line is at most 8 KiB: the request head's bounds)
}

}  // namespace

std::string cors_origin_problem(std::string_view s) {
  if (s == "*" || s == "null") return "";
  if (s.empty()) return "the entry is empty (two commas in a row, one at an end, or only spaces?)";
  auto lower = [](std::string_view v) {
    std::string out(v);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  if (lower(s) == "null") return "use 'null' (lower case), the Origin of pages opened from file:// and of sandboxed frames";
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front())
    return fmt::format("drop the quotes: use {}", shown_value(s.substr(1, s.size() - 2)));
  const std::size_t sep = s.find("://");
  const std::string_view scheme = sep == std::string_view::npos ? std::string_view() : s.substr(0, sep);
  bool scheme_ok = !scheme.empty() && std::isalpha(static_cast<unsigned char>(scheme[0])) != 0;
  for (unsigned char c : scheme)
    if (std::isalnum(c) == 0 && c != '+' && c != '-' && c != '.') scheme_ok = false;
  if (!scheme_ok) return "expected scheme://host[:port], e.g. http://localhost:3000";
  std::string_view rest = s.substr(sep + 3);
  if (lower(scheme) == "file") return "pages opened from file:// send the Origin null: list null";
  if (rest.find_first_of(";|") != std::string_view::npos)
    return "one origin per entry: separate them by commas (or repeat the flag), not ';' or '|'";
  for (unsigned char c : rest)
    if (c <= ' ' || c == 0x7F || c == '@' || c == '\\' || c == ',')
      return "expected scheme://host[:port], e.g. http://localhost:3000 (no spaces, control bytes, user name or commas)";
  if (const std::size_t cut = rest.find_first_of("/?#"); cut != std::string_view::npos) {
    // Suggest the origin only when it is one as it stands, else say what else it needs.
    const std::string origin(s.substr(0, sep + 3 + cut));
    if (const std::string next = cors_origin_problem(origin); !next.empty())
      return fmt::format("a browser's Origin has no path, query or trailing slash (drop '{}'); then '{}': {}", shown_value(rest.substr(cut)),
                         shown_value(origin), next);
    return fmt::format("a browser's Origin has no path, query or trailing slash: use '{}'", origin);
  }
  // host [":" port]; an IPv6 host in brackets.
  std::string_view host = rest, port;
  const bool v6 = !rest.empty() && rest.front() == '[';
  if (v6) {
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos) return "an IPv6 host needs its closing ']'";
    host = rest.substr(0, close + 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') return "expected scheme://host[:port] after the IPv6 host";
      port = rest.substr(close + 2);
      if (port.empty()) return "the port after ':' is empty";
    }
  } else if (const std::size_t colon = rest.find(':'); colon != std::string_view::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (port.find(':') != std::string_view::npos) return "an IPv6 host goes in brackets: scheme://[host]:port";
    if (port.empty()) return "the port after ':' is empty";
  }
  if (host.empty()) return "the host is empty";
  if (host.find('*') != std::string_view::npos)
    return "wildcards in a host are not matched: list each origin, or give * alone for any origin";
  for (unsigned char c : host)
    if (c >= 0x80) return "a browser sends a non-ASCII host in its punycode form (xn--...): list that";
  std::string canonical_host = lower(host);
  if (v6) {
    // The WHATWG URL serializer writes an IPv6 address compressed, in lower-case hex (as inet_ntop).
    const std::string inner(host.substr(1, host.size() - 2));
    in6_addr a{};
    char text[INET6_ADDRSTRLEN];
    if (inner.empty() || inet_pton(AF_INET6, inner.c_str(), &a) != 1 || inet_ntop(AF_INET6, &a, text, sizeof text) == nullptr)
      return fmt::format("'{}' is not an IPv6 address", host);
    canonical_host = fmt::format("[{}]", text);
  } else {
    if (host.size() > 253) return "the host is longer than 253 characters (DNS's limit)";
    for (unsigned char c : host)
      if (std::isalnum(c) == 0 && c != '-' && c != '.' && c != '_')
        return fmt::format("a host holds letters, digits, '-', '_' and '.' only, got '{}'", shown_value(host));
    // Labels: none empty but a trailing dot's (browsers keep "example.com." as it is).
    const std::string_view body = host.back() == '.' ? host.substr(0, host.size() - 1) : host;
    std::size_t label = 0;
    for (std::size_t i = 0; i <= body.size(); ++i) {
      if (i == body.size() || body[i] == '.') {
        if (label == 0) return fmt::format("the host '{}' has an empty label", host);
        label = 0;
      } else {
        ++label;
      }
    }
    // A host whose last label is a number is an IPv4 address to a browser, which writes it as four
    // decimal numbers ("127.1" and "0x7f.0.0.1" are http://127.0.0.1).
    const std::string_view last = body.substr(body.rfind('.') == std::string_view::npos ? 0 : body.rfind('.') + 1);
    const bool numeric_last = !last.empty() && (std::all_of(last.begin(), last.end(), [](unsigned char c) { return std::isdigit(c) != 0; }) ||
                                                (last.size() >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X')));
    if (numeric_last) {
      in_addr a{};
      char text[INET_ADDRSTRLEN];
      const std::string h(body);
      if (inet_aton(h.c_str(), &a) == 0 || inet_ntop(AF_INET, &a, text, sizeof text) == nullptr)
        return fmt::format("'{}' is not an IPv4 address (browsers read a host ending in a number as one)", host);
      canonical_host = text;
    }
  }
  std::string canonical_port;
  if (!port.empty()) {
    long value = 0;
    for (unsigned char c : port) {
      if (std::isdigit(c) == 0 || value > 65535) return "the port must be a number from 1 to 65535";
      value = value * 10 + (c - '0');
    }
    if (value < 1 || value > 65535) return "the port must be a number from 1 to 65535";
    const std::string sch = lower(scheme);
    if ((sch == "http" && value == 80) || (sch == "https" && value == 443))
      return fmt::format("a browser leaves out the default port {}: use '{}://{}'", value, sch, canonical_host);
    canonical_port = fmt::format(":{}", value);
  }
  const std::string canonical = fmt::format("{}://{}{}", lower(scheme), canonical_host, canonical_port);
  if (canonical != s) {
    if (lower(s) == canonical) return fmt::format("a browser sends scheme and host in lower case: use '{}'", canonical);
    return fmt::format("a browser writes this origin as '{}': use that", canonical);
  }
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

void add_vary(httplib::Response& res, std::string_view token) {
  std::string vary = res.get_header_value("Vary");
  std::size_t start = 0;
  while (start < vary.size()) {  // listed already?
    std::size_t end = vary.find(',', start);
    if (end == std::string::npos) end = vary.size();
    std::string_view item = std::string_view(vary).substr(start, end - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.size() == token.size() &&
        std::equal(item.begin(), item.end(), token.begin(), [](char a, char b) { return std::tolower(a) == std::tolower(b); }))
      return;
    start = end + 1;
  }
  res.headers.erase("Vary");
  res.set_header("Vary", vary.empty() ? std::string(token) : vary + ", " + std::string(token));
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
  if (!any_) add_vary(res, "Origin");
  if (req.get_header_value_count("Origin") != 1) return;  // none, or several (no browser sends that)
  const std::string allow = allow_origin(req.get_header_value("Origin"));
  if (allow.empty()) return;
  res.set_header("Access-Control-Allow-Origin", allow);
  res.set_header("Access-Control-Expose-Headers", kExposedHeaders);
}

bool CorsPolicy::answer_preflight(const RouteTable& routes, const httplib::Request& req, httplib::Response& res,
                                  ApiError* refused) const {
  if (!enabled() || req.method != "OPTIONS" || !req.has_header("Origin") || !req.has_header("Access-Control-Request-Method"))
    return false;
  // A path that is no route gets the methods any route has: the page's request then gets its 404
  // with the CORS headers, which it can read (a refused preflight is only a "CORS error" there).
  std::string methods = routes.allowed(req.path);
  if (methods.empty()) methods = "GET, HEAD, POST";
  // A method the path does not take is allowed too: the page's request then gets its readable 405
  // (with Allow), not an unexplained CORS error.
  if (const std::string asked = req.get_header_value("Access-Control-Request-Method");
      !asked.empty() && is_header_list(asked) && asked.find(',') == std::string::npos && asked.find(' ') == std::string::npos &&
      (", " + methods + ",").find(", " + asked + ",") == std::string::npos)
    methods += ", " + asked;
  const std::string origin = req.get_header_value("Origin");
  const std::string allow = req.get_header_value_count("Origin") == 1 ? allow_origin(origin) : "";
  if (allow.empty()) {
    const ApiError e{403, "forbidden",
                     req.get_header_value_count("Origin") != 1
                         ? std::string("a preflight with several Origin headers is not answered")
                         : fmt::format("origin '{}' is not allowed to call this server from a browser (the server's "
                                       "--cors-allow-origin list)", shown_value(origin))};
    res.status = 403;
    res.set_content(e.body_for(req.path), "application/json");
    if (refused != nullptr) *refused = e;
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
