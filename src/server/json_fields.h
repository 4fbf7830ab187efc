// Typed access to JSON request fields with validation errors that name the field and say what
// was expected (TGI style: 422 "Input validation error: `top_p` must be > 0.0 and < 1.0").
// A field that is absent or null keeps the caller's default.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace mamba::server {

/// Parses a request body as a JSON object. Errors: 400 (malformed JSON, invalid UTF-8, arrays and
/// objects nested past kMaxJsonDepth levels (core/bounded_json.h), not an object).
std::optional<ApiError> parse_body_object(const std::string& body, nlohmann::json& out);

/// Reads `obj[key]` when present and not null. Errors: 422 naming `key` when the type is wrong
/// or the value is outside [lo, hi].
std::optional<ApiError> get_bool(const nlohmann::json& obj, const char* key, bool& out);
std::optional<ApiError> get_int(const nlohmann::json& obj, const char* key, std::int64_t lo, std::int64_t hi,
                                std::int64_t& out);
/// `v` as an int64 when it is one: a JSON integer, or an integral float (41.0, 1e3) in
/// [−2^63, 2^63), as get_int takes them; nullopt for anything else. get_int's and the token-id
/// prompts' reading of a number.
std::optional<std::int64_t> as_integer(const nlohmann::json& v);
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
/// dump_json for an object whose keys keep their insertion order (the OpenAI and TGI responses).
std::string dump_json(const nlohmann::ordered_json& j);

/// A JSON array written element by element as text, for answers with one entry per token (logprobs
/// of up to --max-total-tokens tokens): only one element's DOM lives at a time, where a DOM of the
/// whole answer took ~12 times the answer's size.
class JsonArrayWriter {
 public:
  /// `prefix`: text the array follows in take()'s result (e.g. `{"content":`), so the caller can
  /// finish an object in place instead of copying the array into it.
  explicit JsonArrayWriter(std::string prefix = {}) : prefix_(std::move(prefix)), text_(prefix_) {}
  /// Appends `v` (dump_json: invalid UTF-8 in its strings becomes U+FFFD; never throws).
  void push(const nlohmann::ordered_json& v) { push_raw(dump_json(v)); }
  /// `json_text` must be one JSON value's text (a dump_json result, or "null").
  void push_raw(std::string_view json_text);
  /// The prefix and the array's text "[...]"; the writer is left empty (with its prefix).
  std::string take();

 private:
  std::string prefix_;
  std::string text_;
  bool empty_ = true;
};

/// `obj` (a JSON object) as text with the values of the members named in `raw` replaced by their
/// JSON text (one JSON value's text each; a member not in `obj` comes last): splices text from
/// JsonArrayWriter into an answer, the members in `obj`'s order (a placeholder value keeps a
/// member's place).
std::string dump_with_members(const nlohmann::ordered_json& obj, std::span<const std::pair<std::string_view, std::string_view>> raw);
inline std::string dump_with_members(const nlohmann::ordered_json& obj,
                                     std::initializer_list<std::pair<std::string_view, std::string_view>> raw) {
  return dump_with_members(obj, std::span(raw.begin(), raw.size()));
}
/// `obj` (a JSON object) as the two texts around member `key`'s value: the first ends with
/// `"key":`, the second holds the members after it and the closing brace (the member comes last
/// when `obj` has no such key). before + value text + after = dump_with_member(obj, key, value
/// text), without the value text being copied.
std::pair<std::string, std::string> dump_around_member(const nlohmann::ordered_json& obj, std::string_view key);

/// dump_with_members for one member.
inline std::string dump_with_member(const nlohmann::ordered_json& obj, std::string_view key, std::string_view json_text) {
  return dump_with_members(obj, {{key, json_text}});
}

}  // namespace mamba::server
