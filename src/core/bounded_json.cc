// parse_json_bounded (bounded_json.h): nlohmann's own DOM builder behind a SAX handler that counts
// the depth and, on request, notes a repeated top-level key.
#include "core/bounded_json.h"

#include <algorithm>

#include <set>

#include <fmt/format.h>

namespace mamba {

namespace {

class BoundedDom {
 public:
  using json = nlohmann::json;
  BoundedDom(json& out, int max_depth, bool note_keys) : dom_(out, /*allow_exceptions=*/false), max_depth_(max_depth), note_keys_(note_keys) {}
  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return dom_.number_float(v, s); }
  bool string(json::string_t& v) { return dom_.string(v); }
  bool binary(json::binary_t& v) { return dom_.binary(v); }
  bool start_object(std::size_t n) { return enter() && dom_.start_object(n); }
  bool key(json::string_t& k) {
    if (note_keys_ && depth_ == 1 && !repeated && !keys_.insert(k).second) repeated = k;
    return dom_.key(k);
  }
  bool end_object() { return --depth_, dom_.end_object(); }
  bool start_array(std::size_t n) { return enter() && dom_.start_array(n); }
  bool end_array() { return --depth_, dom_.end_array(); }
  bool parse_error(std::size_t pos, const std::string& token, const nlohmann::detail::exception& e) {
    std::string_view what = e.what();  // "[json.exception.parse_error.101] parse error at …"
    if (what.starts_with("[json.exception.")) {
      if (const std::size_t end = what.find("] "); end != std::string_view::npos) what.remove_prefix(end + 2);
    }
    error = std::string(what);
    return dom_.parse_error(pos, token, e);
  }

  std::optional<std::string> repeated;
  std::string error;
  bool too_deep = false;

 private:
  bool enter() {
    if (++depth_ <= max_depth_) return true;
    too_deep = true;
    return false;  // ends the parse
  }
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  int max_depth_;
  bool note_keys_;
  int depth_ = 0;
  std::set<std::string> keys_;
};

}  // namespace

std::optional<JsonParseFault> parse_json_bounded(std::string_view text, nlohmann::json& out, int max_depth,
                                                 std::optional<std::string>* repeated_top_key) {
  // nlohmann's lexer takes a NUL byte for the end of the input, so "{}\0junk" parsed as {} (a
  // request body or config.json with anything after a NUL was accepted). JSON text has no raw NUL
  // anywhere (RFC 8259: control characters in strings are escaped, whitespace is " \t\n\r").
  if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos) {
    const std::size_t newline = text.rfind('\n', nul);
    const std::size_t column = newline == std::string_view::npos ? nul + 1 : nul - newline;
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(nul), '\n');
    return JsonParseFault{false, fmt::format("parse error at line {}, column {}: a NUL byte (byte {} of {}), which JSON "
                                             "text cannot contain", line, column, nul + 1, text.size())};
  }
  BoundedDom sax(out, max_depth, repeated_top_key != nullptr);
  const bool parsed = nlohmann::json::sax_parse(text.begin(), text.end(), &sax, nlohmann::json::input_format_t::json, /*strict=*/true);
  if (repeated_top_key != nullptr) *repeated_top_key = sax.repeated;
  if (sax.too_deep) return JsonParseFault{true, fmt::format("arrays and objects nested more than {} levels deep", max_depth)};
  if (!parsed || out.is_discarded()) return JsonParseFault{false, sax.error.empty() ? "invalid JSON" : sax.error};
  return std::nullopt;
}

}  // namespace mamba
