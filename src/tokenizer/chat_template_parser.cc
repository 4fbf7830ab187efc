#include "tokenizer/chat_template_parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdlib>
#include <initializer_list>

namespace mamba::tok::jinja {

namespace {

/// jinja2's built-in filters and tests that this engine leaves out (kUnsupported at parse).
constexpr std::array<std::string_view, 16> kUnimplementedFilters = {
    "attr", "batch", "center", "filesizeformat", "forceescape", "format", "groupby", "pprint",
    "random", "slice", "striptags", "truncate", "urlencode", "urlize", "wordwrap", "xmlattr"};
constexpr std::array<std::string_view, 3> kUnimplementedTests = {"escaped", "filter", "test"};

/// Thrown inside the parser; parse_template returns it.
struct ParseError {
  Error error;
};

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, std::string_view name) : toks_(tokens), name_(name) {}

  Result<Body> run() {
    try {
      Body body = subparse({});
      return body;
    } catch (const ParseError& e) {
      return e.error;
    }
  }

 private:
  // ---- token stream ----
  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(std::size_t k = 1) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  void next() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  bool is_op(std::string_view op) const { return cur().kind == TokKind::kOp && cur().text == op; }
  bool is_name(std::string_view n) const { return cur().kind == TokKind::kName && cur().text == n; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokKind::kText: return "template data";
      case TokKind::kBlockBegin: return "begin of statement block";
      case TokKind::kBlockEnd: return "end of statement block";
      case TokKind::kVarBegin: return "begin of print statement";
      case TokKind::kVarEnd: return "end of print statement";
      case TokKind::kEof: return "end of template";
      case TokKind::kString: return "string";
      default: return "'" + t.text + "'";
    }
  }

  [[noreturn]] void syntax_error(const std::string& what) { syntax_error_at(cur(), what); }
  [[noreturn]] void syntax_error_at(const Token& t, const std::string& what) {
    throw ParseError{make_error(ErrorCode::kFormat, fmt::format("{}: line {}, column {}: {}", name_, t.line, t.column, what))};
  }
  [[noreturn]] void unsupported(const std::string& construct) {
    throw ParseError{make_error(ErrorCode::kUnsupported, fmt::format("{}: line {}: {} is not supported", name_, cur().line, construct))};
  }

  void expect_op(std::string_view op) {
    if (!skip_op(op)) syntax_error(fmt::format("expected '{}', got {}", op, describe(cur())));
  }
  std::string expect_name() {
    if (cur().kind != TokKind::kName) syntax_error(fmt::format("expected a name, got {}", describe(cur())));
    std::string n = cur().text;
    next();
    return n;
  }
  void expect_block_end() {
    if (cur().kind != TokKind::kBlockEnd) syntax_error(fmt::format("expected end of statement block, got {}", describe(cur())));
    next();
  }

  /// Guards recursion: kMaxParseDepth nested constructs at most.
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxParseDepth) p.syntax_error(fmt::format("nesting deeper than {} levels", kMaxParseDepth));
    }
    ~DepthGuard() { --p.depth_; }
  };

  ExprPtr node(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  /// A binary node; left-deep chains (a+b+c+...) count toward the depth bound too.
  ExprPtr binary(Expr::Kind kind, std::string op, ExprPtr l, ExprPtr r, int line) {
    auto e = node(kind, line);
    e->name = std::move(op);
    e->args.push_back(std::move(l));
    e->args.push_back(std::move(r));
    return chain(std::move(e));
  }
  ExprPtr chain(ExprPtr e) {
    if (++chain_ > kMaxParseDepth * 4) syntax_error(fmt::format("expression nesting deeper than {} levels", kMaxParseDepth * 4));
    return e;
  }

  // ---- statements ----
  Body subparse(std::initializer_list<std::string_view> end_tags) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.kind == TokKind::kEof) {
        if (end_tags.size() == 0) return body;
        std::string want;
        for (auto tag : end_tags) want += (want.empty() ? "'" : " or '") + std::string(tag) + "'";
        syntax_error(fmt::format("unexpected end of template; looking for the tags {}", want));
      }
      if (t.kind == TokKind::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->line = t.line;
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.kind == TokKind::kVarBegin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->line = t.line;
        chain_ = 0;
        s->exprs.push_back(parse_tuple(true, false, {}));
        if (cur().kind != TokKind::kVarEnd) syntax_error(fmt::format("expected end of print statement, got {}", describe(cur())));
        next();
        body.push_back(std::move(s));
      } else if (t.kind == TokKind::kBlockBegin) {
        next();
        if (cur().kind == TokKind::kName &&
            std::find(end_tags.begin(), end_tags.end(), std::string_view(cur().text)) != end_tags.end())
          return body;  // the caller consumes the end tag
        chain_ = 0;
        body.push_back(parse_statement());
      } else {
        syntax_error(fmt::format("unexpected {}", describe(t)));
      }
    }
  }

  std::unique_ptr<Stmt> parse_statement() {
    if (cur().kind != TokKind::kName) syntax_error("tag name expected");
    const std::string tag = cur().text;
    auto s = std::make_unique<Stmt>();
    s->line = cur().line;
    if (tag == "if") {
      next();
      s->kind = Stmt::Kind::kIf;
      s->exprs.push_back(parse_expression(false));
      expect_block_end();
      while (true) {
        s->bodies.push_back(subparse({"elif", "else", "endif"}));
        if (skip_name("elif")) {
          s->exprs.push_back(parse_expression(false));
          expect_block_end();
          continue;
        }
        if (skip_name("else")) {
          expect_block_end();
          s->bodies.push_back(subparse({"endif"}));
        }
        next();  // endif
        break;
      }
    } else if (tag == "for") {
      next();
      s->kind = Stmt::Kind::kFor;
      bool paren = skip_op("(");
      do {
        s->names.push_back(expect_name());
      } while (skip_op(","));
      if (paren) expect_op(")");
      if (!skip_name("in")) syntax_error(fmt::format("expected 'in', got {}", describe(cur())));
      s->exprs.push_back(parse_tuple(false, false, {"recursive", "if"}));
      if (is_name("recursive")) unsupported("a recursive for loop");
      s->exprs.push_back(skip_name("if") ? parse_expression(true) : nullptr);
      if (is_name("recursive")) unsupported("a recursive for loop");
      expect_block_end();
      ++loop_depth_;
      s->bodies.push_back(subparse({"endfor", "else"}));
      --loop_depth_;
      if (skip_name("else")) {
        expect_block_end();
        s->bodies.push_back(subparse({"endfor"}));
      } else {
        s->bodies.emplace_back();
      }
      next();  // endfor
    } else if (tag == "set") {
      next();
      std::string target = expect_name();
      if (skip_op(".")) {
        s->attr_target = true;
        s->names = {target, expect_name()};
      } else {
        s->names.push_back(target);
        while (skip_op(",")) s->names.push_back(expect_name());
      }
      if (skip_op("=")) {
        s->kind = Stmt::Kind::kSet;
        s->exprs.push_back(parse_tuple(true, false, {}));
      } else {
        if (s->attr_target || s->names.size() != 1) syntax_error("expected '='");
        if (is_op("|")) unsupported("a filtered block set");
        s->kind = Stmt::Kind::kSetBlock;
        expect_block_end();
        s->bodies.push_back(subparse({"endset"}));
        next();
      }
    } else if (tag == "macro") {
      next();
      s->kind = Stmt::Kind::kMacro;
      s->text = expect_name();
      expect_op("(");
      while (!is_op(")")) {
        if (!s->names.empty()) expect_op(",");
        if (is_op(")")) break;
        std::string param = expect_name();
        s->names.push_back(param);
        if (skip_op("=")) {
          s->exprs.push_back(parse_expression(true));
        } else {
          if (!s->exprs.empty() && s->exprs.back()) syntax_error("non-default argument follows default argument");
          s->exprs.push_back(nullptr);
        }
      }
      next();  // ')'
      expect_block_end();
      s->bodies.push_back(subparse({"endmacro"}));
      next();
      if (cur().kind == TokKind::kName && cur().text == s->text) next();  // {% endmacro name %}
    } else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) syntax_error(fmt::format("'{}' outside loop", tag));
      next();
      s->kind = tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
    } else if (tag == "generation") {
      next();
      s->kind = Stmt::Kind::kScope;
      expect_block_end();
      s->bodies.push_back(subparse({"endgeneration"}));
      next();
    } else if (tag == "call" || tag == "filter" || tag == "with" || tag == "extends" || tag == "block" ||
               tag == "include" || tag == "import" || tag == "from" || tag == "autoescape" || tag == "print") {
      unsupported(fmt::format("the '{}' tag", tag));
    } else {
      syntax_error(fmt::format("Encountered unknown tag '{}'", tag));
    }
    expect_block_end();
    return s;
  }

  // ---- expressions ----
  bool is_tuple_end(std::initializer_list<std::string_view> extra_end) const {
    const Token& t = cur();
    if (t.kind == TokKind::kVarEnd || t.kind == TokKind::kBlockEnd || t.kind == TokKind::kEof) return true;
    if (t.kind == TokKind::kOp && t.text == ")") return true;
    if (t.kind == TokKind::kName)
      for (auto n : extra_end)
        if (t.text == n) return true;
    return false;
  }

  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens, std::initializer_list<std::string_view> extra_end) {
    int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      items.push_back(parse_expression(with_condexpr));
      if (is_op(","))
        is_tuple = true;
      else
        break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) syntax_error(fmt::format("Expected an expression, got {}", describe(cur())));
    }
    auto e = node(Expr::Kind::kTuple, line);
    e->args = std::move(items);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    int line = cur().line;
    ExprPtr e = parse_or();
    while (skip_name("if")) {
      auto c = node(Expr::Kind::kCond, line);
      ExprPtr cond = parse_or();
      ExprPtr other = skip_name("else") ? parse_condexpr() : nullptr;
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(other));
      e = chain(std::move(c));
    }
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      int line = cur().line;
      next();
      e = binary(Expr::Kind::kOr, "or", std::move(e), parse_and(), line);
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      int line = cur().line;
      next();
      e = binary(Expr::Kind::kAnd, "and", std::move(e), parse_not(), line);
    }
    return e;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      int line = cur().line;
      next();
      auto e = node(Expr::Kind::kNot, line);
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().kind == TokKind::kOp && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                         cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        op = cur().text;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && peek().kind == TokKind::kName && peek().text == "in") {
        op = "notin";
        next();
        next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = node(Expr::Kind::kCompare, line);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
      chain(nullptr);
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = cur().text;
      int line = cur().line;
      next();
      e = binary(Expr::Kind::kBinary, op, std::move(e), parse_concat(), line);
    }
    return e;
  }

  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      int line = cur().line;
      next();
      e = binary(Expr::Kind::kBinary, "~", std::move(e), parse_math2(), line);
    }
    return e;
  }

  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = cur().text;
      int line = cur().line;
      next();
      e = binary(Expr::Kind::kBinary, op, std::move(e), parse_pow(), line);
    }
    return e;
  }

  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (is_op("**")) {
      int line = cur().line;
      next();
      e = binary(Expr::Kind::kBinary, "**", std::move(e), parse_unary(true), line);
    }
    return e;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    int line = cur().line;
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      bool neg = cur().text == "-";
      next();
      e = node(neg ? Expr::Kind::kNeg : Expr::Kind::kPos, line);
      e->args.push_back(parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    int line = t.line;
    switch (t.kind) {
      case TokKind::kName: {
        auto e = node(Expr::Kind::kLiteral, line);
        if (t.text == "true" || t.text == "True") e->literal = Value::boolean(true);
        else if (t.text == "false" || t.text == "False") e->literal = Value::boolean(false);
        else if (t.text == "none" || t.text == "None") e->literal = Value::none();
        else {
          e->kind = Expr::Kind::kName;
          e->name = t.text;
        }
        next();
        return e;
      }
      case TokKind::kString: {
        std::string s;
        while (cur().kind == TokKind::kString) {
          s += cur().text;
          next();
        }
        auto e = node(Expr::Kind::kLiteral, line);
        e->literal = Value::string(std::move(s));
        return e;
      }
      case TokKind::kInt: {
        auto e = node(Expr::Kind::kLiteral, line);
        std::int64_t v = 0;
        auto res = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
        if (res.ec != std::errc() || res.ptr != t.text.data() + t.text.size())
          e->literal = Value::number(std::strtod(t.text.c_str(), nullptr));  // Python would keep a big int
        else
          e->literal = Value::integer(v);
        next();
        return e;
      }
      case TokKind::kFloat: {
        auto e = node(Expr::Kind::kLiteral, line);
        e->literal = Value::number(std::strtod(t.text.c_str(), nullptr));
        next();
        return e;
      }
      case TokKind::kOp:
        if (t.text == "(") {
          next();
          ExprPtr e = parse_tuple(true, true, {});
          expect_op(")");
          return e;
        }
        if (t.text == "[") {
          next();
          auto e = node(Expr::Kind::kList, line);
          while (!is_op("]")) {
            if (!e->args.empty()) expect_op(",");
            if (is_op("]")) break;
            e->args.push_back(parse_expression(true));
          }
          next();
          return e;
        }
        if (t.text == "{") {
          next();
          auto e = node(Expr::Kind::kDict, line);
          while (!is_op("}")) {
            if (!e->args.empty()) expect_op(",");
            if (is_op("}")) break;
            e->args.push_back(parse_expression(true));
            expect_op(":");
            e->args.push_back(parse_expression(true));
          }
          next();
          return e;
        }
        break;
      default: break;
    }
    syntax_error(fmt::format("unexpected {}", describe(t)));
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      int line = cur().line;
      if (is_op(".")) {
        next();
        if (cur().kind == TokKind::kName) {
          auto a = node(Expr::Kind::kAttr, line);
          a->name = cur().text;
          next();
          a->args.push_back(std::move(e));
          e = chain(std::move(a));
        } else if (cur().kind == TokKind::kInt) {
          auto a = node(Expr::Kind::kItem, line);
          auto idx = node(Expr::Kind::kLiteral, line);
          idx->literal = Value::integer(std::strtoll(cur().text.c_str(), nullptr, 10));
          next();
          a->args.push_back(std::move(e));
          a->args.push_back(std::move(idx));
          e = chain(std::move(a));
        } else {
          syntax_error("expected name or number");
        }
      } else if (is_op("[")) {
        next();
        e = parse_subscript(std::move(e), line);
        expect_op("]");
      } else if (is_op("(")) {
        auto c = node(Expr::Kind::kCall, line);
        c->args.push_back(std::move(e));
        parse_call_args(*c);
        e = chain(std::move(c));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj, int line) {
    DepthGuard guard(*this);
    ExprPtr parts[3];
    bool slice = false;
    if (!is_op(":")) parts[0] = parse_expression(true);
    if (skip_op(":")) {
      slice = true;
      if (!is_op("]") && !is_op(":")) parts[1] = parse_expression(true);
      if (skip_op(":") && !is_op("]")) parts[2] = parse_expression(true);
    }
    if (is_op(",")) unsupported("a tuple subscript");
    if (!slice) {
      auto e = node(Expr::Kind::kItem, line);
      e->args.push_back(std::move(obj));
      e->args.push_back(std::move(parts[0]));
      return chain(std::move(e));
    }
    auto e = node(Expr::Kind::kSlice, line);
    e->args.push_back(std::move(obj));
    for (auto& p : parts) e->args.push_back(std::move(p));
    return chain(std::move(e));
  }

  /// `( args )` into e.args (after what is already there) and e.kwargs.
  void parse_call_args(Expr& e) {
    DepthGuard guard(*this);
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) unsupported("*args / **kwargs in a call");
      if (cur().kind == TokKind::kName && peek().kind == TokKind::kOp && peek().text == "=") {
        std::string key = cur().text;
        next();
        next();
        e.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!e.kwargs.empty()) syntax_error("invalid syntax for function call expression");
        e.args.push_back(parse_expression(true));
      }
    }
    next();
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      int line = cur().line;
      if (is_op("|")) {
        next();
        std::string name = expect_name();
        while (skip_op(".")) {
          name += '.';
          name += expect_name();
        }
        if (std::find(kUnimplementedFilters.begin(), kUnimplementedFilters.end(), name) != kUnimplementedFilters.end())
          unsupported(fmt::format("the '{}' filter", name));
        auto f = node(Expr::Kind::kFilter, line);
        f->name = name;
        f->args.push_back(std::move(e));
        if (is_op("(")) parse_call_args(*f);
        e = chain(std::move(f));
      } else if (is_name("is")) {
        next();
        auto t = node(Expr::Kind::kTest, line);
        t->negated = skip_name("not");
        t->name = expect_name();
        while (skip_op(".")) {
          t->name += '.';
          t->name += expect_name();
        }
        if (std::find(kUnimplementedTests.begin(), kUnimplementedTests.end(), t->name) != kUnimplementedTests.end())
          unsupported(fmt::format("the '{}' test", t->name));
        t->args.push_back(std::move(e));
        const Token& c = cur();
        if (is_op("(")) {
          parse_call_args(*t);
        } else if ((c.kind == TokKind::kName && c.text != "else" && c.text != "or" && c.text != "and") ||
                   c.kind == TokKind::kString || c.kind == TokKind::kInt || c.kind == TokKind::kFloat ||
                   (c.kind == TokKind::kOp && (c.text == "(" || c.text == "[" || c.text == "{"))) {
          if (is_name("is")) syntax_error("You cannot chain multiple tests with is");
          DepthGuard guard(*this);
          t->args.push_back(parse_postfix(parse_primary()));
        }
        e = chain(std::move(t));
      } else if (is_op("(")) {
        auto c = node(Expr::Kind::kCall, line);
        c->args.push_back(std::move(e));
        parse_call_args(*c);
        e = chain(std::move(c));
      } else {
        return e;
      }
    }
  }

  const std::vector<Token>& toks_;
  std::string name_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  int chain_ = 0;  ///< nodes built by loops (binary chains, postfix chains) in this tag
  int loop_depth_ = 0;
};

}  // namespace

Result<Body> parse_template(const std::vector<Token>& tokens, std::string_view name) {
  return Parser(tokens, name).run();
}

}  // namespace mamba::tok::jinja
