#include "tokenizer/chat_template_lexer.h"

#include <fmt/format.h>

#include "tokenizer/chat_template_value.h"
#include "tokenizer/unicode.h"

namespace mamba::tok::jinja {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

/// Python's str.rstrip(): drops trailing Unicode whitespace.
std::string rstrip_py(std::string_view s) {
  auto chars = utf8_chars(s);
  std::size_t keep = chars.size();
  while (keep > 0 && py_isspace(chars[keep - 1])) --keep;
  std::size_t bytes = 0;
  for (std::size_t k = 0; k < keep; ++k) bytes += chars[k].size();
  return std::string(s.substr(0, bytes));
}

/// True when `s` is non-empty and all Unicode whitespace (jinja2's whitespace_re.fullmatch).
bool all_space(std::string_view s) {
  if (s.empty()) return false;
  for (auto ch : utf8_chars(s))
    if (!py_isspace(ch)) return false;
  return true;
}

class Lexer {
 public:
  Lexer(std::string src, std::string_view name) : src_(std::move(src)), name_(name) {}

  Result<std::vector<Token>> run() {
    try {
      lex_root();
    } catch (const Error& e) {
      return e;
    }
    push(TokKind::kEof, "", src_.size());
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void error(std::size_t pos, const std::string& what) {
    auto [line, col] = where(pos);
    throw make_error(ErrorCode::kFormat, fmt::format("{}: line {}, column {}: {}", name_, line, col, what));
  }

  std::pair<int, int> where(std::size_t pos) {
    // Tokens are pushed in order: advance a cursor instead of rescanning.
    while (cursor_ < pos && cursor_ < src_.size()) {
      if (src_[cursor_] == '\n') {
        ++line_;
        col_ = 1;
      } else {
        ++col_;
      }
      ++cursor_;
    }
    if (pos < cursor_) {  // an error position before the cursor: count from the start
      int line = 1, col = 1;
      for (std::size_t k = 0; k < pos && k < src_.size(); ++k) {
        if (src_[k] == '\n') line++, col = 1;
        else ++col;
      }
      return {line, col};
    }
    return {line_, col_};
  }

  void push(TokKind kind, std::string text, std::size_t pos) {
    auto [line, col] = where(pos);
    tokens_.push_back(Token{kind, std::move(text), line, col});
  }

  bool at(std::size_t pos, std::string_view s) const { return src_.compare(pos, s.size(), s) == 0; }

  /// Text src_[begin, end) before a tag whose strip sign is `sign`, with jinja2's OptionalLStrip rules.
  void push_text(std::size_t begin, std::size_t end, char sign, bool lstrip_applies) {
    std::string text = src_.substr(begin, end - begin);
    if (sign == '-') {
      text = rstrip_py(text);
    } else if (sign != '+' && lstrip_applies) {
      std::size_t nl = text.rfind('\n');
      std::size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      bool line_starting = begin == 0 || src_[begin - 1] == '\n';
      if ((l_pos > 0 || line_starting) && all_space(std::string_view(text).substr(l_pos))) text.resize(l_pos);
    }
    if (!text.empty()) push(TokKind::kText, std::move(text), begin);
  }

  /// Skips a block end's trailing whitespace: `-%}` all of it, `%}` one newline (trim_blocks).
  std::size_t after_block_end(std::size_t pos, char sign) {
    if (sign == '-') {
      while (pos < src_.size() && is_space(src_[pos])) ++pos;
    } else if (sign != '+' && pos < src_.size() && src_[pos] == '\n') {
      ++pos;
    }
    return pos;
  }

  void lex_root() {
    std::size_t pos = 0;
    while (pos < src_.size()) {
      std::size_t start = pos;
      while (true) {
        start = src_.find('{', start);
        if (start == std::string::npos || start + 1 >= src_.size()) break;
        char c = src_[start + 1];
        if (c == '{' || c == '%' || c == '#') break;
        ++start;
      }
      if (start == std::string::npos || start + 1 >= src_.size()) {
        push_text(pos, src_.size(), 0, false);
        return;
      }
      char type = src_[start + 1];
      std::size_t p = start + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      if (type == '%') {
        std::size_t raw_end = match_raw_begin(p);
        if (raw_end != std::string::npos) {
          push_text(pos, start, sign, true);
          pos = lex_raw(raw_end);
          continue;
        }
      }
      push_text(pos, start, sign, type != '{');
      if (type == '#') {
        pos = skip_comment(p, start);
      } else {
        push(type == '%' ? TokKind::kBlockBegin : TokKind::kVarBegin, "", start);
        pos = lex_tag(p, type == '%', start);
      }
    }
  }

  /// After `{%` and its sign at `p`: the end of `raw\s*(-%}\s*|%})`, or npos if this is no raw tag.
  std::size_t match_raw_begin(std::size_t p) {
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (!at(p, "raw") || (p + 3 < src_.size() && is_name_char(src_[p + 3]))) return std::string::npos;
    p += 3;
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (at(p, "-%}")) return after_block_end(p + 3, '-');
    if (at(p, "%}")) return p + 2;
    return std::string::npos;
  }

  /// The body of a raw block from `p`; returns the position after `{% endraw %}`.
  std::size_t lex_raw(std::size_t p) {
    for (std::size_t s = src_.find("{%", p); s != std::string::npos; s = src_.find("{%", s + 1)) {
      std::size_t q = s + 2;
      char sign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
      while (q < src_.size() && is_space(src_[q])) ++q;
      if (!at(q, "endraw")) continue;
      q += 6;
      while (q < src_.size() && is_space(src_[q])) ++q;
      char end_sign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) end_sign = src_[q++];
      if (!at(q, "%}")) continue;
      push_text(p, s, sign, true);
      return after_block_end(q + 2, end_sign);
    }
    error(p, "Missing end of raw directive");
  }

