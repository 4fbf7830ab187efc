#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>

namespace mamba::tok {

namespace {

int utf8proc_options(UnicodeForm form) {
  switch (form) {
    case UnicodeForm::kNFC: return UTF8PROC_STABLE | UTF8PROC_COMPOSE;
    case UnicodeForm::kNFD: return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE;
    case UnicodeForm::kNFKC: return UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    case UnicodeForm::kNFKD: return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
  }
  return UTF8PROC_STABLE | UTF8PROC_COMPOSE;
}

// Appends the normalized form of `chunk` (valid UTF-8) to `out`.
void normalize_chunk(std::string_view chunk, int options, std::string& out) {
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(chunk.data()),
                                          static_cast<utf8proc_ssize_t>(chunk.size()), &result,
                                          static_cast<utf8proc_option_t>(options));
  if (n < 0 || !result) {
    out.append(chunk);  // cannot happen on valid UTF-8; keep the text rather than lose it
  } else {
    out.append(reinterpret_cast<const char*>(result), static_cast<std::size_t>(n));
  }
  std::free(result);
}

}  // namespace

void UnicodeNormalizer::normalize(std::string& s) const {
  // Fast path: pure ASCII is invariant under every normalization form.
  std::size_t first = 0;
  while (first < s.size() && static_cast<unsigned char>(s[first]) < 0x80) ++first;
  if (first == s.size()) return;
  const int options = utf8proc_options(form_);
  std::string out;
  out.reserve(s.size() + 16);
  // Chunks: an ASCII run is copied; a non-ASCII run, together with the ASCII character before it
  // (it may compose with following combining marks), is normalized as a whole. No composition
  // has an ASCII second character, so the text can be cut before any ASCII character.
  std::size_t i = first == 0 ? 0 : first - 1;
  out.append(s, 0, i);
  while (i < s.size()) {
    std::size_t j = i;
    if (static_cast<unsigned char>(s[j]) < 0x80) ++j;  // the leading ASCII starter
    while (j < s.size() && static_cast<unsigned char>(s[j]) >= 0x80) ++j;
    normalize_chunk(std::string_view(s).substr(i, j - i), options, out);
    // Copy the following ASCII run except its last character (which starts the next chunk when a
    // non-ASCII run follows).
    std::size_t k = j;
    while (k < s.size() && static_cast<unsigned char>(s[k]) < 0x80) ++k;
    if (k == s.size()) {
      out.append(s, j, k - j);
      break;
    }
    if (k > j) {
      out.append(s, j, k - j - 1);
      i = k - 1;
    } else {
      i = k;  // cannot happen: the non-ASCII run ended at an ASCII byte or the end
    }
  }
  s.swap(out);
}

}  // namespace mamba::tok
