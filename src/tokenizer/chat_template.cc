// ChatTemplate: parse (chat_template_lexer.h, chat_template_parser.h) and the tree-walking
// renderer. Scoping follows jinja2: a for loop's body gets a fresh scope per iteration (what it
// sets is gone after the iteration; namespace() is the way out), a macro sees its parameters and
// the template's top level, `if` opens no scope.
#include "tokenizer/chat_template.h"

#include <fmt/format.h>

#include <cmath>
#include <new>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "tokenizer/chat_template_builtins.h"
#include "tokenizer/chat_template_lexer.h"
#include "tokenizer/chat_template_parser.h"

namespace mamba::tok {

using jinja::Args;
using jinja::Body;
using jinja::Expr;
using jinja::fail;
using jinja::List;
using jinja::Stmt;
using jinja::Value;

struct ChatTemplate::Impl {
  std::string name;
  Body body;
};

namespace {

/// Native recursion bound while rendering (expression nodes + nested blocks + macro calls): the
/// parser bounds a template's nesting, this bounds what macro recursion stacks on top of it.
constexpr int kMaxNativeDepth = 1000;

class Renderer {
 public:
  Renderer(const ChatTemplateLimits& limits, const Value& context) : limits_(limits), context_(context) {
    budget_.steps_left = limits.max_steps;
    budget_.max_bytes = limits.max_output_bytes;
    frames_.emplace_back();
  }

  std::string run(const Body& body) {
    const jinja::RenderScope scope(budget_);  // walks over values charge budget_; namespaces freed at the end
    std::string out;
    out_ = &out;
    exec_body(body);
    return out;
  }

  int line() const { return line_; }

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Frame = std::vector<std::pair<std::string, Value>>;

  struct DepthGuard {
    Renderer& r;
    explicit DepthGuard(Renderer& renderer) : r(renderer) {
      if (++r.native_depth_ > kMaxNativeDepth) fail("the template nests too deeply at render (max_depth)");
    }
    ~DepthGuard() { --r.native_depth_; }
  };

  // ---- scopes ----
  Value lookup(const std::string& name) const {
    for (std::size_t k = frames_.size(); k-- > barrier_;)
      for (const auto& [n, v] : frames_[k])
        if (n == name) return v;
    for (const auto& [n, v] : frames_[0])
      if (n == name) return v;
    if (context_.kind == Value::Kind::kDict)
      if (const Value* v = context_.dict->find(name)) return *v;
    if (jinja::is_global_function(name)) {
      Value f;
      f.kind = Value::Kind::kCallable;
      f.fn = std::make_shared<const jinja::Callable>(jinja::Callable{name, nullptr});
      return f;
    }
    return Value::undefined(fmt::format("'{}' is undefined", name));
  }

  void assign(const std::string& name, Value v) {
    Frame& f = frames_.back();
    for (auto& [n, old] : f)
      if (n == name) {
        old = std::move(v);
        return;
      }
    f.emplace_back(name, std::move(v));
  }

  void assign_targets(const std::vector<std::string>& names, const Value& v) {
    if (names.size() == 1) {
      assign(names[0], v);
      return;
    }
    List items = jinja::iterate(v, budget_);
    if (items.size() != names.size())
      fail(items.size() > names.size() ? fmt::format("too many values to unpack (expected {})", names.size())
                                       : fmt::format("not enough values to unpack (expected {}, got {})", names.size(), items.size()));
    for (std::size_t k = 0; k < names.size(); ++k) assign(names[k], items[k]);
  }

  void emit(std::string_view s) {
    out_->append(s);
    if (out_->size() > limits_.max_output_bytes) fail("the output exceeded max_output_bytes");
  }

