#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/unicode.h"

namespace mamba::tok {

namespace {

struct Tables {
  std::array<char32_t, 256> byte_to_cp{};
  std::array<std::string, 256> byte_to_utf8;
  std::array<std::int16_t, 324> cp_to_byte{};  // code points < 0x144
  Tables() {
    cp_to_byte.fill(-1);
    auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const char32_t cp = printable(b) ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      byte_to_cp[b] = cp;
      utf8_append(byte_to_utf8[b], cp);
      cp_to_byte[cp] = static_cast<std::int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

std::string_view byte_to_char_utf8(std::uint8_t byte) { return tables().byte_to_utf8[byte]; }

void byte_level_encode(std::string_view bytes, std::string& out) {
  const auto& t = tables().byte_to_utf8;
  for (char c : bytes) out.append(t[static_cast<unsigned char>(c)]);
}

int char_to_byte(char32_t cp) {
  const auto& t = tables().cp_to_byte;
  return cp < t.size() ? t[cp] : -1;
}

void byte_level_decode_token(std::string_view token, std::string& out_bytes) {
  const std::size_t start = out_bytes.size();
  std::size_t i = 0;
  while (i < token.size()) {
    const int b = char_to_byte(utf8_next(token, i));
    if (b < 0) {
      out_bytes.resize(start);
      out_bytes.append(token);
      return;
    }
    out_bytes.push_back(static_cast<char>(b));
  }
}

}  // namespace mamba::tok
