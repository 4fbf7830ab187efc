// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): ByteLevel, Split, Sequence, Digits,
// Punctuation, Metaspace, WhitespaceSplit — each as in HF tokenizers, operating on a
// list of pieces (the "splits" of HF's PreTokenizedString) without offset tracking.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/pattern.h"

namespace mamba::tok {

/// The pieces of text being pre-tokenized: byte ranges of `buf`. `at_start` marks a piece that
/// begins at offset 0 of the original input (HF's `offsets_original().0 == 0`, used by
/// Metaspace's prepend_scheme "first").
struct PieceList {
  struct Span {
    std::size_t begin = 0, end = 0;
    bool at_start = false;
  };
  std::string buf;
  std::vector<Span> spans;

  std::string_view text(const Span& s) const { return std::string_view(buf).substr(s.begin, s.end - s.begin); }
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  /// Splits / rewrites every piece of `pieces`; empty pieces are dropped.
  virtual void pre_tokenize(PieceList& pieces) const = 0;
};

/// A pre-tokenizer that only splits each piece (no rewriting): subclasses give the matches and
/// the behaviour.
class SplittingPreTokenizer : public PreTokenizer {
 public:
  void pre_tokenize(PieceList& pieces) const final;

 protected:
  virtual void find_matches(std::string_view text, std::vector<Match>& out) const = 0;
  SplitBehavior behavior_ = SplitBehavior::kIsolated;
  bool invert_ = false;
};

/// HF `Split`: pattern (string or regex), behaviour, invert.
class SplitPreTokenizer final : public SplittingPreTokenizer {
 public:
  SplitPreTokenizer(SplitPattern pattern, SplitBehavior behavior, bool invert) : pattern_(std::move(pattern)) {
    behavior_ = behavior;
    invert_ = invert;
  }

 private:
  void find_matches(std::string_view text, std::vector<Match>& out) const override { pattern_.find_matches(text, out); }
  SplitPattern pattern_;
};

/// HF `Digits`: numeric characters (Rust char::is_numeric) isolated one by one
/// (individual_digits) or as contiguous runs.
class DigitsPreTokenizer final : public SplittingPreTokenizer {
 public:
  explicit DigitsPreTokenizer(bool individual_digits) {
    behavior_ = individual_digits ? SplitBehavior::kIsolated : SplitBehavior::kContiguous;
  }

 private:
  void find_matches(std::string_view text, std::vector<Match>& out) const override {
    find_char_matches(text, is_numeric, out);
  }
};

/// HF `Punctuation`: each punctuation character is a match, split with `behavior` (default Isolated).
class PunctuationPreTokenizer final : public SplittingPreTokenizer {
 public:
  explicit PunctuationPreTokenizer(SplitBehavior behavior) { behavior_ = behavior; }

 private:
  void find_matches(std::string_view text, std::vector<Match>& out) const override {
    find_char_matches(text, is_punctuation, out);
  }
};

/// HF `WhitespaceSplit`: splits on whitespace, removing it.
class WhitespaceSplitPreTokenizer final : public SplittingPreTokenizer {
 public:
  WhitespaceSplitPreTokenizer() { behavior_ = SplitBehavior::kRemoved; }

 private:
  void find_matches(std::string_view text, std::vector<Match>& out) const override {
    find_char_matches(text, is_whitespace, out);
  }
};

/// HF `ByteLevel`: optional prefix space, optional GPT-2 regex split, then every byte replaced by
/// its mapped character. When `map_bytes` is false the mapping is left to the model (the
/// tokenizer does so when ByteLevel is the last pre-tokenizer, so that the BPE cache can be keyed
/// by raw bytes).
class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  /// Errors: the GPT-2 regex failed to compile (kInternal).
  static Result<std::unique_ptr<ByteLevelPreTokenizer>> create(bool add_prefix_space, bool use_regex);
  void pre_tokenize(PieceList& pieces) const override;
  void set_map_bytes(bool map) { map_bytes_ = map; }
  bool add_prefix_space() const { return add_prefix_space_; }
  /// Whether pieces are split by kGpt2Regex (use_regex).
  bool splits_by_regex() const { return regex_split_ != nullptr; }

 private:
  bool add_prefix_space_ = false;
  bool map_bytes_ = true;
  std::unique_ptr<SplitPreTokenizer> regex_split_;
};

/// HF `Metaspace`: ' ' → replacement, prefix per prepend_scheme ("always", "first", "never"),
/// then (split) split before each replacement character (MergedWithNext).
class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  MetaspacePreTokenizer(char32_t replacement, Prepend prepend, bool split);
  void pre_tokenize(PieceList& pieces) const override;

 private:
  std::string replacement_;
  Prepend prepend_;
  bool split_;
};

/// HF `Sequence`: each pre-tokenizer in order.
class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> items) : items_(std::move(items)) {}
  void pre_tokenize(PieceList& pieces) const override {
    for (const auto& p : items_) p->pre_tokenize(pieces);
  }
  std::vector<std::unique_ptr<PreTokenizer>>& items() { return items_; }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> items_;
};

/// The GPT-2 pre-tokenization regex used by ByteLevel (use_regex).
inline constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace mamba::tok
