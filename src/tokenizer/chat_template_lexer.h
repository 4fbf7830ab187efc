// Lexer of the chat-template engine: Jinja2 source → tokens, with the whitespace handling of the
// environment HF renders chat templates in (trim_blocks=True, lstrip_blocks=True): newlines
// normalised to "\n", one trailing newline dropped, `{%-`/`-%}`/`{{-`/`-}}`/`{#-`/`-#}` strip
// whitespace, `{%+`/`+%}` turn lstrip/trim off, comments dropped, `{% raw %}` bodies kept as text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "mamba/status.h"

namespace mamba::tok::jinja {

/// The kind of a token.
enum class TokKind : unsigned char {
  kText,        ///< template text (raw blocks too), whitespace control already applied
  kBlockBegin,  ///< `{%`
  kBlockEnd,    ///< `%}`
  kVarBegin,    ///< `{{`
  kVarEnd,      ///< `}}`
  kName,        ///< identifier (keywords too: if, in, not, ...)
  kString,      ///< string literal, escapes decoded (text = the value)
  kInt,         ///< integer literal (text = digits, underscores removed)
  kFloat,       ///< float literal (text = as written, underscores removed)
  kOp,          ///< operator or punctuation: + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { }
  kEof,
};

/// A token and where it starts (1-based line and column, in bytes).
struct Token {
  TokKind kind = TokKind::kEof;
  std::string text;
  int line = 1;
  int column = 1;
};

/// Splits Jinja2 source into tokens (ending with kEof). Errors: kFormat
/// "NAME: line L, column C: <what>" (unterminated tag, comment, raw block or string, an
/// unexpected character, unbalanced brackets).
Result<std::vector<Token>> lex_template(std::string_view source, std::string_view name);

}  // namespace mamba::tok::jinja
