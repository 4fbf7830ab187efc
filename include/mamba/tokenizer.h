// Tokenizer: HF `tokenizer.json` interpreted component by component exactly as HF tokenizers
// (the Rust core, v0.23) does — checked token for token against the npm `tokenizers` package.
//
// Supported: normalizers NFC, NFD, NFKC, NFKD, Sequence, Prepend, Replace; pre-tokenizers
// ByteLevel (add_prefix_space, use_regex: the GPT-2 regex incl. `\s+(?!\S)` through PCRE2 with
// UTF + UCP + JIT), Split (string or regex pattern; Removed / Isolated / MergedWithPrevious /
// MergedWithNext / Contiguous; invert), Sequence, Digits (individual_digits), Punctuation,
// Metaspace (replacement, prepend_scheme always/first/never or legacy add_prefix_space, split),
// WhitespaceSplit; model BPE (byte_fallback, ignore_merges, fuse_unk, unk_token,
// continuing_subword_prefix, end_of_word_suffix; merges as "a b" strings or ["a","b"] pairs);
// decoders ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, Sequence; post-processors
// ByteLevel, TemplateProcessing (single), BertProcessing, RobertaProcessing, Sequence. Added tokens
// are matched before normalization (normalized=false) or on the normalized text (normalized=true),
// leftmost-longest, honouring special / lstrip / rstrip / single_word. Any other component type
// → kUnsupported naming it (never an approximation); BPE dropout ≠ 0 → kUnsupported. The
// "truncation" and "padding" sections (batch options) are ignored.
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

/// An entry of tokenizer.json's "added_tokens" (HF tokenizers' AddedToken; its fields, same names).
struct AddedToken {
  std::int32_t id = 0;   ///< the token's id
  std::string content;   ///< its text (UTF-8), matched whole in the input before the model's split
  bool special = false;  ///< a control token (e.g. <|endoftext|>): left out by skip_special_tokens
  bool normalized = false;   ///< matched against the normalized text (else the raw input)
  bool lstrip = false, rstrip = false;  ///< a match also takes the whitespace to its left / right
  bool single_word = false;  ///< matches only where it is not inside a word
};

/// A loaded tokenizer.json. Immutable after construction except for an internal word cache
/// (mutex-protected): encode/decode are thread-safe. Move-only; a moved-from one may only be
/// destroyed or assigned to.
class Tokenizer {
 public:
  /// Loads tokenizer.json. Errors: kNotFound (no such file), kInvalidArgument (a directory or
  /// another non-regular file, e.g. a FIFO), kIo (unreadable, out of memory), kFormat (file, JSON
  /// path of the bad field), kUnsupported (component type named).
  static Result<Tokenizer> from_file(const std::string& path);
  /// The same from the file's text; `source` names it in errors. Errors: kFormat, kUnsupported, kIo
  /// (out of memory) as from_file's.
  static Result<Tokenizer> from_json_text(const std::string& json_text, const std::string& source = "tokenizer.json");

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  /// Text (UTF-8) → ids, like HF `encode(text, add_special_tokens=False).ids`, plus the
  /// post-processor's special tokens (e.g. BOS) when `add_special_tokens` is true. Ids are in
  /// [0, size()). Invalid UTF-8 → kInvalidArgument naming the byte offset.
  Result<std::vector<std::int32_t>> encode(std::string_view text, bool add_special_tokens = false) const;
  /// What encode(text, true) adds to encode(text, false): `ids` (a text's ids, unchecked) with the
  /// post-processor's special tokens (e.g. a BOS) around them — `ids` itself when there is no
  /// post-processor. `text_start` (optional) receives where `ids` begin in the result (the number of
  /// specials before them), so the specials can be told apart (HF's offsets give them [0, 0)).
  std::vector<std::int32_t> add_special_tokens(std::span<const std::int32_t> ids, std::size_t* text_start = nullptr) const;
  /// Ids → text like HF `decode(ids, skip_special_tokens)` (no clean-up of spaces; invalid UTF-8
  /// from byte tokens becomes U+FFFD exactly as HF does). An id < 0 or ≥ size() (e.g. the padded
  /// vocab rows 50277–50279 of the GPT-NeoX models) → kInvalidArgument naming it.
  Result<std::string> decode(std::span<const std::int32_t> ids, bool skip_special_tokens = false) const;

