// Tokenizer: encode (added tokens → normalizer → pre-tokenizer → BPE → post-processor) and
// decode (ids → token strings → decoder), as HF tokenizers' Tokenizer::encode / decode.
#include <fmt/format.h>

#include <algorithm>

#include "tokenizer/impl.h"
#include "tokenizer/newline_cut.h"
#include "tokenizer/unicode.h"

namespace mamba {
namespace {

/// kInvalidArgument "CALL: token id ID is out of range: SOURCE defines ids 0..N" unless 0 ≤ id < size.
Status id_in_range(const Tokenizer::Impl& impl, std::int32_t id, const char* call) {
  if (id >= 0 && id < impl.size) return {};
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("{}: token id {} is out of range: {} defines ids 0..{}", call, id, impl.source, impl.size - 1));
}

}  // namespace

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

void Tokenizer::Impl::encode_range(std::string_view text, std::size_t begin, std::size_t end, bool at_start,
                                   std::vector<std::int32_t>& out) const {
  thread_local std::vector<tok::Segment> subs;
  thread_local std::string norm;
  thread_local tok::PieceList pieces;
  norm.assign(text.substr(begin, end - begin));
  if (normalizer) normalizer->normalize(norm);
  normalized_matcher.split(norm, subs);
  for (const auto& sub : subs) {
    if (sub.id >= 0) {
      out.push_back(sub.id);
      continue;
    }
    if (sub.end == sub.begin) continue;
    pieces.buf.assign(norm, sub.begin, sub.end - sub.begin);
    pieces.spans.assign(1, {0, pieces.buf.size(), at_start && sub.begin == 0});
    if (pre_tokenizer) pre_tokenizer->pre_tokenize(pieces);
    for (const auto& s : pieces.spans) model->tokenize(pieces.text(s), model_maps_bytes, out);
  }
  // A long text's buffers are not kept by the thread.
  if (norm.capacity() > 4 * tok::kNewlineCutBytes) {
    std::string().swap(norm);
    std::string().swap(pieces.buf);
    decltype(pieces.spans)().swap(pieces.spans);
    decltype(subs)().swap(subs);
  }
}

void Tokenizer::Impl::encode_into(std::string_view text, std::vector<std::int32_t>& out) const {
  std::vector<tok::Segment> segments;
  raw_matcher.split(text, segments);
  for (const auto& seg : segments) {
    if (seg.id >= 0) {
      out.push_back(seg.id);
      continue;
    }
    if (!newline_cuts) {
      encode_range(text, seg.begin, seg.end, seg.begin == 0, out);
      continue;
    }
    for (std::size_t b = seg.begin; b < seg.end;) {
      const std::size_t e = tok::newline_cut_after(text, b, seg.end);
      encode_range(text, b, e, b == 0, out);
      b = e;
    }
  }
}

void Tokenizer::Impl::choose_newline_cuts() {
  const auto* byte_level = dynamic_cast<const tok::ByteLevelPreTokenizer*>(pre_tokenizer.get());
  newline_cuts = byte_level != nullptr && byte_level->splits_by_regex() && !byte_level->add_prefix_space() &&
                 (normalizer == nullptr || dynamic_cast<const tok::UnicodeNormalizer*>(normalizer.get()) != nullptr);
  for (const AddedToken& a : added_tokens)
    if (a.normalized && (a.lstrip || a.rstrip || a.content.find('\n') != std::string::npos)) newline_cuts = false;
}

void Tokenizer::Impl::ids_to_tokens(std::span<const std::int32_t> ids, bool skip_special, std::vector<std::string>& out) const {
  out.reserve(out.size() + ids.size());
  for (std::int32_t id : ids) {
    if (auto it = added_by_id.find(id); it != added_by_id.end()) {
      const AddedToken& a = added_tokens[it->second];
      if (skip_special && a.special) continue;
      out.push_back(a.content);
    } else if (const std::string* t = model->id_to_token(id)) {
      if (skip_special) {
        // HF checks the token text against the special added tokens.
        auto c = added_by_content.find(*t);
        if (c != added_by_content.end() && added_tokens[added_by_id.at(c->second)].special) continue;
      }
      out.push_back(*t);
    }
  }
}

std::string Tokenizer::Impl::decode_tokens(std::vector<std::string>& tokens, bool raw) const {
  std::string out;
  if (decoder) {
    if (raw) {
      decoder->decode_chain_raw(tokens);
    } else {
      decoder->decode_chain(tokens);
    }
    for (const auto& t : tokens) out.append(t);
  } else {
    for (std::size_t k = 0; k < tokens.size(); ++k) {
      if (k) out.push_back(' ');
      out.append(tokens[k]);
    }
  }
  return out;
}

