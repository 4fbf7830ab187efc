#include "server/normalized_offsets.h"

#include <utf8proc.h>

#include <algorithm>
#include <string>

#include "tokenizer/normalizer.h"
#include "tokenizer/unicode.h"

namespace mamba::server {

namespace {

/// NFC of `s` (valid UTF-8) appended to `out`, as the tokenizer's normalizer makes it (long runs of
/// marks ordered in O(n log n), not by utf8proc's quadratic exchanges).
void append_nfc(std::string_view s, std::string& out) {
  std::string t(s);
  tok::UnicodeNormalizer(tok::UnicodeForm::kNFC).normalize(t);
  out += t;
}

/// Longest segment a starter is tested against (bytes): Hangul L V T is 9, a consonant with a
/// two-part vowel sign and marks a few more. A longer one (a starter and a long run of marks) is
/// cut before the next starter untested; where that cut is wrong, the whole-text check after the
/// pass falls back to offsets unmapped. This bounds the work per starter (a run of starters that
/// keep merging, U+0F73 …, made it cubic in the run's length).
constexpr std::size_t kMaxTestedSegment = 64;

/// Whether starter `b` composes with the segment `a` before it: NFC of the pair differs from the
/// pair of NFCs (the segment as a whole: T jamo composes with an L V pair, not with V alone). True
/// for Hangul V / T jamo after L / LV, the other starters that are the second of a canonical
/// composition (NFC_Quick_Check = Maybe: Bengali / Oriya / Tamil / Sinhala two-part vowel signs …)
/// and the starters whose decomposition begins with a mark (U+0F73). All of them are ≥ U+0300.
bool composes_with_previous(std::string_view a, std::string_view b, utf8proc_int32_t b_code) {
  if (b_code < 0x300 || a.size() > kMaxTestedSegment) return false;
  std::string ab, sep;
  append_nfc(std::string(a).append(b), ab);
  append_nfc(a, sep);
  append_nfc(b, sep);
  return ab != sep;
}

}  // namespace

NormalizedOffsets::NormalizedOffsets(std::string_view input, std::string_view normalized) : input_size_(input.size()) {
  if (input == normalized) return;  // identity
  // One pass first: another normaliser's text (or special tokens) is not the input's NFC at all.
  if (tok::utf8_valid_prefix(input) != input.size()) return;  // invalid UTF-8: identity
  std::string whole;
  append_nfc(input, whole);
  if (whole != normalized) return;
  std::vector<std::size_t> in_starts, norm_starts;
  std::string built;
  built.reserve(normalized.size());
  std::size_t seg = 0, i = 0;
  auto close_segment = [&](std::size_t end) {
    in_starts.push_back(seg);
    norm_starts.push_back(built.size());
    append_nfc(input.substr(seg, end - seg), built);
  };
  while (i < input.size()) {
    utf8proc_int32_t c = 0;
    const utf8proc_ssize_t len = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(input.data() + i),
                                                  static_cast<utf8proc_ssize_t>(input.size() - i), &c);
    if (len <= 0) return;  // invalid UTF-8: identity
    if (i > seg && utf8proc_get_property(c)->combining_class == 0) {
      // A starter opens a segment, unless it composes with the starter before it (then NFC of the
      // two segments apart would not be NFC of the whole).
      const std::string_view cs = input.substr(i, static_cast<std::size_t>(len));
      if (!composes_with_previous(input.substr(seg, i - seg), cs, c)) {
        close_segment(i);
        seg = i;
      }
    }
    i += static_cast<std::size_t>(len);
  }
  if (input.size() > seg) close_segment(input.size());
  if (built != normalized) return;  // not (segment-wise) NFC of the input: identity
  in_starts.push_back(input.size());
  norm_starts.push_back(built.size());
  input_starts_ = std::move(in_starts);
  norm_starts_ = std::move(norm_starts);
}

std::size_t NormalizedOffsets::map(std::size_t n, bool round_up) const {
  if (norm_starts_.empty()) return std::min(n, input_size_);
  // The last segment boundary ≤ n.
  const auto it = std::upper_bound(norm_starts_.begin(), norm_starts_.end(), n);
  if (it == norm_starts_.begin()) return 0;
  const auto k = static_cast<std::size_t>(it - norm_starts_.begin()) - 1;
  if (norm_starts_[k] == n || !round_up || k + 1 >= input_starts_.size()) return input_starts_[k];
  return input_starts_[k + 1];
}

}  // namespace mamba::server
