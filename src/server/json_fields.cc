#include "server/json_fields.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/bounded_json.h"
#include "core/utf8.h"

namespace mamba::server {

using nlohmann::json;

std::string ApiError::tgi_body() const { return dump_json(json{{"error", message}, {"error_type", type}}); }

std::string ApiError::openai_body() const {
  // The field a message names first, as it starts: "`messages[0].content` is required" → param.
  json param = nullptr;
  if (message.size() > 2 && message[0] == '`')
    if (const std::size_t end = message.find('`', 1); end != std::string::npos && end > 1) param = message.substr(1, end - 1);
  return dump_json(json{{"error",
                         {{"message", message}, {"type", openai_type()}, {"param", param}, {"code", openai_code.empty() ? type : openai_code}}}});
}

int ApiError::status_for(std::string_view path) const { return status == 422 && is_openai_path(path) ? 400 : status; }

std::string ApiError::body_for(std::string_view path) const {
  return is_openai_path(path) ? openai_body() : tgi_body();
}

const char* ApiError::openai_type() const {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 501: return "not_supported_error";
    case 503: return "unavailable_error";
    default: return status >= 500 || status == 424 ? "server_error" : "invalid_request_error";
  }
}

bool is_openai_path(std::string_view path) {
  // An OpenAI client's paths without their /v1 (a base URL that lacks it) get OpenAI's shape too:
  // their 404 is read by that client.
  return path == "/v1" || path.starts_with("/v1/") || path == "/completions" || path == "/chat/completions" ||
         path == "/models" || path.starts_with("/models/");
}

std::string shown_text(const std::string& s, std::size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  return s.substr(0, utf8_cut(s, max_bytes)) + fmt::format("… ({} bytes)", s.size());
}

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string dump_json(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

void JsonArrayWriter::push_raw(std::string_view json_text) {
  text_ += empty_ ? '[' : ',';
  text_ += json_text;
  empty_ = false;
}

std::string JsonArrayWriter::take() {
  if (empty_) text_ += '[';
  text_ += ']';
  std::string out = std::move(text_);
  text_ = prefix_;
  empty_ = true;
  return out;
}

std::pair<std::string, std::string> dump_around_member(const nlohmann::ordered_json& obj, std::string_view key) {
  constexpr std::string_view kMark = "\x01";  // a placeholder text no dump contains (control characters are escaped)
  std::string all = dump_with_member(obj, key, kMark);
  const std::size_t at = all.rfind(kMark);
  return {all.substr(0, at), all.substr(at + kMark.size())};
}

std::string dump_with_members(const nlohmann::ordered_json& obj, std::span<const std::pair<std::string_view, std::string_view>> raw) {
  std::string out = "{";
  auto member = [&out](std::string_view key, std::string_view value_text) {
    if (out.size() > 1) out += ',';
    out += dump_json(nlohmann::ordered_json(std::string(key)));
    out += ':';
    out += value_text;
  };
  auto raw_text = [&raw](std::string_view key) -> const std::string_view* {
    for (const auto& r : raw)
      if (r.first == key) return &r.second;
    return nullptr;
  };
  for (const auto& [k, v] : obj.items()) {
    if (const std::string_view* text = raw_text(k)) {
      member(k, *text);
    } else {
      member(k, dump_json(v));
    }
  }
  for (const auto& [k, text] : raw)
    if (!obj.contains(k)) member(k, text);
  out += '}';
  return out;
}

namespace {
/// nlohmann's parse error without its "; last read: '…'" part, which quotes the request's own text
/// up to the bad byte (a prompt's secret, or megabytes of it, into the answer and the log): line
/// and column remain, as in TGI's answer.
std::string without_last_read(std::string m) {
  const std::size_t at = m.find("; last read: '");
  if (at == std::string::npos) return m;
  const std::size_t expected = m.rfind("'; expected ");
  return expected != std::string::npos && expected > at ? m.erase(at, expected + 1 - at) : m.erase(at);
}
}  // namespace

std::optional<ApiError> parse_body_object(const std::string& body, json& out) {
  if (body.empty()) return ApiError::malformed("request body is empty: expected a JSON object");
  if (auto fault = parse_json_bounded(body, out))
    return ApiError::malformed(fmt::format("malformed JSON body: {}", without_last_read(std::move(fault->message))));
  if (!out.is_object()) {
    return ApiError::malformed(fmt::format("request body must be a JSON object, got {}", out.type_name()));
  }
  return std::nullopt;
}

namespace {
const json* field(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}
}  // namespace

std::optional<ApiError> get_bool(const json& obj, const char* key, bool& out) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) return ApiError::validation(fmt::format("`{}` must be a boolean, got {}", key, v->type_name()));
  out = v->get<bool>();
  return std::nullopt;
}

std::optional<std::int64_t> as_integer(const json& v) {
  if (v.is_number_unsigned()) {
    const std::uint64_t u = v.get<std::uint64_t>();
    return u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ? std::optional<std::int64_t>(u) : std::nullopt;
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_float()) {
    // [−2^63, 2^63) converts exactly.
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && d >= -0x1p63 && d < 0x1p63) return static_cast<std::int64_t>(d);
  }
  return std::nullopt;
}