  std::size_t skip_comment(std::size_t p, std::size_t start) {
    std::size_t q = src_.find("#}", p);
    if (q == std::string::npos) error(start, "Missing end of comment tag");
    char sign = 0;
    if (q > p && (src_[q - 1] == '-' || src_[q - 1] == '+')) sign = src_[q - 1];
    return after_block_end(q + 2, sign);
  }

  /// Tokens of a `{% %}` / `{{ }}` tag from `p`; returns the position after its end.
  std::size_t lex_tag(std::size_t p, bool block, std::size_t start) {
    std::string brackets;
    while (true) {
      while (p < src_.size() && is_space(src_[p])) ++p;
      if (p >= src_.size()) error(start, block ? "unexpected end of template, expected end of statement block ('%}')"
                                             : "unexpected end of template, expected end of print statement ('}}')");
      if (brackets.empty()) {
        if (block) {
          for (char sign : {'+', '-', '\0'}) {
            std::string end = sign ? std::string(1, sign) + "%}" : "%}";
            if (at(p, end)) {
              push(TokKind::kBlockEnd, "", p);
              return after_block_end(p + end.size(), sign);
            }
          }
        } else {
          if (at(p, "-}}")) {
            push(TokKind::kVarEnd, "", p);
            return after_block_end(p + 3, '-');
          }
          if (at(p, "}}")) {
            push(TokKind::kVarEnd, "", p);
            return p + 2;
          }
        }
      }
      p = lex_token(p, brackets);
    }
  }

