#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

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

/// Longest run of code points that may become combining marks that utf8proc is given to order:
/// it puts marks in canonical order by exchanging neighbours, quadratic in a run (240 KB of
/// alternating U+0F72 U+0F71 took 47 s; an 8 MB request body would take hours). Longer runs are
/// ordered here first, by a stable sort.
constexpr std::size_t kMaxMarkRun = 32;

/// Whether `c` is a combining mark or may decompose to text holding one (a precomposed letter,
/// U+0F73 = two marks): a conservative test for the run length above.
bool may_hold_mark(utf8proc_int32_t c) {
  const utf8proc_property_t* p = utf8proc_get_property(c);
  return p->combining_class != 0 || p->decomp_seqindex != UINT16_MAX;
}

/// Whether `chunk` (valid UTF-8) has more than kMaxMarkRun such code points in a row.
bool has_long_mark_run(std::string_view chunk) {
  std::size_t run = 0;
  for (std::size_t i = 0; i < chunk.size();) {
    utf8proc_int32_t c = 0;
    const utf8proc_ssize_t len = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(chunk.data() + i),
                                                  static_cast<utf8proc_ssize_t>(chunk.size() - i), &c);
    if (len <= 0) return false;
    run = may_hold_mark(c) ? run + 1 : 0;
    if (run > kMaxMarkRun) return true;
    i += static_cast<std::size_t>(len);
  }
  return false;
}

/// The full decomposition of `chunk` (canonical, or compatibility with UTF8PROC_COMPAT in
/// `options`) in canonical order (UAX #15 §3.11: each run of marks stably sorted by combining
/// class), in O(n log n). Normalizing it gives what normalizing `chunk` gives: it is already
/// decomposed and ordered, so utf8proc's own ordering pass is linear on it.
std::string ordered_decomposition(std::string_view chunk, int options) {
  const auto decompose_options = static_cast<utf8proc_option_t>(UTF8PROC_DECOMPOSE | (options & UTF8PROC_COMPAT));
  std::vector<utf8proc_int32_t> cps;
  cps.reserve(chunk.size());
  std::vector<utf8proc_int32_t> buf(32);
  for (std::size_t i = 0; i < chunk.size();) {
    utf8proc_int32_t c = 0;
    const utf8proc_ssize_t len = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(chunk.data() + i),
                                                  static_cast<utf8proc_ssize_t>(chunk.size() - i), &c);
    if (len <= 0) return std::string(chunk);  // cannot happen on valid UTF-8
    i += static_cast<std::size_t>(len);
    int boundclass = UTF8PROC_BOUNDCLASS_START;
    utf8proc_ssize_t n = utf8proc_decompose_char(c, buf.data(), static_cast<utf8proc_ssize_t>(buf.size()),
                                                 decompose_options, &boundclass);
    if (n > static_cast<utf8proc_ssize_t>(buf.size())) {
      buf.resize(static_cast<std::size_t>(n));
      boundclass = UTF8PROC_BOUNDCLASS_START;
      n = utf8proc_decompose_char(c, buf.data(), n, decompose_options, &boundclass);
    }
    if (n < 0) return std::string(chunk);
    cps.insert(cps.end(), buf.begin(), buf.begin() + n);
  }
  const auto ccc = [](utf8proc_int32_t c) { return utf8proc_get_property(c)->combining_class; };
  for (std::size_t i = 0; i < cps.size();) {
    std::size_t j = i;
    while (j < cps.size() && ccc(cps[j]) != 0) ++j;
    if (j - i > 1)
      std::stable_sort(cps.begin() + static_cast<std::ptrdiff_t>(i), cps.begin() + static_cast<std::ptrdiff_t>(j),
                       [&](utf8proc_int32_t a, utf8proc_int32_t b) { return ccc(a) < ccc(b); });
    i = j > i ? j : i + 1;
  }
  std::string out;
  out.reserve(cps.size() * 3);
  utf8proc_uint8_t enc[4];
  for (const utf8proc_int32_t c : cps)
    out.append(reinterpret_cast<const char*>(enc), static_cast<std::size_t>(utf8proc_encode_char(c, enc)));
  return out;
}

// Appends the normalized form of `chunk` (valid UTF-8) to `out`.
void normalize_chunk(std::string_view chunk, int options, std::string& out) {
  std::string ordered;
  if (has_long_mark_run(chunk)) {
    ordered = ordered_decomposition(chunk, options);
    chunk = ordered;
  }
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
