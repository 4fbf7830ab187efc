#include "tokenizer/added_vocab.h"

#include <algorithm>

#include "tokenizer/normalizer.h"
#include "tokenizer/unicode.h"

namespace mamba::tok {

namespace {

char32_t last_char(std::string_view s) {
  std::size_t i = s.size();
  while (i > 0 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i;
  if (i > 0) --i;
  std::size_t j = i;
  return utf8_next(s, j);
}

// Regex `\w$` / `^\w` as HF's ends_with_word / starts_with_word.
bool ends_with_word(std::string_view s) { return !s.empty() && is_word_char(last_char(s)); }
bool starts_with_word(std::string_view s) {
  std::size_t i = 0;
  return !s.empty() && is_word_char(utf8_next(s, i));
}

// Byte offset where the trailing whitespace of `s` begins.
std::size_t space_leftmost_at_end(std::string_view s) {
  std::size_t end = s.size();
  while (end > 0) {
    std::size_t b = end - 1;
    while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
    std::size_t j = b;
    if (!is_whitespace(utf8_next(s, j))) return end;
    end = b;
  }
  return 0;
}

// Length of the leading whitespace of `s`.
std::size_t space_rightmost_at_start(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t j = i;
    if (!is_whitespace(utf8_next(s, j))) return i;
    i = j;
  }
  return s.size();
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens, bool normalized_set,
                                     const Normalizer* normalizer) {
  for (const auto& t : tokens) {
    if (t.normalized != normalized_set || t.content.empty()) continue;
    Pattern p{t.content, t.id, t.single_word, t.lstrip, t.rstrip};
    if (normalized_set && normalizer) normalizer->normalize(p.content);
    if (p.content.empty()) continue;
    patterns_.push_back(std::move(p));
  }
  for (std::uint32_t k = 0; k < patterns_.size(); ++k) {
    const std::string& c = patterns_[k].content;
    const auto b0 = static_cast<unsigned char>(c[0]);
    by_first_byte_[b0].push_back(k);
    if (c.size() == 1) {
      single_byte_[b0] = true;
    } else {
      second_byte_[b0].set(static_cast<unsigned char>(c[1]));
    }
  }
  for (auto& v : by_first_byte_) {
    // Longest first; among equal contents the first declared wins.
    std::stable_sort(v.begin(), v.end(), [&](std::uint32_t a, std::uint32_t b) {
      return patterns_[a].content.size() > patterns_[b].content.size();
    });
  }
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>& out) const {
  out.clear();
  if (text.empty()) {
    out.push_back({0, 0, -1});
    return;
  }
  std::size_t start_offset = 0;
  std::size_t pos = 0;
  while (pos < text.size() && !patterns_.empty()) {
    // Leftmost-longest match at or after `pos`.
    const Pattern* found = nullptr;
    std::size_t at = pos;
    for (; at < text.size(); ++at) {
      const auto b0 = static_cast<unsigned char>(text[at]);
      if (!single_byte_[b0] && (at + 1 >= text.size() || !second_byte_[b0].test(static_cast<unsigned char>(text[at + 1])))) continue;
      const auto& cands = by_first_byte_[b0];
      for (std::uint32_t k : cands) {
        const auto& c = patterns_[k].content;
        if (text.size() - at >= c.size() && text.compare(at, c.size(), c) == 0) {
          found = &patterns_[k];
          break;
        }
      }
      if (found) break;
    }
    if (!found) break;
    std::size_t start = at, stop = at + found->content.size();
    pos = stop;  // the matcher resumes after the match itself
    if (found->single_word) {
      const bool start_space = start == 0 || !ends_with_word(text.substr(0, start));
      const bool stop_space = stop == text.size() || !starts_with_word(text.substr(stop));
      if (!start_space || !stop_space) continue;
    }
    if (found->lstrip) start = std::max(space_leftmost_at_end(text.substr(0, start)), start_offset);
    if (found->rstrip) stop += space_rightmost_at_start(text.substr(stop));
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, found->id});
    start_offset = stop;
  }
  if (start_offset != text.size()) out.push_back({start_offset, text.size(), -1});
}

}  // namespace mamba::tok