  // ---- statements ----
  Flow exec_body(const Body& body) {
    DepthGuard guard(*this);
    for (const auto& s : body) {
      Flow f = exec(*s);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  Flow exec(const Stmt& s) {
    line_ = s.line;
    budget_.charge(1);
    switch (s.kind) {
      case Stmt::Kind::kText: emit(s.text); return Flow::kNormal;
      case Stmt::Kind::kOutput: {
        Value v = eval(*s.exprs[0]);
        if (v.is_string()) emit(v.str());
        else emit(jinja::to_str(v));
        return Flow::kNormal;
      }
      case Stmt::Kind::kIf:
        for (std::size_t k = 0; k < s.exprs.size(); ++k) {
          line_ = s.exprs[k]->line;
          if (jinja::truthy(eval(*s.exprs[k]))) return exec_body(s.bodies[k]);
        }
        if (s.bodies.size() > s.exprs.size()) return exec_body(s.bodies.back());
        return Flow::kNormal;
      case Stmt::Kind::kFor: exec_for(s); return Flow::kNormal;
      case Stmt::Kind::kSet: exec_set(s); return Flow::kNormal;
      case Stmt::Kind::kSetBlock: assign(s.names[0], Value::string(capture(s.bodies[0]))); return Flow::kNormal;
      case Stmt::Kind::kMacro: {
        Value f;
        f.kind = Value::Kind::kCallable;
        f.fn = std::make_shared<const jinja::Callable>(jinja::Callable{s.text, &s});
        assign(s.text, std::move(f));
        return Flow::kNormal;
      }
      case Stmt::Kind::kBreak: return Flow::kBreak;
      case Stmt::Kind::kContinue: return Flow::kContinue;
      case Stmt::Kind::kScope: return exec_body(s.bodies[0]);
    }
    return Flow::kNormal;
  }

  std::string capture(const Body& body) {
    std::string buf;
    std::string* saved = out_;
    out_ = &buf;
    try {
      exec_body(body);
    } catch (...) {
      out_ = saved;
      throw;
    }
    out_ = saved;
    return buf;
  }

  [[gnu::noinline]] void exec_set(const Stmt& s) {
    Value v = eval(*s.exprs[0]);
    if (!s.attr_target) {
      assign_targets(s.names, v);
      return;
    }
    Value target = lookup(s.names[0]);
    if (target.kind != Value::Kind::kNamespace) fail("cannot assign attribute on non-namespace object");
    target.ns->attrs.set(s.names[1], std::move(v));
  }

  [[gnu::noinline]] void exec_for(const Stmt& s) {
    Value seq = eval(*s.exprs[0]);
    List items = jinja::iterate(seq, budget_);
    if (s.exprs[1]) {  // {% for x in xs if cond %}: filtered before loop.* counts
      List kept;
      for (auto& x : items) {
        budget_.charge(1);
        frames_.emplace_back();
        assign_targets(s.names, x);
        bool keep = jinja::truthy(eval(*s.exprs[1]));
        frames_.pop_back();
        if (keep) kept.push_back(std::move(x));
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      exec_body(s.bodies[1]);
      return;
    }
    const auto n = static_cast<std::int64_t>(items.size());
    for (std::int64_t k = 0; k < n; ++k) {
      budget_.charge(1);
      jinja::Dict loop;
      loop.items = {
          {"index", Value::integer(k + 1)},
          {"index0", Value::integer(k)},
          {"revindex", Value::integer(n - k)},
          {"revindex0", Value::integer(n - k - 1)},
          {"first", Value::boolean(k == 0)},
          {"last", Value::boolean(k == n - 1)},
          {"length", Value::integer(n)},
          {"depth", Value::integer(1)},
          {"depth0", Value::integer(0)},
          {"previtem", k > 0 ? items[static_cast<std::size_t>(k - 1)] : Value::undefined("there is no previous item")},
          {"nextitem", k + 1 < n ? items[static_cast<std::size_t>(k + 1)] : Value::undefined("there is no next item")},
      };
      frames_.emplace_back();
      assign("loop", Value::make_dict(std::move(loop)));
      assign_targets(s.names, items[static_cast<std::size_t>(k)]);
      Flow f = exec_body(s.bodies[0]);
      frames_.pop_back();
      if (f == Flow::kBreak) break;
    }
  }

  // ---- expressions ----
  Value eval(const Expr& e) {
    DepthGuard guard(*this);
    budget_.charge(1);
    line_ = e.line;
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.literal;
      case Expr::Kind::kName: return lookup(e.name);
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: return eval_list(e);
      case Expr::Kind::kDict: return eval_dict(e);
      case Expr::Kind::kAttr: return jinja::get_attr(eval(*e.args[0]), e.name);
      case Expr::Kind::kItem: return eval_item(e);
      case Expr::Kind::kSlice: return eval_slice(e);
      case Expr::Kind::kCall: return eval_call(e);
      case Expr::Kind::kFilter: return eval_filter(e);
      case Expr::Kind::kTest: return eval_test(e);
      case Expr::Kind::kNot: return Value::boolean(!jinja::truthy(eval(*e.args[0])));
      case Expr::Kind::kNeg:
      case Expr::Kind::kPos: return eval_sign(e);
      case Expr::Kind::kBinary: return eval_binary(e);
      case Expr::Kind::kCompare: return eval_compare(e);
      case Expr::Kind::kAnd: {
        Value l = eval(*e.args[0]);
        return jinja::truthy(l) ? eval(*e.args[1]) : l;
      }
      case Expr::Kind::kOr: {
        Value l = eval(*e.args[0]);
        return jinja::truthy(l) ? l : eval(*e.args[1]);
      }
      case Expr::Kind::kCond:
        if (jinja::truthy(eval(*e.args[1]))) return eval(*e.args[0]);
        return e.args[2] ? eval(*e.args[2]) : Value::undefined("the inline if expression evaluated to false and no else section was defined.");
    }
    return Value::undefined();
  }

  [[gnu::noinline]] Value eval_list(const Expr& e) {
    List items;
    items.reserve(e.args.size());
    for (const auto& a : e.args) items.push_back(eval(*a));
    return Value::make_list(std::move(items), e.kind == Expr::Kind::kTuple);
  }

  [[gnu::noinline]] Value eval_dict(const Expr& e) {
    jinja::Dict d;
    for (std::size_t k = 0; k + 1 < e.args.size(); k += 2) {
      Value key = eval(*e.args[k]);
      if (!key.is_string()) fail("dict keys must be strings in this engine");
      d.set(key.str(), eval(*e.args[k + 1]));
    }
    return Value::make_dict(std::move(d));
  }

  [[gnu::noinline]] Value eval_item(const Expr& e) {
    Value obj = eval(*e.args[0]);
    return jinja::get_item(obj, eval(*e.args[1]));
  }

  [[gnu::noinline]] Value eval_slice(const Expr& e) {
    Value obj = eval(*e.args[0]);
    Value parts[3];
    for (int k = 0; k < 3; ++k)
      if (e.args[static_cast<std::size_t>(k) + 1]) parts[k] = eval(*e.args[static_cast<std::size_t>(k) + 1]);
    auto ptr = [&](int k) { return e.args[static_cast<std::size_t>(k) + 1] ? &parts[k] : nullptr; };
    return jinja::slice(obj, ptr(0), ptr(1), ptr(2), budget_);
  }

  Args eval_args(const Expr& e, std::size_t first) {
    Args a;
    for (std::size_t k = first; k < e.args.size(); ++k) a.pos.push_back(eval(*e.args[k]));
    for (const auto& [key, x] : e.kwargs) a.kw.emplace_back(key, eval(*x));
    return a;
  }

  [[gnu::noinline]] Value eval_call(const Expr& e) {
    const Expr& callee = *e.args[0];
    Value fn;
    if (callee.kind == Expr::Kind::kAttr) {
      Value obj = eval(*callee.args[0]);
      if (obj.is_undefined()) fail(obj.s ? *obj.s : "undefined value");
      Args args = eval_args(e, 1);
      line_ = e.line;
      Value result;
      if (jinja::call_method(obj, callee.name, args, budget_, result)) return result;
      fn = jinja::get_attr(obj, callee.name);
      if (fn.kind != Value::Kind::kCallable) {
        if (fn.is_undefined() && (obj.kind == Value::Kind::kString || obj.kind == Value::Kind::kList ||
                                  obj.kind == Value::Kind::kDict))
          fail(fmt::format("'{}' object has no attribute '{}'", jinja::type_name(obj), callee.name));
        call_error(fn);
      }
      return call(fn, args);
    }
    fn = eval(callee);
    if (fn.kind != Value::Kind::kCallable) call_error(fn);
    Args args = eval_args(e, 1);
    line_ = e.line;
    return call(fn, args);
  }

  [[noreturn]] static void call_error(const Value& fn) {
    if (fn.is_undefined()) fail(fn.s ? *fn.s : "undefined value is not callable");
    fail(fmt::format("'{}' object is not callable", jinja::type_name(fn)));
  }

  Value call(const Value& fn, const Args& args) {
    if (!fn.fn->macro) return jinja::call_global(fn.fn->name, args, budget_);
    return call_macro(*fn.fn->macro, args);
  }

  Value call_macro(const Stmt& m, const Args& args) {
    if (macro_depth_ >= limits_.max_depth) fail(fmt::format("macro calls nest deeper than max_depth ({})", limits_.max_depth));
    if (args.pos.size() > m.names.size())
      fail(fmt::format("macro '{}' takes not more than {} argument(s)", m.text, m.names.size()));
    for (const auto& [key, v] : args.kw)
      if (std::find(m.names.begin(), m.names.end(), key) == m.names.end())
        fail(fmt::format("macro '{}' takes no keyword argument '{}'", m.text, key));
    std::size_t saved_barrier = barrier_;
    std::size_t saved_frames = frames_.size();
    ++macro_depth_;
    frames_.emplace_back();
    barrier_ = frames_.size() - 1;
    std::string buf;
    std::string* saved_out = out_;
    out_ = &buf;
    try {
      for (std::size_t k = 0; k < m.names.size(); ++k) {
        Value v;
        bool given = false;
        if (k < args.pos.size()) {
          v = args.pos[k];
          given = true;
        }
        for (const auto& [key, x] : args.kw)
          if (key == m.names[k]) {
            if (given) fail(fmt::format("macro '{}' got multiple values for argument '{}'", m.text, key));
            v = x;
            given = true;
          }
        if (!given) v = m.exprs[k] ? eval(*m.exprs[k]) : Value::undefined(fmt::format("parameter '{}' was not provided", m.names[k]));
        assign(m.names[k], std::move(v));
      }
      exec_body(m.bodies[0]);
    } catch (...) {
      out_ = saved_out;
      frames_.resize(saved_frames);
      barrier_ = saved_barrier;
      --macro_depth_;
      throw;
    }
    out_ = saved_out;
    frames_.resize(saved_frames);
    barrier_ = saved_barrier;
    --macro_depth_;
    return Value::string(std::move(buf));
  }

  [[gnu::noinline]] Value eval_filter(const Expr& e) {
    Value v = eval(*e.args[0]);
    Args args = eval_args(e, 1);
    line_ = e.line;
    return jinja::apply_filter(e.name, v, args, budget_);
  }

  [[gnu::noinline]] Value eval_test(const Expr& e) {
    Value v = eval(*e.args[0]);
    Args args = eval_args(e, 1);
    line_ = e.line;
    bool r = jinja::apply_test(e.name, v, args, budget_);
    return Value::boolean(e.negated ? !r : r);
  }

  [[gnu::noinline]] Value eval_sign(const Expr& e) {
    Value v = eval(*e.args[0]);
    if (v.is_undefined()) fail(v.s ? *v.s : "undefined value");
    if (!v.is_number()) fail(fmt::format("bad operand type for unary {}: '{}'", e.kind == Expr::Kind::kNeg ? "-" : "+", jinja::type_name(v)));
    if (e.kind == Expr::Kind::kPos) return v.is_integral() ? Value::integer(v.as_int()) : v;
    if (v.kind == Value::Kind::kFloat) return Value::number(-v.f);
    if (v.as_int() == INT64_MIN) fail("integer overflow");
    return Value::integer(-v.as_int());
  }

  [[gnu::noinline]] Value eval_compare(const Expr& e) {
    Value left = eval(*e.args[0]);
    for (std::size_t k = 0; k < e.ops.size(); ++k) {
      Value right = eval(*e.args[k + 1]);
      line_ = e.line;
      const std::string& op = e.ops[k];
      bool ok;
      if (op == "==") ok = jinja::equals(left, right);
      else if (op == "!=") ok = !jinja::equals(left, right);
      else if (op == "in" || op == "notin") ok = contains(right, left) == (op == "in");
      else {
        if (left.is_undefined() || right.is_undefined()) fail((left.is_undefined() ? left : right).s ? *(left.is_undefined() ? left : right).s : "undefined value");
        ok = jinja::compare(left, right, op);
      }
      if (!ok) return Value::boolean(false);
      left = std::move(right);
    }
    return Value::boolean(true);
  }

  bool contains(const Value& seq, const Value& x) {
    switch (seq.kind) {
      case Value::Kind::kString:
        if (!x.is_string()) fail(fmt::format("'in <string>' requires string as left operand, not {}", jinja::type_name(x)));
        return seq.s->find(x.str()) != std::string::npos;
      case Value::Kind::kList:
        for (const auto& v : *seq.list) {
          budget_.charge(1);
          if (jinja::equals(v, x)) return true;
        }
        return false;
      case Value::Kind::kDict: return x.is_string() && seq.dict->find(x.str()) != nullptr;
      case Value::Kind::kNamespace: return x.is_string() && seq.ns->attrs.find(x.str()) != nullptr;
      case Value::Kind::kUndefined: return false;
      default: fail(fmt::format("argument of type '{}' is not iterable", jinja::type_name(seq)));
    }
  }

  [[gnu::noinline]] Value eval_binary(const Expr& e) {
    Value l = eval(*e.args[0]);
    Value r = eval(*e.args[1]);
    line_ = e.line;
    const std::string& op = e.name;
    if (op == "~") {
      std::string s = jinja::to_str(l);
      s += jinja::to_str(r);
      budget_.check_size(s.size());
      return Value::string(std::move(s));
    }
    if (l.is_undefined() || r.is_undefined()) fail((l.is_undefined() ? l : r).s ? *(l.is_undefined() ? l : r).s : "undefined value");
    if (l.is_number() && r.is_number()) return arithmetic(op, l, r);
    if (op == "+") {
      if (l.is_string() && r.is_string()) {
        budget_.check_size(l.str().size() + r.str().size());
        return Value::string(l.str() + r.str());
      }
      if (l.kind == Value::Kind::kList && r.kind == Value::Kind::kList && l.is_tuple == r.is_tuple) {
        budget_.check_size((l.list->size() + r.list->size()) * sizeof(Value));  // the elements' own bytes
        List out = *l.list;
        out.insert(out.end(), r.list->begin(), r.list->end());
        return Value::make_list(std::move(out), l.is_tuple);
      }
      if (l.is_string()) fail(fmt::format("can only concatenate str (not \"{}\") to str", jinja::type_name(r)));
    }
    if (op == "*" && (l.is_integral() || r.is_integral())) {
      const Value& seq = l.is_integral() ? r : l;
      std::int64_t n = std::max<std::int64_t>(0, (l.is_integral() ? l : r).as_int());
      if (seq.is_string()) {
        if (n > 0 && seq.str().size() > 0) budget_.check_size(static_cast<std::size_t>(std::min<std::int64_t>(n, INT64_MAX / 2)) > budget_.max_bytes / seq.str().size() ? budget_.max_bytes + 1 : seq.str().size() * static_cast<std::size_t>(n));
        std::string out;
        for (std::int64_t k = 0; k < n && !seq.str().empty(); ++k) out += seq.str();
        return Value::string(std::move(out));
      }
      if (seq.kind == Value::Kind::kList) {
        std::size_t per = std::max<std::size_t>(seq.list->size(), 1);
        if (n > 0 && static_cast<std::uint64_t>(n) > budget_.max_bytes / sizeof(Value) / per) fail("a string or list grew past the output limit (max_output_bytes)");
        budget_.charge(n * static_cast<std::int64_t>(seq.list->size()));
        List out;
        for (std::int64_t k = 0; k < n; ++k) out.insert(out.end(), seq.list->begin(), seq.list->end());
        return Value::make_list(std::move(out), seq.is_tuple);
      }
    }
    if (op == "%" && l.is_string()) fail("printf-style string formatting ('%') is not supported by this engine");
    fail(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, jinja::type_name(l), jinja::type_name(r)));
  }

  static Value arithmetic(const std::string& op, const Value& l, const Value& r) {
    if (l.is_integral() && r.is_integral() && op != "/") {
      std::int64_t a = l.as_int(), b = r.as_int(), out = 0;
      if (op == "+") {
        if (__builtin_add_overflow(a, b, &out)) fail("integer overflow");
      } else if (op == "-") {
        if (__builtin_sub_overflow(a, b, &out)) fail("integer overflow");
      } else if (op == "*") {
        if (__builtin_mul_overflow(a, b, &out)) fail("integer overflow");
      } else if (op == "//" || op == "%") {
        if (b == 0) fail("integer division or modulo by zero");
        if (a == INT64_MIN && b == -1) {
          if (op == "%") return Value::integer(0);
          fail("integer overflow");
        }
        std::int64_t q = a / b, m = a % b;
        if (m != 0 && ((m < 0) != (b < 0))) {
          q -= 1;
          m += b;
        }
        out = op == "//" ? q : m;
      } else if (op == "**") {
        if (b < 0) return Value::number(std::pow(static_cast<double>(a), static_cast<double>(b)));
        out = 1;
        std::int64_t base = a;
        while (b > 0) {
          if (b & 1)
            if (__builtin_mul_overflow(out, base, &out)) fail("integer overflow");
          b >>= 1;
          if (b > 0 && __builtin_mul_overflow(base, base, &base)) fail("integer overflow");
        }
      }
      return Value::integer(out);
    }
    double a = l.as_double(), b = r.as_double();
    if (op == "+") return Value::number(a + b);
    if (op == "-") return Value::number(a - b);
    if (op == "*") return Value::number(a * b);
    if (op == "/") {
      if (b == 0) fail("division by zero");
      return Value::number(a / b);
    }
    if (op == "//" || op == "%") {
      if (b == 0) fail("float floor division by zero");
      double m = std::fmod(a, b);
      if (m != 0 && ((m < 0) != (b < 0))) m += b;
      if (op == "%") return Value::number(m);
      return Value::number(std::floor((a - m) / b + 0.5) == (a - m) / b ? (a - m) / b : std::floor(a / b));
    }
    if (op == "**") {
      if (a == 0 && b < 0) fail("0.0 cannot be raised to a negative power");
      return Value::number(std::pow(a, b));
    }
    fail("unknown operator " + op);
  }

  const ChatTemplateLimits& limits_;
  const Value& context_;
  jinja::Budget budget_;
  std::vector<Frame> frames_;
  std::size_t barrier_ = 1;
  std::string* out_ = nullptr;
  int line_ = 1;
  int native_depth_ = 0;
  int macro_depth_ = 0;
};

}  // namespace

ChatTemplate::ChatTemplate(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

Result<ChatTemplate> ChatTemplate::parse(std::string_view source, std::string_view name) {
  auto tokens = jinja::lex_template(source, name);
  if (!tokens.ok()) return tokens.error();
  auto body = jinja::parse_template(tokens.value(), name);
  if (!body.ok()) return body.error();
  auto impl = std::make_shared<Impl>();
  impl->name = std::string(name);
  impl->body = std::move(body).value();
  return ChatTemplate(std::move(impl));
}

Result<std::string> ChatTemplate::render(const nlohmann::json& context, const ChatTemplateLimits& limits) const {
  if (!context.is_object() && !context.is_null())
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: the context must be a JSON object", impl_->name));
  Value ctx;
  try {
    ctx = jinja::from_json(context.is_null() ? nlohmann::json::object() : context);
  } catch (const jinja::EvalError& e) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: the context: {}", impl_->name, e.message));
  }
  Renderer r(limits, ctx);
  try {
    return r.run(impl_->body);
  } catch (const jinja::EvalError& e) {
    if (e.raised) return make_error(ErrorCode::kInvalidArgument, e.message);
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: line {}: {}", impl_->name, r.line(), e.message));
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: line {}: {}", impl_->name, r.line(), e.what()));
  }
}

}  // namespace mamba::tok
