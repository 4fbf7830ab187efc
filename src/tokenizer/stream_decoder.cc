// StreamDecoder: incremental detokenization in the manner of HF tokenizers' DecodeStream. The
// window ids_ = [prefix ids (already emitted) | ids not yet emitted]; each push decodes the window
// and releases the text past the prefix's own decoding, unless it ends in U+FFFD standing for an
// incomplete UTF-8 character that later ids may complete (invalid bytes are released at once). After a release the released ids become the new
// prefix, so decoders that treat the first token specially (Metaspace, Strip) see context. With a
// ByteFallback decoder a run of "<0xXX>" tokens is held until a non-byte token ends it (an invalid
// run decodes to one U+FFFD per byte, so earlier bytes of the run are not final before its end).
#include <fmt/format.h>

#include "tokenizer/impl.h"
#include "tokenizer/unicode.h"

namespace mamba {

namespace {

std::string decode_window(const Tokenizer& tok, std::span<const std::int32_t> ids, bool skip_special) {
  std::vector<std::string> tokens;
  tok.impl().ids_to_tokens(ids, skip_special, tokens);
  return tok.impl().decode_tokens(tokens);
}

bool ends_with_replacement(std::string_view s) {
  return s.size() >= tok::kReplacementChar.size() && s.substr(s.size() - tok::kReplacementChar.size()) == tok::kReplacementChar;
}

bool is_byte_token(const Tokenizer& tok, std::int32_t id) {
  const auto t = tok.id_to_token(id);
  return t && t->size() == 6 && t->compare(0, 3, "<0x") == 0 && (*t)[5] == '>';
}

/// Context ids kept in front of the first generated id: enough for any decoder's first-token rule.
constexpr std::size_t kContextIds = 4;

}  // namespace

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool skip_special_tokens, std::span<const std::int32_t> context)
    : tok_(&tok), skip_special_(skip_special_tokens) {
  const std::span<const std::int32_t> tail = context.size() > kContextIds ? context.last(kContextIds) : context;
  if (tail.empty()) return;
  for (std::int32_t id : tail)
    if (id < 0 || id >= tok.size()) return;
  if (tok.impl().decoder_has_byte_fallback && is_byte_token(tok, tail.back())) return;  // a run the next ids may continue
  std::string text = decode_window(tok, tail, skip_special_tokens);
  if (ends_with_replacement(text)) return;  // inside a character the next ids may complete
  ids_.assign(tail.begin(), tail.end());
  read_index_ = ids_.size();
  prefix_text_ = std::move(text);
}

Result<std::string> StreamDecoder::push(std::int32_t id) {
  if (id < 0 || id >= tok_->size()) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("StreamDecoder: token id {} is out of range: the tokenizer defines ids 0..{}", id, tok_->size() - 1));
  }
  ids_.push_back(id);
  // Hold a run of byte tokens until it ends: its decoding depends on all of its bytes.
  if (tok_->impl().decoder_has_byte_fallback && is_byte_token(*tok_, id)) return std::string();
  std::string text = decode_window(*tok_, ids_, skip_special_);
  if (text.size() <= prefix_text_.size() || text.compare(0, prefix_text_.size(), prefix_text_) != 0) return std::string();
  // A U+FFFD at the end is held only while later ids can still complete the character (the raw
  // bytes end in a valid but incomplete sequence); invalid bytes (a lone continuation byte) are final.
  if (ends_with_replacement(text)) {
    std::vector<std::string> tokens;
    tok_->impl().ids_to_tokens(ids_, skip_special_, tokens);
    if (tok::utf8_ends_incomplete(tok_->impl().decode_tokens(tokens, /*raw=*/true))) return std::string();
  }
  std::string released = text.substr(prefix_text_.size());
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(read_index_));
  read_index_ = ids_.size();
  prefix_text_ = decode_window(*tok_, ids_, skip_special_);
  return released;
}

std::string StreamDecoder::flush() {
  std::string text = decode_window(*tok_, ids_, skip_special_);
  std::string rest;
  if (text.size() > prefix_text_.size() && text.compare(0, prefix_text_.size(), prefix_text_) == 0) {
    rest = text.substr(prefix_text_.size());
  }
  ids_.clear();
  read_index_ = 0;
  prefix_text_.clear();
  return rest;
}

}  // namespace mamba
