// Patterns that split or rewrite text: PCRE2 regexes (the Oniguruma patterns of HF tokenizers),
// literal strings and character predicates, plus the split "behaviours" of HF's
// NormalizedString::split (Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mamba/status.h"

namespace mamba::tok {

/// A half-open byte range [begin, end) of a string; `is_match` marks pattern matches.
struct Match {
  std::size_t begin = 0, end = 0;
  bool is_match = false;
};

/// A compiled PCRE2 regex (UTF + UCP, JIT when available). Immutable and thread-safe.
/// `\s` / `\S` are rewritten to the Unicode White_Space set so that they mean what Oniguruma
/// (used by HF tokenizers) means (PCRE2's `\s` also matches U+180E).
class Regex {
 public:
  /// Errors: kFormat naming `where` and PCRE2's message with the offset in the pattern.
  static Result<std::shared_ptr<const Regex>> compile(std::string_view pattern, std::string_view where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  /// Appends every non-overlapping match of `text` (valid UTF-8), left to right, to `out` as
  /// (begin, end) pairs. An empty match advances the search by one character.
  void find_all(std::string_view text, std::vector<std::pair<std::size_t, std::size_t>>& out) const;

 private:
  Regex() = default;
  void* code_ = nullptr;  // pcre2_code*
};

/// HF `SplitPattern`: a literal string or a regex.
class SplitPattern {
 public:
  static SplitPattern literal(std::string s) {
    SplitPattern p;
    p.literal_ = std::move(s);
    return p;
  }
  static SplitPattern regex(std::shared_ptr<const Regex> r) {
    SplitPattern p;
    p.regex_ = std::move(r);
    return p;
  }
  /// HF's Pattern::find_matches: covers the whole of `text` with alternating non-match / match
  /// ranges. Empty text gives one empty non-match.
  void find_matches(std::string_view text, std::vector<Match>& out) const;
  /// Replaces every match by `content` (HF Replace normalizer / decoder).
  std::string replace_all(std::string_view text, std::string_view content) const;

 private:
  SplitPattern() = default;
  std::string literal_;
  std::shared_ptr<const Regex> regex_;
};

/// HF SplitDelimiterBehavior.
enum class SplitBehavior : std::uint8_t { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

/// Parses "Removed", "Isolated", ... (also the lower-case forms). False when unknown.
bool parse_split_behavior(std::string_view name, SplitBehavior* out);

/// Matches of a character predicate, in HF's `impl Pattern for Fn(char) -> bool` form: every
/// character for which `pred` holds is its own match.
template <class Pred>
void find_char_matches(std::string_view text, Pred pred, std::vector<Match>& out);

/// Applies `behavior` to `matches` (which cover a string) and appends the kept ranges to `out`
/// (empty ranges included; callers drop them). `invert` flips each is_match first.
void apply_split_behavior(std::vector<Match>& matches, SplitBehavior behavior, bool invert,
                          std::vector<Match>& out);

}  // namespace mamba::tok

#include "tokenizer/unicode.h"

namespace mamba::tok {

template <class Pred>
void find_char_matches(std::string_view text, Pred pred, std::vector<Match>& out) {
  out.clear();
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  std::size_t last = 0, i = 0;
  while (i < text.size()) {
    const std::size_t b = i;
    const char32_t c = utf8_next(text, i);
    if (pred(c)) {
      if (last < b) out.push_back({last, b, false});
      out.push_back({b, i, true});
      last = i;
    }
  }
  if (last < text.size()) out.push_back({last, text.size(), false});
}

}  // namespace mamba::tok
