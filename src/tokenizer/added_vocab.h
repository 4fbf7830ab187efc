// Added tokens ("added_tokens" of tokenizer.json) and their matching in text, as HF tokenizers'
// AddedVocabulary: tokens with normalized=false are matched in the raw input, the others in the
// normalized text (their content normalized too); leftmost-longest matching; single_word,
// lstrip and rstrip applied as in AddedVocabulary::find_matches.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mamba/tokenizer.h"

namespace mamba::tok {

class Normalizer;

/// A piece of the input: an added token (id ≥ 0) or text to tokenize (id = -1).
struct Segment {
  std::size_t begin = 0, end = 0;
  std::int32_t id = -1;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  /// Builds the matcher over `tokens` whose `normalized` flag equals `normalized_set`; contents
  /// of the normalized set are passed through `normalizer` (may be null).
  AddedTokenMatcher(const std::vector<AddedToken>& tokens, bool normalized_set, const Normalizer* normalizer);

  /// Splits `text` into segments covering it; empty `text` gives one empty text segment.
  void split(std::string_view text, std::vector<Segment>& out) const;
  bool empty() const { return patterns_.empty(); }

 private:
  struct Pattern {
    std::string content;
    std::int32_t id;
    bool single_word, lstrip, rstrip;
  };
  std::vector<Pattern> patterns_;
  // Patterns whose content starts with byte b, longest first.
  std::vector<std::uint32_t> by_first_byte_[256];
  // Quick rejection: second_byte_[b] has bit c set when some pattern starts with bytes b, c;
  // single_byte_[b] when the one-byte pattern "b" exists.
  std::bitset<256> second_byte_[256];
  bool single_byte_[256] = {};
};

}  // namespace mamba::tok
