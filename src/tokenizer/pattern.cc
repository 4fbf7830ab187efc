#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pattern.h"

#include <fmt/format.h>
#include <algorithm>
#include <pcre2.h>

namespace mamba::tok {

namespace {

// Oniguruma's \s (Unicode White_Space), as a character-class body.
constexpr std::string_view kSpaceClassBody =
    "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

// Rewrites \s and \S (outside and inside character classes where expressible).
std::string translate_pattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 64);
  bool in_class = false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char n = p[i + 1];
      if (n == 's') {
        if (in_class) {
          out.append(kSpaceClassBody);
        } else {
          out.append("[").append(kSpaceClassBody).append("]");
        }
        ++i;
        continue;
      }
      if (n == 'S' && !in_class) {
        out.append("[^").append(kSpaceClassBody).append("]");
        ++i;
        continue;
      }
      out.push_back(c);
      out.push_back(n);
      ++i;
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out.push_back(c);
      // A ']' right after '[' or '[^' is a literal.
      if (i + 1 < p.size() && p[i + 1] == '^') out.push_back(p[++i]);
      if (i + 1 < p.size() && p[i + 1] == ']') out.push_back(p[++i]);
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out.push_back(c);
  }
  return out;
}

}  // namespace

Result<std::shared_ptr<const Regex>> Regex::compile(std::string_view pattern, std::string_view where) {
  const std::string translated = translate_pattern(pattern);
  int err = 0;
  PCRE2_SIZE erroff = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &erroff, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    return make_error(ErrorCode::kFormat, fmt::format("{}: invalid regex '{}': {} (at offset {})", where, pattern,
                                                      reinterpret_cast<const char*>(msg), erroff));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is unavailable
  std::shared_ptr<Regex> r(new Regex());
  r->code_ = code;
  return std::shared_ptr<const Regex>(std::move(r));
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::find_all(std::string_view text, std::vector<std::pair<std::size_t, std::size_t>>& out) const {
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc < 0) break;  // no match (or a match-limit error: treat the rest as unmatched)
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const std::size_t b = ov[0], e = ov[1];
    out.emplace_back(b, e);
    if (e > b) {
      pos = e;
    } else {
      if (e >= text.size()) break;
      pos = e + utf8_len(static_cast<unsigned char>(text[e]));
    }
  }
  pcre2_match_data_free(md);
}

void SplitPattern::find_matches(std::string_view text, std::vector<Match>& out) const {
  out.clear();
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  std::size_t prev = 0;
  if (regex_) {
    std::vector<std::pair<std::size_t, std::size_t>> found;
    regex_->find_all(text, found);
    for (auto [b, e] : found) {
      if (prev != b) out.push_back({prev, b, false});
      out.push_back({b, e, true});
      prev = e;
    }
  } else if (!literal_.empty()) {
    std::size_t at = 0;
    while ((at = text.find(literal_, prev)) != std::string_view::npos) {
      if (prev != at) out.push_back({prev, at, false});
      out.push_back({at, at + literal_.size(), true});
      prev = at + literal_.size();
    }
  }
  if (prev != text.size()) out.push_back({prev, text.size(), false});
}

std::string SplitPattern::replace_all(std::string_view text, std::string_view content) const {
  std::vector<Match> m;
  find_matches(text, m);
  std::string out;
  out.reserve(text.size());
  for (const auto& x : m) {
    if (x.is_match) {
      out.append(content);
    } else {
      out.append(text.substr(x.begin, x.end - x.begin));
    }
  }
  return out;
}

bool parse_split_behavior(std::string_view name, SplitBehavior* out) {
  struct Entry {
    std::string_view a, b;
    SplitBehavior v;
  };
  static constexpr Entry kEntries[] = {
      {"Removed", "removed", SplitBehavior::kRemoved},
      {"Isolated", "isolated", SplitBehavior::kIsolated},
      {"MergedWithPrevious", "merged_with_previous", SplitBehavior::kMergedWithPrevious},
      {"MergedWithNext", "merged_with_next", SplitBehavior::kMergedWithNext},
      {"Contiguous", "contiguous", SplitBehavior::kContiguous},
  };
  for (const auto& e : kEntries) {
    if (name == e.a || name == e.b) {
      *out = e.v;
      return true;
    }
  }
  return false;
}

void apply_split_behavior(std::vector<Match>& matches, SplitBehavior behavior, bool invert, std::vector<Match>& out) {
  if (invert) {
    for (auto& m : matches) m.is_match = !m.is_match;
  }
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const auto& m : matches) out.push_back({m.begin, m.end, false});
      return;
    case SplitBehavior::kRemoved:
      for (const auto& m : matches) {
        if (!m.is_match) out.push_back(m);
      }
      return;
    case SplitBehavior::kContiguous: {
      const std::size_t base = out.size();
      bool prev = false;
      for (const auto& m : matches) {
        if (m.is_match == prev && out.size() > base) {
          out.back().end = m.end;
        } else {
          out.push_back({m.begin, m.end, false});
        }
        prev = m.is_match;
      }
      return;
    }
    case SplitBehavior::kMergedWithPrevious: {
      const std::size_t base = out.size();
      bool prev = false;
      for (const auto& m : matches) {
        if (m.is_match && !prev && out.size() > base) {
          out.back().end = m.end;
        } else {
          out.push_back({m.begin, m.end, false});
        }
        prev = m.is_match;
      }
      return;
    }
    case SplitBehavior::kMergedWithNext: {
      const std::size_t base = out.size();
      bool prev = false;
      for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
        if (it->is_match && !prev && out.size() > base) {
          out.back().begin = it->begin;
        } else {
          out.push_back({it->begin, it->end, false});
        }
        prev = it->is_match;
      }
      std::reverse(out.begin() + static_cast<std::ptrdiff_t>(base), out.end());
      return;
    }
  }
}

}  // namespace mamba::tok