  /// The bytes token `id` adds to a text (llama.cpp's token_to_piece): its decoding after a plain
  /// token, so a first-token rule (Metaspace / Strip removing the leading space of "▁Hello") does
  /// not apply, and without turning invalid UTF-8 into U+FFFD, so a token that is part of a
  /// character gives its own bytes (GPT-NeoX "âĢ" → E2 80, where decode gives "\uFFFD"); the
  /// result need not be valid UTF-8. OpenAI's logprobs `bytes`. An id < 0 or ≥ size() →
  /// kInvalidArgument naming it; an id in range that the vocabulary leaves undefined → "".
  Result<std::string> token_bytes(std::int32_t id) const;
  /// token_bytes as text (UTF-8; part of a character becomes U+FFFD, as decode does): a token's
  /// own text in details and logprobs (" Hello" for "▁Hello", where decode({id}) gives "Hello").
  Result<std::string> token_text(std::int32_t id) const;

  /// Number of ids the tokenizer defines (max id + 1 over the vocab and added tokens).
  std::int64_t size() const;
  /// The token string of `id` (vocab form, e.g. "Ġthe"), or nullopt.
  std::optional<std::string> id_to_token(std::int32_t id) const;
  /// The id of a token string in vocab form (or an added token's content), or nullopt.
  std::optional<std::int32_t> token_to_id(std::string_view token) const;
  /// True for added tokens flagged special; false for every other id, out-of-range ones included.
  bool is_special(std::int32_t id) const;
  /// tokenizer.json's added_tokens, in file order; valid while the Tokenizer lives.
  const std::vector<AddedToken>& added_tokens() const;

  /// The loaded pipeline (src/tokenizer/impl.h, not installed): for this project's own code and
  /// tests; library users have no use for it.
  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  Tokenizer();
  std::unique_ptr<Impl> impl_;
};

/// Incremental detokenizer: the pieces returned by push() for ids fed one at a time, followed by
/// flush(), concatenate to exactly `decode(all ids, skip_special_tokens)` (without a context; see
/// the constructor). Text is released only at UTF-8 character boundaries: a piece never ends in a
/// partial character and contains U+FFFD only where decode(all) has one that no later id can change
/// (bytes that can never form a character, such as a lone continuation byte or a lead byte followed
/// by another lead byte, are released as U+FFFD at once; a run of "<0xXX>" byte-fallback tokens is
/// held until it ends, since HF decodes such a run as a whole). Should the text of ids already
/// released change with later ids (a byte-fallback run continuing across a skipped special token),
/// the later ids' text is released on its own: text is never dropped. Cost per push is O(ids since
/// the last released piece). Holds a pointer to the Tokenizer (must outlive it).
class StreamDecoder {
 public:
  /// `context`: ids the text continues (a generation's prompt; copied, need not outlive this). Its
  /// last ≤ 4 ids that give text (skipped special tokens left out, a trailing byte-fallback run cut
  /// off: the generated ids may continue it) are decoded first and their text left out, so the first
  /// piece reads as it does inside the sequence (a Metaspace or Strip decoder keeps the leading space
  /// of "▁Hello", as TGI's and vLLM's incremental detokenizers do): the pieces concatenate to
  /// decode(c + ids) minus decode(c) for those ids c. A context with an id out of range or ending
  /// inside a character is not used (decode(ids) as without one). flush() drops it.
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special_tokens = false, std::span<const std::int32_t> context = {});
  /// Adds one id; returns the newly completed text (possibly empty). Errors: kInvalidArgument for
  /// an id outside [0, size()) (naming it; the decoder is unchanged).
  Result<std::string> push(std::int32_t id);
  /// Returns whatever is still held (incomplete UTF-8 at the end is decoded as HF would, with
  /// U+FFFD) and resets the decoder for a new sequence.
  std::string flush();

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  std::vector<std::int32_t> ids_;  ///< window: prefix ids (already released) + pending ids
  std::size_t read_index_ = 0;     ///< ids_[0, read_index_) is the prefix
  std::string prefix_text_;        ///< decode(prefix ids) — subtracted from the window's text

  /// decode(ids_[from, to)) (raw: bytes kept, Decoder::decode_chain_raw).
  std::string window_text(std::size_t from, std::size_t to, bool raw) const;
  /// Releases the text of ids_[read_index_, to) (`text` = window_text(0, to)); ids_[to, …) stay pending.
  std::string release(std::size_t to, std::string text);
};

}  // namespace mamba
