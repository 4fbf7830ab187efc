// StreamDecoder: incremental detokenization in the manner of HF tokenizers' DecodeStream. The
// window ids_ = [prefix ids (already emitted) | ids not yet emitted]; each push decodes the window
// and releases the text past the prefix's own decoding, up to an incomplete UTF-8 character that
// later ids may complete (invalid bytes are released at once, as U+FFFD). After a release the released ids become the new
// prefix, so decoders that treat the first token specially (Metaspace, Strip) see context. With a
// ByteFallback decoder a run of "<0xXX>" tokens is held until a non-byte token ends it (an invalid
// run decodes to one U+FFFD per byte, so earlier bytes of the run are not final before its end).
#include <fmt/format.h>

#include "tokenizer/decoder.h"
#include "tokenizer/impl.h"
#include "tokenizer/unicode.h"

namespace mamba {

namespace {

bool ends_with_replacement(std::string_view s) {
  return s.size() >= tok::kReplacementChar.size() && s.substr(s.size() - tok::kReplacementChar.size()) == tok::kReplacementChar;
}

/// A token the ByteFallback decoder reads as a byte (the same test as its own).
bool is_byte_token(const Tokenizer& tok, std::int32_t id) {
  const auto t = tok.id_to_token(id);
  return t && tok::byte_fallback_value(*t) >= 0;
}

/// Context ids kept in front of the first generated id: enough for any decoder's first-token rule.
constexpr std::size_t kContextIds = 4;

}  // namespace

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool skip_special_tokens, std::span<const std::int32_t> context)
    : tok_(&tok), skip_special_(skip_special_tokens) {
  std::vector<std::int32_t> tail;  // the context's last ids that give text, in order
  for (auto it = context.rbegin(); it != context.rend() && tail.size() < kContextIds; ++it) {
    if (*it < 0 || *it >= tok.size()) return;
    if (!(skip_special_tokens && tok.is_special(*it))) tail.insert(tail.begin(), *it);
  }
  while (tok.impl().decoder_has_byte_fallback && !tail.empty() && is_byte_token(tok, tail.back())) tail.pop_back();
  if (tail.empty()) return;
  ids_ = std::move(tail);
  if (tok::utf8_ends_incomplete(window_text(0, ids_.size(), /*raw=*/true))) {  // the next ids may complete it
    ids_.clear();
    return;
  }
  read_index_ = ids_.size();
  prefix_text_ = window_text(0, ids_.size(), /*raw=*/false);
}

std::string StreamDecoder::window_text(std::size_t from, std::size_t to, bool raw) const {
  return tok_->impl().decode_ids(std::span<const std::int32_t>(ids_).subspan(from, to - from), skip_special_, raw);
}

std::string StreamDecoder::release(std::size_t to, std::string text) {
  std::string released = text.substr(prefix_text_.size());
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(read_index_));
  read_index_ = to - read_index_;
  prefix_text_ = window_text(0, read_index_, /*raw=*/false);
  return released;
}

Result<std::string> StreamDecoder::push(std::int32_t id) {
  if (id < 0 || id >= tok_->size()) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("StreamDecoder: token id {} is out of range: the tokenizer defines ids 0..{}", id, tok_->size() - 1));
  }
  ids_.push_back(id);
  // Hold a run of byte tokens until it ends: its decoding depends on all of its bytes.
  if (tok_->impl().decoder_has_byte_fallback && is_byte_token(*tok_, id)) return std::string();
  std::string text = window_text(0, ids_.size(), false);
  if (text.compare(0, prefix_text_.size(), prefix_text_) != 0) {
    // The released ids' text changed with the new ones (a byte-fallback run merged across a skipped
    // special token): the pending ids go on alone, as a fresh window.
    ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(read_index_));
    read_index_ = 0;
    prefix_text_.clear();
    text = window_text(0, ids_.size(), false);
  }
  if (text.size() <= prefix_text_.size()) return std::string();
  // A U+FFFD at the end is held only while later ids can still complete the character (the raw
  // bytes end in a valid but incomplete sequence); what comes before that sequence is released.
  if (ends_with_replacement(text)) {
    const std::string raw = window_text(0, ids_.size(), true);
    if (const std::size_t tail = tok::utf8_incomplete_tail(raw); tail > 0) {
      const std::size_t final_bytes = raw.size() - tail;  // raw[0, final_bytes) can no longer change
      for (std::size_t j = ids_.size() - 1; j > read_index_; --j) {
        if (window_text(0, j, true).size() > final_bytes) continue;
        std::string done = window_text(0, j, false);
        if (done.size() <= prefix_text_.size() || done.compare(0, prefix_text_.size(), prefix_text_) != 0) break;
        return release(j, std::move(done));
      }
      return std::string();
    }
  }
  return release(ids_.size(), std::move(text));
}

std::string StreamDecoder::flush() {
  std::string text = window_text(0, ids_.size(), false);
  std::string rest;
  if (text.compare(0, prefix_text_.size(), prefix_text_) == 0) {
    rest = text.substr(prefix_text_.size());
  } else {
    rest = window_text(read_index_, ids_.size(), false);  // the prefix's text changed: the pending ids alone
  }
  ids_.clear();
  read_index_ = 0;
  prefix_text_.clear();
  return rest;
}

}  // namespace mamba
