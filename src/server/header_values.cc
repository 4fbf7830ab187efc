#include "server/header_values.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace mamba::server {

bool is_decimal(std::string_view s, std::uint64_t* value) {
  std::uint64_t v = 0;
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      std::from_chars(s.data(), s.data() + s.size(), v).ec != std::errc())
    return false;
  if (value != nullptr) *value = v;
  return true;
}

std::string lower_ascii(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

bool equals_ascii_ci(std::string_view s, std::string_view lower) {
  return s.size() == lower.size() &&
         std::equal(s.begin(), s.end(), lower.begin(), [](char a, char b) { return (a >= 'A' && a <= 'Z' ? a + 32 : a) == b; });
}

std::string_view trim_ows(std::string_view s) {
  const std::size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

}  // namespace mamba::server
