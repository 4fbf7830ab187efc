// ApiError: an HTTP error answer {error, error_type} as TGI writes them (also used on the OpenAI
// routes). Bad input is always a 4xx naming the field; 5xx only for server-side failures.
#pragma once

#include <cstddef>
#include <string>

namespace mamba::server {

struct ApiError {
  int status = 422;                    ///< 400 malformed, 401 auth, 403 origin not allowed (CORS preflight), 411 body without Content-Length, 413 too large, 414 request line too long, 431 request head too long, 415 multipart or Content-Encoded body, 416 bad Range, 422 validation, 429 overloaded, 501 Transfer-Encoding, 503 draining
  std::string type = "validation";     ///< error_type: validation | malformed_request | authentication | forbidden | length_required | payload_too_large | uri_too_long | unsupported_media_type | range_not_satisfiable | overloaded | not_implemented | unavailable | generation | cancelled | not_found | method_not_allowed | internal
  std::string message;

  static ApiError validation(std::string msg) { return {422, "validation", std::move(msg)}; }
  static ApiError malformed(std::string msg) { return {400, "malformed_request", std::move(msg)}; }
  /// JSON body {"error": message, "error_type": type}.
  std::string body() const;
};

/// A client's text (a header, a key) as an error message quotes it: `s` itself when at most
/// `max_bytes` long, else its first `max_bytes` bytes cut back to a UTF-8 character boundary and
/// "… (N bytes)" — a rejected value may be megabytes long. Never throws.
std::string shown_text(const std::string& s, std::size_t max_bytes);

}  // namespace mamba::server
