// Parser of the chat-template engine: tokens (chat_template_lexer.h) → the syntax tree that
// ChatTemplate renders. Follows jinja2's grammar and operator precedence (jinja2/parser.py):
// `a if c else b` < or < and < not < comparisons / in / not in < + - < ~ < * / // % < ** < unary
// - + < filters `|f` and tests `is t` < postfix . [] () < primary.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mamba/status.h"
#include "tokenizer/chat_template_lexer.h"
#include "tokenizer/chat_template_value.h"

namespace mamba::tok::jinja {

/// Nesting bound at parse time (brackets, unary operators, filters' operands, blocks): deeper
/// input is an error, so no input can overflow the stack here or when rendering.
inline constexpr int kMaxParseDepth = 128;

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

/// An expression node. `args` holds the operands, by kind:
///   kLiteral: none (value in `literal`); kName: none (`name`); kList / kTuple: the items;
///   kDict: key0, value0, key1, ...; kAttr: [object] (`name` = attribute); kItem: [object, index];
///   kSlice: [object, start, stop, step] (null when omitted); kCall: [callee, positional...];
///   kFilter: [value, positional...] (`name` = filter); kTest: [value, args...] (`name` = test,
///   `negated` for `is not`); kNot / kNeg / kPos: [operand]; kBinary: [left, right] (`name` = op:
///   + - * / // % ** ~); kCompare: [first, others...] with `ops` (== != < <= > >= in notin);
///   kAnd / kOr: [left, right]; kCond: [then, condition, else (null: undefined)].
struct Expr {
  enum class Kind : unsigned char {
    kLiteral, kName, kList, kTuple, kDict, kAttr, kItem, kSlice, kCall, kFilter, kTest,
    kNot, kNeg, kPos, kBinary, kCompare, kAnd, kOr, kCond,
  };
  Kind kind = Kind::kLiteral;
  int line = 0;
  bool negated = false;
  std::string name;
  Value literal;
  std::vector<ExprPtr> args;
  std::vector<std::string> ops;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  ///< kCall / kFilter / kTest keyword arguments
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

/// A statement node, by kind:
///   kText: `text`; kOutput: exprs [value];
///   kIf: exprs = conditions, bodies = one per condition + the else body;
///   kFor: names = targets, exprs [iterable, filter (null: none)], bodies [body, else body];
///   kSet: names = targets (or [namespace, attribute] when `attr_target`), exprs [value];
///   kSetBlock: names [target], bodies [body] (`{% set x %}...{% endset %}`);
///   kMacro: `text` = name, names = parameters, exprs = their defaults (null: none), bodies [body];
///   kBreak / kContinue; kScope: bodies [body] (`{% generation %}`: rendered as is).
struct Stmt {
  enum class Kind : unsigned char { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kBreak, kContinue, kScope };
  Kind kind = Kind::kText;
  int line = 0;
  bool attr_target = false;
  std::string text;
  std::vector<std::string> names;
  std::vector<ExprPtr> exprs;
  std::vector<Body> bodies;
};

/// Parses a token stream into statements. Errors: kFormat "NAME: line L, column C: <what>" (syntax
/// errors, nesting deeper than kMaxParseDepth); kUnsupported "NAME: line L: <construct> is not
/// supported" for valid Jinja2 this engine does not implement (extends, include, call blocks, ...).
Result<Body> parse_template(const std::vector<Token>& tokens, std::string_view name);

}  // namespace mamba::tok::jinja