Result<std::vector<std::int32_t>> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (const std::size_t bad = tok::utf8_valid_prefix(text); bad != text.size()) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("encode: input text is not valid UTF-8 (invalid byte 0x{:02X} at offset {})",
                                  static_cast<unsigned char>(text[bad]), bad));
  }
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  impl_->encode_into(text, ids);
  if (add_special_tokens && impl_->post_processor) impl_->post_processor->process(ids);
  return ids;
}

std::vector<std::int32_t> Tokenizer::add_special_tokens(std::span<const std::int32_t> ids, std::size_t* text_start) const {
  std::vector<std::int32_t> out(ids.begin(), ids.end());
  if (text_start) *text_start = 0;
  if (!impl_->post_processor) return out;
  impl_->post_processor->process(out);
  if (text_start) {
    // The post-processors place the sequence as a whole among their specials: where a one-id
    // sequence of an id no tokenizer has (−1) lands is where `ids` begin.
    std::vector<std::int32_t> probe{-1};
    impl_->post_processor->process(probe);
    *text_start = static_cast<std::size_t>(std::find(probe.begin(), probe.end(), -1) - probe.begin());
  }
  return out;
}

Result<std::string> Tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const {
  for (std::size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] < 0 || ids[k] >= impl_->size) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("decode: token id {} (position {}) is out of range: {} defines ids 0..{}", ids[k], k,
                                    impl_->source, impl_->size - 1));
    }
  }
  return impl_->decode_ids(ids, skip_special_tokens, /*raw=*/false);
}

std::string Tokenizer::Impl::decode_ids(std::span<const std::int32_t> ids, bool skip_special, bool raw) const {
  std::vector<std::string> tokens;
  ids_to_tokens(ids, skip_special, tokens);
  return decode_tokens(tokens, raw);
}

void Tokenizer::Impl::choose_context_id() {
  constexpr std::int32_t kSearched = 4096;  // a plain letter is among the first ids of every vocabulary seen
  for (std::int32_t c = 0; c < std::min<std::int64_t>(size, kSearched); ++c) {
    if (added_by_id.count(c)) continue;
    const std::int32_t one[1] = {c}, two[2] = {c, c};
    const std::string text = decode_ids(one, false, true);
    if (text.empty() || tok::utf8_valid_prefix(text) != text.size()) continue;
    if (text.find_first_of(" \t\r\n") != std::string::npos) continue;
    if (decode_ids(two, false, true) != text + text) continue;
    context_id = c;
    context_text = text;
    return;
  }
}

Result<std::string> Tokenizer::token_bytes(std::int32_t id) const {
  MAMBA_RETURN_IF_ERROR(id_in_range(*impl_, id, "token_bytes"));
  const std::int32_t one[1] = {id};
  if (impl_->context_id >= 0) {
    // The id after a plain token: its text as it reads inside a sequence (Metaspace's and Strip's
    // first-token rule would drop a leading space of "▁Hello").
    const std::int32_t pair[2] = {impl_->context_id, id};
    const std::string& before = impl_->context_text;
    std::string both = impl_->decode_ids(pair, false, true);
    if (both.compare(0, before.size(), before) == 0) return both.erase(0, before.size());
  }
  return impl_->decode_ids(one, false, true);
}

Result<std::string> Tokenizer::token_text(std::int32_t id) const {
  MAMBA_RETURN_IF_ERROR(id_in_range(*impl_, id, "token_text"));  // (token_bytes' error would name token_bytes)
  auto bytes = token_bytes(id);
  if (!bytes.ok()) return bytes;
  return tok::utf8_lossy(*bytes);
}

std::int64_t Tokenizer::size() const { return impl_->size; }

std::optional<std::string> Tokenizer::id_to_token(std::int32_t id) const {
  if (auto it = impl_->added_by_id.find(id); it != impl_->added_by_id.end()) return impl_->added_tokens[it->second].content;
  if (const std::string* t = impl_->model->id_to_token(id)) return *t;
  return std::nullopt;
}

std::optional<std::int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto it = impl_->added_by_content.find(token); it != impl_->added_by_content.end()) return it->second;
  return impl_->model->token_to_id(token);
}

bool Tokenizer::is_special(std::int32_t id) const {
  auto it = impl_->added_by_id.find(id);
  return it != impl_->added_by_id.end() && impl_->added_tokens[it->second].special;
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added_tokens; }

}  // namespace mamba
