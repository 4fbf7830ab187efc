#include "io/json_lenient.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <limits>

#include "core/bounded_json.h"

namespace mamba::io {
namespace {

bool starts_with_at(const std::string& s, std::size_t i, const char* word) {
  std::size_t n = std::strlen(word);
  return s.compare(i, n, word) == 0;
}

bool is_ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Rewrites bare Infinity / -Infinity / NaN outside strings into quoted strings.
std::string quote_python_floats(const std::string& text) {
  std::string out;
  out.reserve(text.size() + 16);
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      out.push_back(c);
      if (c == '\\' && i + 1 < text.size()) {
        out.push_back(text[++i]);
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      out.push_back(c);
      continue;
    }
    bool boundary_before = out.empty() || !is_ident_char(out.back());
    const char* words[] = {"-Infinity", "Infinity", "NaN"};
    bool replaced = false;
    if (boundary_before) {
      for (const char* w : words) {
        std::size_t n = std::strlen(w);
        if (starts_with_at(text, i, w) && (i + n >= text.size() || !is_ident_char(text[i + n]))) {
          out += '"';
          out += w;
          out += '"';
          i += n - 1;
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) out.push_back(c);
  }
  return out;
}

Result<double> special_float_from_string(const std::string& s, const std::string& what) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  if (s == "Infinity" || s == "inf" || s == "+inf" || s == "+Infinity") return inf;
  if (s == "-Infinity" || s == "-inf") return -inf;
  if (s == "NaN" || s == "nan") return std::numeric_limits<double>::quiet_NaN();
  // A number written as a string.
  if (!s.empty()) {
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (end != nullptr && *end == '\0') return v;
  }
  return make_error(ErrorCode::kFormat, fmt::format("{}: expected a number, got the string \"{}\"", what, s));
}

}  // namespace

Result<nlohmann::json> parse_json_lenient(const std::string& text, const std::string& source) {
  nlohmann::json j;
  if (auto fault = parse_json_bounded(quote_python_floats(text), j))
    return make_error(ErrorCode::kFormat, fmt::format("{}: invalid JSON: {}", source, fault->message));
  return j;
}

Result<double> json_to_double(const nlohmann::json& v, const std::string& what) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) return special_float_from_string(v.get<std::string>(), what);
  if (v.is_object() && v.size() == 1 && v.contains("__float__")) {
    const auto& inner = v["__float__"];
    if (inner.is_number()) return inner.get<double>();
    if (inner.is_string()) return special_float_from_string(inner.get<std::string>(), what);
  }
  return make_error(ErrorCode::kFormat, fmt::format("{}: expected a number, got {}", what, v.dump()));
}

}  // namespace mamba::io
