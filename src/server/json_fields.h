// Typed access to JSON request fields with validation errors that name the field and say what
// was expected (TGI style: 422 "Input validation error: `top_p` must be > 0.0 and < 1.0").
// A field that is absent or null keeps the caller's default.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace mamba::server {

/// Parses a request body as a JSON object. Errors: 400 (malformed JSON, invalid UTF-8, not an object).
std::optional<ApiError> parse_body_object(const std::string& body, nlohmann::json& out);

/// Reads `obj[key]` when present and not null. Errors: 422 naming `key` when the type is wrong
/// or the value is outside [lo, hi].
std::optional<ApiError> get_bool(const nlohmann::json& obj, const char* key, bool& out);
std::optional<ApiError> get_int(const nlohmann::json& obj, const char* key, std::int64_t lo, std::int64_t hi,
                                std::int64_t& out);
std::optional<ApiError> get_u64(const nlohmann::json& obj, const char* key, std::uint64_t& out, bool& present);
std::optional<ApiError> get_float(const nlohmann::json& obj, const char* key, float& out);
std::optional<ApiError> get_string(const nlohmann::json& obj, const char* key, std::string& out, bool& present);
/// `stop`: a string or an array of strings (≤ max_count, none empty).
std::optional<ApiError> get_stop(const nlohmann::json& obj, const char* key, std::size_t max_count,
                                 std::vector<std::string>& out);
/// Fields that this server does not implement: 422 when present with a non-default value.
std::optional<ApiError> reject_if_set(const nlohmann::json& obj, const char* key, const char* why);

/// JSON text that never throws: invalid UTF-8 in strings is replaced by U+FFFD.
std::string dump_json(const nlohmann::json& j);
/// dump_json for an object whose keys keep their insertion order (OpenAI responses).
std::string dump_json(const nlohmann::ordered_json& j);

}  // namespace mamba::server
