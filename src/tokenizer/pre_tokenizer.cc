#include "tokenizer/pre_tokenizer.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"

namespace mamba::tok {

void SplittingPreTokenizer::pre_tokenize(PieceList& pieces) const {
  std::vector<PieceList::Span> out;
  out.reserve(pieces.spans.size() * 2);
  std::vector<Match> matches, kept;
  for (const auto& span : pieces.spans) {
    matches.clear();
    kept.clear();
    find_matches(pieces.text(span), matches);
    apply_split_behavior(matches, behavior_, invert_, kept);
    for (const auto& k : kept) {
      if (k.end == k.begin) continue;
      out.push_back({span.begin + k.begin, span.begin + k.end, span.at_start && k.begin == 0});
    }
  }
  pieces.spans.swap(out);
}

Result<std::unique_ptr<ByteLevelPreTokenizer>> ByteLevelPreTokenizer::create(bool add_prefix_space, bool use_regex) {
  std::unique_ptr<ByteLevelPreTokenizer> p(new ByteLevelPreTokenizer());
  p->add_prefix_space_ = add_prefix_space;
  if (use_regex) {
    MAMBA_ASSIGN_OR_RETURN(auto re, Regex::compile(kGpt2Regex, "ByteLevel pre-tokenizer"));
    p->regex_split_ = std::make_unique<SplitPreTokenizer>(SplitPattern::regex(std::move(re)), SplitBehavior::kIsolated, false);
  }
  return p;
}

void ByteLevelPreTokenizer::pre_tokenize(PieceList& pieces) const {
  if (add_prefix_space_) {
    bool needed = false;
    for (const auto& s : pieces.spans) needed |= pieces.buf[s.begin] != ' ';
    if (needed) {
      PieceList next;
      next.buf.reserve(pieces.buf.size() + pieces.spans.size());
      for (const auto& s : pieces.spans) {
        const std::size_t b = next.buf.size();
        if (pieces.buf[s.begin] != ' ') next.buf.push_back(' ');
        next.buf.append(pieces.text(s));
        next.spans.push_back({b, next.buf.size(), s.at_start});
      }
      pieces = std::move(next);
    }
  }
  if (regex_split_) regex_split_->pre_tokenize(pieces);
  if (map_bytes_) {
    PieceList next;
    next.buf.reserve(pieces.buf.size() * 2);
    for (const auto& s : pieces.spans) {
      const std::size_t b = next.buf.size();
      byte_level_encode(pieces.text(s), next.buf);
      next.spans.push_back({b, next.buf.size(), s.at_start});
    }
    pieces = std::move(next);
  }
}

MetaspacePreTokenizer::MetaspacePreTokenizer(char32_t replacement, Prepend prepend, bool split)
    : prepend_(prepend), split_(split) {
  utf8_append(replacement_, replacement);
}

void MetaspacePreTokenizer::pre_tokenize(PieceList& pieces) const {
  PieceList next;
  next.buf.reserve(pieces.buf.size() * 2);
  for (const auto& s : pieces.spans) {
    const std::string_view text = pieces.text(s);
    const std::size_t b = next.buf.size();
    const bool starts_with_rep = text.substr(0, replacement_.size()) == replacement_ || (!text.empty() && text[0] == ' ');
    if (!starts_with_rep && !text.empty() &&
        (prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && s.at_start))) {
      next.buf.append(replacement_);
    }
    for (char c : text) {
      if (c == ' ') {
        next.buf.append(replacement_);
      } else {
        next.buf.push_back(c);
      }
    }
    next.spans.push_back({b, next.buf.size(), s.at_start});
  }
  pieces = std::move(next);
  if (!split_) return;
  // Split before each replacement character: MergedWithNext on the literal replacement.
  SplitPreTokenizer splitter(SplitPattern::literal(replacement_), SplitBehavior::kMergedWithNext, false);
  splitter.pre_tokenize(pieces);
}

}  // namespace mamba::tok
