// Header values as the server reads them: the few string rules its framing checks share
// (http_server.cc's pre-routing checks, BodyWait's reading of a parked head). RFC 9110 §5.5–5.6.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mamba::server {

/// Whether `s` is a plain non-negative decimal number below 2⁶⁴ (a valid Content-Length, RFC 9110
/// §8.6: digits only, no sign or spaces); its value in `*value` when given.
bool is_decimal(std::string_view s, std::uint64_t* value = nullptr);

/// `s` with ASCII letters in lower case (header values compared case-insensitively).
std::string lower_ascii(std::string s);

/// Whether `s` equals `lower` (given in lower case) ignoring ASCII case (header names, tokens).
bool equals_ascii_ci(std::string_view s, std::string_view lower);

/// `s` without the optional whitespace (SP / HTAB, RFC 9110 §5.6.3) at its ends.
std::string_view trim_ows(std::string_view s);

}  // namespace mamba::server
