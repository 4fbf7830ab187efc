// Tokenizer::Impl: the loaded pipeline (normalizer → pre-tokenizer → BPE model → post-processor;
// decoder), shared by tokenizer.cc (encode/decode), tokenizer_json.cc (loading) and
// stream_decoder.cc.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "mamba/tokenizer.h"
#include "tokenizer/added_vocab.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"

namespace mamba {

struct Tokenizer::Impl {
  std::string source;  ///< file name for messages
  std::unique_ptr<tok::Normalizer> normalizer;          // may be null
  std::unique_ptr<tok::PreTokenizer> pre_tokenizer;     // may be null
  std::unique_ptr<tok::BpeModel> model;
  std::unique_ptr<tok::PostProcessor> post_processor;   // may be null
  std::unique_ptr<tok::Decoder> decoder;                // may be null (tokens joined by ' ')
  /// True when the last pre-tokenizer is ByteLevel: pieces reach the model as raw bytes and the
  /// model maps them (so its cache is keyed by raw bytes).
  bool model_maps_bytes = false;
  /// True when the decoder includes ByteFallback: a run of "<0xXX>" tokens decodes as a whole
  /// (one U+FFFD per byte when the run is invalid), so a stream must hold such runs until they end.
  bool decoder_has_byte_fallback = false;

  std::vector<AddedToken> added_tokens;
  std::unordered_map<std::int32_t, std::size_t> added_by_id;  ///< id → index in added_tokens
  tok::StringMap<std::int32_t> added_by_content;
  tok::AddedTokenMatcher raw_matcher;         ///< tokens with normalized = false
  tok::AddedTokenMatcher normalized_matcher;  ///< tokens with normalized = true
  std::int64_t size = 0;
  /// A plain token c (not special, no whitespace, decode([c, c]) = decode([c]) twice) that
  /// token_bytes puts in front of an id, so decoders that treat the first token specially
  /// (Metaspace's and Strip's removal of its leading space) do not change the id's own text;
  /// −1 when the vocabulary's first ids have none (then decode([id]) alone).
  std::int32_t context_id = -1;
  std::string context_text;  ///< decode_ids({context_id}, raw)
  /// True when a long text may be encoded in pieces cut after a '\n' that stands between two
  /// visible ASCII characters (newline_cut_after): the pipeline is the GPT-2 one — no normalizer or
  /// a Unicode normal form, ByteLevel with its regex and no prefix space — and no normalized added
  /// token contains '\n' or strips whitespace. There every step is local to such a cut (a '\n'
  /// between two non-space characters is a regex match of its own, and a starter for the normal
  /// forms), so the ids are those of the whole text, with a bounded working set (a 19 MB text as
  /// one piece took 552 MB).
  bool newline_cuts = false;

  /// Appends the ids of `text` (valid UTF-8) without post-processing.
  void encode_into(std::string_view text, std::vector<std::int32_t>& out) const;
  /// encode_into's steps after the added tokens without normalization (raw_matcher) for
  /// text[begin, end): normalize, the normalized added tokens, pre-tokenize, BPE. `at_start`: the
  /// range begins the input (HF's offsets_original().0 == 0).
  void encode_range(std::string_view text, std::size_t begin, std::size_t end, bool at_start,
                    std::vector<std::int32_t>& out) const;
  /// Sets newline_cuts (after loading).
  void choose_newline_cuts();
  /// Token strings of `ids` (all < size), skipping special tokens when asked and undefined ids.
  void ids_to_tokens(std::span<const std::int32_t> ids, bool skip_special, std::vector<std::string>& out) const;
  /// Runs the decoder over tokens (or joins them with ' ' when there is none); `raw`: the
  /// decoders' byte-keeping chain (Decoder::decode_chain_raw).
  std::string decode_tokens(std::vector<std::string>& tokens, bool raw = false) const;
  /// decode(ids) through decode_tokens (raw: bytes kept, see Decoder::decode_chain_raw).
  std::string decode_ids(std::span<const std::int32_t> ids, bool skip_special, bool raw) const;
  /// Picks context_id (after loading).
  void choose_context_id();
};

}  // namespace mamba
