// Tokenizer: HF `tokenizer.json` interpreted component by component exactly as HF tokenizers does.
//
// Supported: normalizers NFC, NFKC, Sequence, Prepend, Replace; pre-tokenizers ByteLevel,
// Split (regex / string), Sequence, Digits, Punctuation, Metaspace; model BPE (byte_fallback,
// ignore_merges, merges as "a b" strings or ["a","b"] pairs); decoders ByteLevel, Metaspace,
// ByteFallback, Fuse, Strip, Replace, Sequence. Added tokens are matched before normalization /
// pre-tokenization honouring special / normalized / lstrip / rstrip / single_word. Any other
// component type → kUnsupported error naming it (never an approximation).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mamba/status.h"

namespace mamba {

/// An entry of tokenizer.json's "added_tokens".
struct AddedToken {
  std::int32_t id = 0;
  std::string content;
  bool special = false, normalized = false, lstrip = false, rstrip = false, single_word = false;
};

/// Immutable after construction; encode/decode are thread-safe (const).
class Tokenizer {
 public:
  /// Loads tokenizer.json. Errors: kIo / kFormat (file, JSON path of the bad field),
  /// kUnsupported (component type named).
  static Result<Tokenizer> from_file(const std::string& path);
  static Result<Tokenizer> from_json_text(const std::string& json_text, const std::string& source = "tokenizer.json");

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  /// Text (UTF-8) → ids, like HF `encode(text, add_special_tokens=False)`... plus the
  /// post-processor's special tokens when `add_special_tokens` is true. Invalid UTF-8 → kInvalidArgument.
  Result<std::vector<std::int32_t>> encode(std::string_view text, bool add_special_tokens = false) const;
  /// Ids → text like HF `decode(ids, skip_special_tokens)` (no clean-up of spaces).
  /// An id ≥ size() → kInvalidArgument naming it.
  Result<std::string> decode(std::span<const std::int32_t> ids, bool skip_special_tokens = false) const;

  /// Number of ids the tokenizer defines (max id + 1 over the vocab and added tokens).
  std::int64_t size() const;
  /// The token string of `id` (vocab form, e.g. "Ġthe"), or nullopt.
  std::optional<std::string> id_to_token(std::int32_t id) const;
  std::optional<std::int32_t> token_to_id(std::string_view token) const;
  /// True for added tokens flagged special.
  bool is_special(std::int32_t id) const;
  const std::vector<AddedToken>& added_tokens() const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  Tokenizer();
  std::unique_ptr<Impl> impl_;
};

/// Incremental detokenizer: feeding ids one at a time yields, concatenated, exactly
/// `decode(all ids)`; text is released only at UTF-8 character boundaries (never U+FFFD mid-stream).
/// Holds a reference to the Tokenizer (must outlive it).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special_tokens = false);
  /// Adds one id; returns the newly completed text (possibly empty). Id ≥ size() → error.
  Result<std::string> push(std::int32_t id);
  /// Returns whatever is still held (incomplete UTF-8 at the end is decoded as HF would, with U+FFFD).
  std::string flush();

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  std::vector<std::int32_t> ids_;  ///< window: prefix ids (already released) + pending ids
  std::size_t read_index_ = 0;     ///< ids_[0, read_index_) is the prefix
  std::string prefix_text_;        ///< decode(prefix ids) — subtracted from the window's text
};

}  // namespace mamba