std::optional<ApiError> get_int(const json& obj, const char* key, std::int64_t lo, std::int64_t hi, std::int64_t& out) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  // JSON's non-negative integers arrive unsigned: one above hi is named against hi alone.
  if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
    return ApiError::validation(fmt::format("`{}` must be <= {}, got {}", key, hi, v->get<std::uint64_t>()));
  const std::optional<std::int64_t> n = as_integer(*v);
  if (!n) {
    if (!v->is_number()) return ApiError::validation(fmt::format("`{}` must be an integer, got {}", key, v->type_name()));
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d))  // integral but past int64: the range check's message
      return ApiError::validation(fmt::format("`{}` must be between {} and {}, got {}", key, lo, hi, v->dump()));
    return ApiError::validation(fmt::format("`{}` must be an integer, got {}", key, v->dump()));
  }
  const std::int64_t x = *n;
  if (x < lo || x > hi) {
    return ApiError::validation(fmt::format("`{}` must be between {} and {}, got {}", key, lo, hi, x));
  }
  out = x;
  return std::nullopt;
}

std::optional<ApiError> get_u64(const json& obj, const char* key, std::uint64_t& out, bool& present) {
  const json* v = field(obj, key);
  present = false;
  if (!v) return std::nullopt;
  const double d = v->is_number_float() ? v->get<double>() : -1.0;
  if (v->is_number_unsigned() || (v->is_number_integer() && v->get<std::int64_t>() == 0)) {  // "-0" parses as a signed 0
    out = v->get<std::uint64_t>();
  } else if (d >= 0.0 && d < 0x1p64 && d == std::floor(d)) {  // 1.0, as the other integer fields take it
    out = static_cast<std::uint64_t>(d);
  } else {  // a negative integer, a fraction or a number past 2^64 − 1 (a float to JSON): the value named
    return ApiError::validation(fmt::format("`{}` must be an integer from 0 to {}, got {}", key,
                                            std::numeric_limits<std::uint64_t>::max(),
                                            v->is_number() ? v->dump() : std::string(v->type_name())));
  }
  present = true;
  return std::nullopt;
}

std::optional<ApiError> get_float(const json& obj, const char* key, float& out) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) return ApiError::validation(fmt::format("`{}` must be a number, got {}", key, v->type_name()));
  double d = v->get<double>();
  // Any value a 32-bit float holds (as mamba-cli takes): beyond ±FLT_MAX it would become ±inf.
  if (!std::isfinite(d) || std::fabs(d) > static_cast<double>(std::numeric_limits<float>::max())) {
    return ApiError::validation(
        fmt::format("`{}` must be a finite number of magnitude at most 3.4e38 (a 32-bit float), got {}", key, v->dump()));
  }
  // A non-zero value that a 32-bit float rounds to 0 (1e-300): named, not taken as a zero (a
  // temperature of 1e-300 was reported as "must be strictly positive").
  if (d != 0.0 && static_cast<float>(d) == 0.0f) {
    return ApiError::validation(fmt::format(
        "`{}` = {} is below 7.1e-46 in magnitude, which a 32-bit float rounds to 0 (give a value of larger magnitude, or 0 itself where the field takes 0)", key, v->dump()));
  }
  out = static_cast<float>(d);
  return std::nullopt;
}

std::optional<ApiError> get_string(const json& obj, const char* key, std::string& out, bool& present) {
  const json* v = field(obj, key);
  present = false;
  if (!v) return std::nullopt;
  if (!v->is_string()) return ApiError::validation(fmt::format("`{}` must be a string, got {}", key, v->type_name()));
  out = v->get<std::string>();
  present = true;
  return std::nullopt;
}

std::optional<ApiError> get_stop(const json& obj, const char* key, std::size_t max_count, std::vector<std::string>& out) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  std::vector<std::string> stops;
  if (v->is_string()) {
    stops.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const auto& e : *v) {
      if (!e.is_string()) return ApiError::validation(fmt::format("`{}` must be an array of strings, found {}", key, e.type_name()));
      stops.push_back(e.get<std::string>());
    }
  } else {
    return ApiError::validation(fmt::format("`{}` must be a string or an array of strings, got {}", key, v->type_name()));
  }
  if (stops.size() > max_count) {
    return ApiError::validation(fmt::format("`{}` supports up to {} stop sequences. Given: {}", key, max_count, stops.size()));
  }
  for (const auto& s : stops) {
    if (s.empty()) return ApiError::validation(fmt::format("`{}` must not contain empty strings", key));
  }
  out = std::move(stops);
  return std::nullopt;
}

std::optional<ApiError> reject_if_set(const json& obj, const char* key, const char* why) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  if ((v->is_boolean() && !v->get<bool>()) || (v->is_object() && v->empty()) || (v->is_array() && v->empty())) {
    return std::nullopt;
  }
  return ApiError::validation(fmt::format("`{}` is not supported by this server: {}", key, why));
}

}  // namespace mamba::server
