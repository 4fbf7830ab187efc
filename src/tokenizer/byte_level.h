// GPT-2's byte ↔ unicode mapping (HF tokenizers `bytes_char` / `char_bytes`): every byte is shown
// as a printable character — bytes '!'..'~', '¡'..'¬', '®'..'ÿ' as themselves, the other 68 as
// U+0100 onwards in byte order (so ' ' → 'Ġ' U+0120, '\n' → 'Ċ' U+010A).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mamba::tok {

/// UTF-8 of the character that stands for `byte` (1 or 2 bytes long).
std::string_view byte_to_char_utf8(std::uint8_t byte);

/// Appends the byte-level form of `bytes` to `out`.
void byte_level_encode(std::string_view bytes, std::string& out);

/// The byte a mapped character stands for, or -1 when `cp` is not in the mapping.
int char_to_byte(char32_t cp);

/// HF ByteLevel decoding of one token: the bytes its characters stand for, or the token's own
/// bytes when any character is outside the mapping (e.g. an added token "<|endoftext|>").
void byte_level_decode_token(std::string_view token, std::string& out_bytes);

}  // namespace mamba::tok
