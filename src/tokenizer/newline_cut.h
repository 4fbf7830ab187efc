// Where a long text may be cut for encoding (Tokenizer::Impl::newline_cuts): just after a '\n'
// that stands between two visible ASCII characters. In the GPT-2 byte-level pipeline such a '\n'
// is a regex match of its own (the runs before and after it cannot take it in: letters, digits,
// punctuation and contractions exclude whitespace, and a lone whitespace character followed by a
// non-space one is `\s+`), and a starter with no composition across it for the Unicode normal
// forms, so the pieces' ids are the whole text's.
#pragma once

#include <cstddef>
#include <string_view>

namespace mamba::tok {

/// Bytes after which encode cuts a long text at the next newline cut.
inline constexpr std::size_t kNewlineCutBytes = 64 * 1024;

/// The end of the piece of text[begin, end) that starts at `begin`: `end` when at most
/// `min_bytes` remain, else just after the first '\n' at or after begin + min_bytes (and after
/// `begin`) whose neighbours are visible ASCII characters (0x21–0x7E); `end` when there is none.
std::size_t newline_cut_after(std::string_view text, std::size_t begin, std::size_t end,
                              std::size_t min_bytes = kNewlineCutBytes);

}  // namespace mamba::tok
