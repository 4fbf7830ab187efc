// UTF-8 and Unicode-property helpers shared by the tokenizer components.
//
// All functions work on UTF-8 byte strings (std::string / std::string_view). Code points are
// char32_t. Character classes follow Rust's `char` methods, because HF tokenizers (Rust) defines
// the behaviour we reproduce: is_whitespace = Unicode White_Space, is_numeric = categories
// Nd/Nl/No, is_punctuation = ASCII punctuation or categories Pc/Pd/Ps/Pe/Pi/Pf/Po.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mamba::tok {

/// Byte offset of the first invalid UTF-8 sequence in `s` (overlong forms, surrogates and
/// code points > U+10FFFF are invalid), or s.size() when `s` is valid.
std::size_t utf8_valid_prefix(std::string_view s);

/// Length in bytes (1–4) of the UTF-8 sequence led by byte `lead` (1 for invalid lead bytes).
inline std::size_t utf8_len(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

/// Decodes the code point at s[i] (s must be valid UTF-8) and advances i past it.
char32_t utf8_next(std::string_view s, std::size_t& i);

/// Appends the UTF-8 encoding of `cp` to `out`.
void utf8_append(std::string& out, char32_t cp);

/// Decodes arbitrary bytes as Rust's String::from_utf8_lossy does: each maximal invalid subpart
/// (Unicode §3.9, "substitution of maximal subparts") becomes one U+FFFD.
std::string utf8_lossy(std::string_view bytes);

/// True when `s` ends with an incomplete (but so far valid) multi-byte UTF-8 sequence.
bool utf8_ends_incomplete(std::string_view s);
/// Length in bytes (1–3) of the valid but incomplete UTF-8 sequence that `s` ends with, or 0.
std::size_t utf8_incomplete_tail(std::string_view s);

bool is_whitespace(char32_t c);   ///< Rust char::is_whitespace (White_Space property)
bool is_numeric(char32_t c);      ///< Rust char::is_numeric (Nd, Nl, No)
bool is_punctuation(char32_t c);  ///< HF tokenizers' is_punc: ASCII punctuation or P* categories
bool is_word_char(char32_t c);    ///< regex `\w` (Unicode): alphabetic, marks, digits, Pc, ZWJ/ZWNJ

/// The U+FFFD replacement character in UTF-8.
inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

}  // namespace mamba::tok