  std::size_t lex_token(std::size_t p, std::string& brackets) {
    char c = src_[p];
    if (is_digit(c)) return lex_number(p);
    if (is_name_start(c)) {
      std::size_t q = p;
      while (q < src_.size() && is_name_char(src_[q])) ++q;
      push(TokKind::kName, src_.substr(p, q - p), p);
      return q;
    }
    if (c == '\'' || c == '"') return lex_string(p);
    static constexpr std::string_view kOps2[] = {"//", "**", "==", "!=", ">=", "<="};
    for (auto op : kOps2)
      if (at(p, op)) {
        push(TokKind::kOp, std::string(op), p);
        return p + 2;
      }
    static constexpr std::string_view kOps1 = "+-/*%~[](){}><=.:|,;";
    if (kOps1.find(c) == std::string_view::npos) error(p, fmt::format("unexpected char '{}'", std::string(1, c)));
    if (c == '(' || c == '[' || c == '{') {
      brackets += c == '(' ? ')' : c == '[' ? ']' : '}';
    } else if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty()) error(p, fmt::format("unexpected '{}'", c));
      if (brackets.back() != c) error(p, fmt::format("unexpected '{}', expected '{}'", c, brackets.back()));
      brackets.pop_back();
    }
    push(TokKind::kOp, std::string(1, c), p);
    return p + 1;
  }

  std::size_t digits(std::size_t q, std::string& out) {
    while (q < src_.size() && (is_digit(src_[q]) || (src_[q] == '_' && q + 1 < src_.size() && is_digit(src_[q + 1])))) {
      if (src_[q] != '_') out += src_[q];
      ++q;
    }
    return q;
  }

  std::size_t lex_number(std::size_t p) {
    std::string text;
    std::size_t q = digits(p, text);
    bool is_float = false;
    if (q + 1 < src_.size() && src_[q] == '.' && is_digit(src_[q + 1])) {
      text += '.';
      q = digits(q + 1, text);
      is_float = true;
    }
    if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
      std::size_t r = q + 1;
      std::string exp = "e";
      if (r < src_.size() && (src_[r] == '+' || src_[r] == '-')) exp += src_[r++];
      if (r < src_.size() && is_digit(src_[r])) {
        q = digits(r, exp);
        text += exp;
        is_float = true;
      }
    }
    push(is_float ? TokKind::kFloat : TokKind::kInt, text, p);
    return q;
  }

  static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  /// A Python string literal (decoded as jinja2 does, with "unicode-escape").
  std::size_t lex_string(std::size_t p) {
    char quote = src_[p];
    std::string out;
    std::size_t q = p + 1;
    while (true) {
      if (q >= src_.size()) error(p, "unexpected end of string literal");
      char c = src_[q];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        ++q;
        continue;
      }
      if (q + 1 >= src_.size()) error(p, "unexpected end of string literal");
      char e = src_[q + 1];
      q += 2;
      switch (e) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          std::uint32_t cp = 0;
          for (int k = 0; k < n; ++k) {
            int h = q < src_.size() ? hex_value(src_[q]) : -1;
            if (h < 0) error(q, fmt::format("invalid \\{} escape in string literal", e));
            cp = cp * 16 + static_cast<std::uint32_t>(h);
            ++q;
          }
          if (cp > 0x10FFFF) error(q, "invalid \\U escape in string literal");
          if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;  // a lone surrogate has no UTF-8 form
          utf8_append(out, static_cast<char32_t>(cp));
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            std::uint32_t cp = static_cast<std::uint32_t>(e - '0');
            for (int k = 0; k < 2 && q < src_.size() && src_[q] >= '0' && src_[q] <= '7'; ++k) cp = cp * 8 + static_cast<std::uint32_t>(src_[q++] - '0');
            utf8_append(out, static_cast<char32_t>(cp));
          } else {
            out += '\\';  // an unknown escape stays as written
            q -= 1;
          }
      }
    }
    push(TokKind::kString, std::move(out), p);
    return q + 1;
  }

  std::string src_;
  std::string name_;
  std::vector<Token> tokens_;
  std::size_t cursor_ = 0;
  int line_ = 1, col_ = 1;
};

/// jinja2's source preparation: "\r\n" and "\r" become "\n"; one trailing newline is dropped.
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t k = 0; k < source.size(); ++k) {
    if (source[k] == '\r') {
      out += '\n';
      if (k + 1 < source.size() && source[k + 1] == '\n') ++k;
    } else {
      out += source[k];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

Result<std::vector<Token>> lex_template(std::string_view source, std::string_view name) {
  return Lexer(normalize_newlines(source), name).run();
}

}  // namespace mamba::tok::jinja
