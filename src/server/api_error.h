// ApiError: an HTTP error answer, in TGI's shape {error, error_type} on TGI's routes and in
// OpenAI's {"error": {message, type, param, code}} under /v1/. Bad input is always a 4xx naming the
// field; 5xx only for server-side failures.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace mamba::server {

struct ApiError {
  int status = 422;                    ///< 400 malformed, 401 auth, 403 origin not allowed (CORS preflight), 411 body without Content-Length or chunked framing, 413 too large, 414 request line too long, 431 request head too long, 415 multipart or Content-Encoded body, 416 bad Range, 422 validation, 429 overloaded, 501 Transfer-Encoding, 503 draining
  std::string type = "validation";     ///< error_type: validation | malformed_request | authentication | forbidden | length_required | payload_too_large | uri_too_long | unsupported_media_type | range_not_satisfiable | overloaded | not_implemented | unavailable | generation | cancelled | not_found | method_not_allowed | internal
  std::string message;
  /// OpenAI's `code` when it differs from `type` (e.g. "context_length_exceeded", which OpenAI's
  /// and vLLM's clients look for); empty: `type`.
  std::string openai_code;
  /// The request was admitted and its sequence ran (generation_error: a failure, a client that
  /// left, a shutdown): its line was logged when the sequence ended, and the scheduler counted it,
  /// so send_error neither counts nor logs it as a refusal.
  bool admitted = false;

  ApiError() = default;
  ApiError(int status_, std::string type_, std::string message_, std::string openai_code_ = {})
      : status(status_), type(std::move(type_)), message(std::move(message_)), openai_code(std::move(openai_code_)) {}

  static ApiError validation(std::string msg) { return {422, "validation", std::move(msg)}; }
  static ApiError malformed(std::string msg) { return {400, "malformed_request", std::move(msg)}; }
  /// The JSON body for an answer to `path` (is_openai_path): TGI's
  /// {"error": message, "error_type": type}, or under /v1/ OpenAI's
  /// {"error": {"message": message, "type": openai_type(), "param", "code"}} (openai_body).
  std::string body_for(std::string_view path) const;
  /// TGI's body {"error": message, "error_type": type}.
  std::string tgi_body() const;
  /// OpenAI's body {"error": {"message", "type", "param", "code"}} (the shape vLLM and llama.cpp
  /// answer: the OpenAI SDKs read err.message, err.type, err.param and err.code from it): type
  /// openai_type(), param the field the message starts with (`name`, else null), code openai_code
  /// or else `type`.
  std::string openai_body() const;
  /// The HTTP status for an answer to `path`: under /v1 a 422 (validation) is a 400, as OpenAI,
  /// vLLM and llama.cpp answer (the OpenAI SDKs raise BadRequestError for it); else `status`.
  int status_for(std::string_view path) const;
  /// OpenAI's error category for this answer: invalid_request_error (400, 405, 411, 413–416, 422,
  /// 431), authentication_error (401), permission_error (403), not_found_error (404),
  /// rate_limit_error (429), not_supported_error (501), unavailable_error (503), server_error
  /// (424, 5xx) — llama.cpp's names; `type` (validation, overloaded, …) goes into `code`.
  const char* openai_type() const;
};

/// Whether answers to `path` are OpenAI's (a path under /v1/, /v1 itself, and an OpenAI client's
/// paths without their /v1: /completions, /chat/completions, /models[/...]) or TGI's (every other
/// path: TGI's routes, /health, /info, /metrics, other unknown paths).
bool is_openai_path(std::string_view path);

/// A client's text (a header, a key) as an error message quotes it: `s` itself when at most
/// `max_bytes` long, else its first `max_bytes` bytes cut back to a UTF-8 character boundary and
/// "… (N bytes)" — a rejected value may be megabytes long. Never throws.
std::string shown_text(const std::string& s, std::size_t max_bytes);

}  // namespace mamba::server
