// Normalizers of tokenizer.json ("normalizer"): NFC, NFD, NFKC, NFKD, Sequence, Prepend, Replace.
// Each reproduces the HF tokenizers component of the same name on the normalized string (offsets
// are not tracked: encode needs only the text).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/pattern.h"

namespace mamba::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  /// Replaces `s` (valid UTF-8) by its normalized form.
  virtual void normalize(std::string& s) const = 0;
};

enum class UnicodeForm { kNFC, kNFD, kNFKC, kNFKD };

/// Unicode normalization through utf8proc. ASCII text is left untouched without a library call
/// (a boundary before an ASCII character is always a normalization boundary).
class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(UnicodeForm form) : form_(form) {}
  void normalize(std::string& s) const override;

 private:
  UnicodeForm form_;
};

/// HF `Prepend`: prepends `prepend` to a non-empty string.
class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prepend) : prepend_(std::move(prepend)) {}
  void normalize(std::string& s) const override {
    if (!s.empty()) s.insert(0, prepend_);
  }

 private:
  std::string prepend_;
};

/// HF `Replace`: every match of `pattern` (string or regex) becomes `content`.
class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(SplitPattern pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string& s) const override { s = pattern_.replace_all(s, content_); }

 private:
  SplitPattern pattern_;
  std::string content_;
};

/// HF `Sequence`: applies each normalizer in order.
class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> items) : items_(std::move(items)) {}
  void normalize(std::string& s) const override {
    for (const auto& n : items_) n->normalize(s);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> items_;
};

}  // namespace mamba::tok
