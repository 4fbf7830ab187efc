#include "tokenizer/decoder.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"

namespace mamba::tok {

void ByteLevelDecoder::decode_chain(std::vector<std::string>& tokens) const {
  std::string bytes;
  for (const auto& t : tokens) byte_level_decode_token(t, bytes);
  tokens.assign(1, utf8_lossy(bytes));
}

void ByteLevelDecoder::decode_chain_raw(std::vector<std::string>& tokens) const {
  std::string bytes;
  for (const auto& t : tokens) byte_level_decode_token(t, bytes);
  tokens.assign(1, std::move(bytes));
}

void MetaspaceDecoder::decode_chain(std::vector<std::string>& tokens) const {
  for (std::size_t k = 0; k < tokens.size(); ++k) {
    const std::string& t = tokens[k];
    std::string out;
    out.reserve(t.size());
    std::size_t i = 0;
    while (i < t.size()) {
      const std::size_t b = i;
      const char32_t c = utf8_next(t, i);
      if (c == replacement_) {
        if (!(k == 0 && strip_first_)) out.push_back(' ');
      } else {
        out.append(t, b, i - b);
      }
    }
    tokens[k] = std::move(out);
  }
}

namespace {

// Rust u8::from_str_radix(s, 16) for a 2-character s (an optional '+' sign is accepted).
int parse_hex_byte(std::string_view s) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (s[0] == '+') return hex(s[1]);
  const int hi = hex(s[0]), lo = hex(s[1]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/// Ends a run of byte tokens: its bytes as one token when they are valid UTF-8 (or `raw`), else
/// one U+FFFD per byte.
void flush_bytes(std::string& bytes, std::vector<std::string>& out, bool raw) {
  if (bytes.empty()) return;
  if (raw || utf8_valid_prefix(bytes) == bytes.size()) {
    out.push_back(bytes);
  } else {
    for (std::size_t k = 0; k < bytes.size(); ++k) out.emplace_back(kReplacementChar);
  }
  bytes.clear();
}

void byte_fallback(std::vector<std::string>& tokens, bool raw) {
  std::vector<std::string> out;
  out.reserve(tokens.size());
  std::string bytes;
  for (auto& t : tokens) {
    if (const int byte = byte_fallback_value(t); byte >= 0) {
      bytes.push_back(static_cast<char>(byte));
    } else {
      flush_bytes(bytes, out, raw);
      out.push_back(std::move(t));
    }
  }
  flush_bytes(bytes, out, raw);
  tokens = std::move(out);
}

}  // namespace

int byte_fallback_value(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  return parse_hex_byte(t.substr(3, 2));
}

void ByteFallbackDecoder::decode_chain(std::vector<std::string>& tokens) const { byte_fallback(tokens, false); }
void ByteFallbackDecoder::decode_chain_raw(std::vector<std::string>& tokens) const { byte_fallback(tokens, true); }

void FuseDecoder::decode_chain(std::vector<std::string>& tokens) const {
  std::string joined;
  for (const auto& t : tokens) joined.append(t);
  tokens.assign(1, std::move(joined));
}

void StripDecoder::decode_chain(std::vector<std::string>& tokens) const {
  for (auto& t : tokens) {
    std::vector<std::pair<std::size_t, char32_t>> chars;  // (byte offset, code point)
    std::size_t i = 0;
    while (i < t.size()) {
      const std::size_t b = i;
      chars.emplace_back(b, utf8_next(t, i));
    }
    std::size_t start_cut = 0;
    for (std::size_t k = 0; k < start_ && k < chars.size(); ++k) {
      if (chars[k].second != content_) break;
      start_cut = k + 1;
    }
    std::size_t stop_cut = chars.size();
    for (std::size_t k = 0; k < stop_ && k < chars.size(); ++k) {
      const std::size_t idx = chars.size() - k - 1;
      if (chars[idx].second != content_) break;
      stop_cut = idx;
    }
    if (start_cut >= stop_cut) {
      t.clear();
      continue;
    }
    const std::size_t b = chars[start_cut].first;
    const std::size_t e = stop_cut < chars.size() ? chars[stop_cut].first : t.size();
    t = t.substr(b, e - b);
  }
}

void ReplaceDecoder::decode_chain(std::vector<std::string>& tokens) const {
  for (auto& t : tokens) t = pattern_.replace_all(t, content_);
}

void ReplaceDecoder::decode_chain_raw(std::vector<std::string>& tokens) const {
  for (auto& t : tokens)
    if (utf8_valid_prefix(t) == t.size()) t = pattern_.replace_all(t, content_);
}

}  // namespace mamba::tok
