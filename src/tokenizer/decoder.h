// Decoders of tokenizer.json ("decoder"): ByteLevel, Metaspace, ByteFallback, Fuse, Strip,
// Replace, Sequence — HF tokenizers' `decode_chain` semantics: each decoder maps the list of token
// strings to a new list; the final text is the concatenation.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/pattern.h"

namespace mamba::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  /// Rewrites `tokens` in place (HF decode_chain).
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
  /// As decode_chain, but bytes stay raw: the decoders that turn invalid UTF-8 into U+FFFD
  /// (ByteLevel, ByteFallback) keep the bytes instead, so the result may be invalid UTF-8
  /// (Tokenizer::token_bytes: a token that is part of a character). Decoders after them take such
  /// bytes as they come: Metaspace and Strip step over them (utf8_next clamps at the end), Replace
  /// leaves a token that is not valid UTF-8 as it is.
  virtual void decode_chain_raw(std::vector<std::string>& tokens) const { decode_chain(tokens); }
};

/// HF ByteLevel decoder: all tokens' characters mapped back to bytes, decoded as UTF-8 with
/// U+FFFD for invalid sequences (String::from_utf8_lossy); one output string, no clean-up.
class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override;
  void decode_chain_raw(std::vector<std::string>& tokens) const override;  ///< the bytes, not made valid
};

/// HF Metaspace decoder: replacement → ' '; on the first token (unless prepend_scheme is
/// "never") replacement characters are removed instead.
class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, bool strip_first) : replacement_(replacement), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens) const override;

 private:
  char32_t replacement_;
  bool strip_first_;
};

/// The byte a ByteFallback token "<0xXX>" stands for (0–255), or −1 for any other token string
/// (HF's u8::from_str_radix of the two hex digits).
int byte_fallback_value(std::string_view token);

/// HF ByteFallback: runs of "<0xXX>" tokens become their bytes as UTF-8, or one U+FFFD per
/// byte when the run is not valid UTF-8.
class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override;
  void decode_chain_raw(std::vector<std::string>& tokens) const override;  ///< each "<0xXX>" its byte
};

/// HF Fuse: all tokens joined into one.
class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override;
};

/// HF Strip: removes up to `start` leading and `stop` trailing `content` characters per token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, std::size_t start, std::size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override;

 private:
  char32_t content_;
  std::size_t start_, stop_;
};

/// HF Replace decoder: every match of `pattern` in each token becomes `content`.
class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(SplitPattern pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override;
  /// As decode_chain; a token that is not valid UTF-8 (raw bytes from an earlier decoder) is left
  /// as it is (the pattern matches text).
  void decode_chain_raw(std::vector<std::string>& tokens) const override;

 private:
  SplitPattern pattern_;
  std::string content_;
};

/// HF Sequence decoder: each decoder's chain in order.
class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> items) : items_(std::move(items)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& d : items_) d->decode_chain(tokens);
  }
  void decode_chain_raw(std::vector<std::string>& tokens) const override {
    for (const auto& d : items_) d->decode_chain_raw(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> items_;
};

}  // namespace mamba::tok
