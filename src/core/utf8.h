// Two byte-level UTF-8 facts used where text is shown or counted outside the tokenizer (error
// messages that shorten a value, file names cut to a length, OpenAI's and TGI's character counts).
// They rely only on continuation bytes being 10xxxxxx, so they work on any bytes; validation and
// decoding live in tokenizer/unicode.h.
#pragma once

#include <cstddef>
#include <string_view>

namespace mamba {

/// The largest n ≤ min(max_bytes, s.size()) at which `s` can be cut without splitting a UTF-8
/// character (s[n] is not a continuation byte, or n is the end). Steps back at most 3 bytes: in
/// bytes that are not UTF-8 it may still cut inside a run of continuation bytes.
inline std::size_t utf8_cut(std::string_view s, std::size_t max_bytes) {
  std::size_t n = max_bytes < s.size() ? max_bytes : s.size();
  for (int back = 0; back < 3 && n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80; ++back) --n;
  return n;
}

/// Characters (code points) in UTF-8 `s`: the bytes that are not continuation bytes, as Python's
/// len(str) and Rust's chars().count() count valid UTF-8.
inline std::size_t utf8_char_count(std::string_view s) {
  std::size_t n = 0;
  for (const char ch : s) n += (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
  return n;
}

}  // namespace mamba
