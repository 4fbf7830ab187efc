#include "tokenizer/newline_cut.h"

namespace mamba::tok {

namespace {
bool visible_ascii(char c) { return c > ' ' && c < 0x7f; }
}  // namespace

std::size_t newline_cut_after(std::string_view text, std::size_t begin, std::size_t end, std::size_t min_bytes) {
  if (end - begin <= min_bytes) return end;
  for (std::size_t i = begin + (min_bytes == 0 ? 1 : min_bytes); i + 1 < end; ++i) {
    i = text.find('\n', i);
    if (i == std::string_view::npos || i + 1 >= end) break;
    if (visible_ascii(text[i - 1]) && visible_ascii(text[i + 1])) return i + 1;
  }
  return end;
}

}  // namespace mamba::tok
