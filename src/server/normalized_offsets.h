// Offsets in the tokenizer's normalised text mapped back to the text a client sent.
//
// The server computes token offsets (TGI /tokenize's byte spans, OpenAI's echo text_offset) from
// the decoded tokens, i.e. in the tokenizer's normalised text. GPT-NeoX's tokenizer (and the
// embedded model's) normalises to NFC, so for an input NFC changes (a decomposed accent,
// "e" + U+0301, as macOS text often has) those offsets drift from the input after that point.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace mamba::server {

/// Maps byte offsets of `normalized` to byte offsets of `input`, where `normalized` is what the
/// tokenizer made of `input`. When `normalized` is `input` cut into segments at every starter
/// (a code point of canonical combining class 0) that does not compose with the starter before it
/// (Hangul V / T jamo after L / LV do), with each segment put in NFC (UAX #15; utf8proc) — what NFC
/// does — an offset maps to its segment's bounds in `input`. Otherwise (other normalisers, special tokens
/// in the text) offsets map to themselves, clamped to `input`'s size (the behaviour before).
/// Both strings must be valid UTF-8 and outlive nothing (copies what it needs).
class NormalizedOffsets {
 public:
  NormalizedOffsets(std::string_view input, std::string_view normalized);
  /// Where a token starting at byte `n` of `normalized` starts in `input`: its segment's start
  /// (the same byte when `n` is a segment boundary).
  std::size_t start(std::size_t n) const { return map(n, false); }
  /// Where a token ending at byte `n` of `normalized` ends in `input`: its segment's end.
  std::size_t stop(std::size_t n) const { return map(n, true); }
  /// Whether offsets are mapped through segments (false: identity, clamped).
  bool mapped() const { return !norm_starts_.empty(); }

 private:
  std::size_t map(std::size_t n, bool round_up) const;
  std::size_t input_size_ = 0;
  // Segment i covers input_starts_[i] .. input_starts_[i + 1] of the input and norm_starts_[i] ..
  // norm_starts_[i + 1] of the normalised text; both end with the total sizes.
  std::vector<std::size_t> input_starts_, norm_starts_;
};

}  // namespace mamba::server
