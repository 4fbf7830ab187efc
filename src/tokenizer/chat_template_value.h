// Values of the chat-template engine (src/tokenizer/chat_template.h): what Jinja2 expressions
// evaluate to, with the Python semantics Jinja2 gives them (truthiness, ==, <, str(), repr(),
// HF's tojson, jinja2's attribute / item lookup, slicing, iteration), and the UTF-8 helpers that
// make string lengths and slices count code points as Python does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace mamba::tok::jinja {

struct Value;
struct Stmt;
using List = std::vector<Value>;

/// A Python dict with string keys, in insertion order (as Python's dicts iterate).
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  /// The value of `key`, or nullptr.
  const Value* find(std::string_view key) const;
  /// Sets `key` (replacing its value in place, or appending it).
  void set(std::string key, Value v);
};

/// jinja2's namespace(): the one mutable object (`{% set ns.attr = v %}`).
struct Namespace {
  Dict attrs;
};

/// Something callable: a macro (its `{% macro %}` statement) or a global function by name.
struct Callable {
  std::string name;
  const Stmt* macro = nullptr;  ///< null: a built-in global (raise_exception, range, ...)
};

/// A Jinja2 value. Strings, lists and dicts are immutable and shared (cheap copies), as the
/// ImmutableSandboxedEnvironment HF renders with allows no mutation; a namespace is shared and mutable.
struct Value {
  enum class Kind : std::uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable };
  Kind kind = Kind::kUndefined;
  bool is_tuple = false;  ///< a list that Python would print as a tuple
  /// Lists and dicts: 1 + the deepest element's depth (0 for the rest; a namespace counts 0, its
  /// attributes being cleared apart: RenderScope). make_list / make_dict refuse more than
  /// kMaxValueDepth, so that no walk over a value, and no destructor chain, recurses deeper.
  std::uint16_t depth = 0;
  bool b = false;
  std::int64_t i = 0;
  double f = 0;
  std::shared_ptr<const std::string> s;  ///< kString; kUndefined: jinja2's error message for using it, may be null
  std::shared_ptr<const List> list;
  std::shared_ptr<const Dict> dict;
  std::shared_ptr<Namespace> ns;
  std::shared_ptr<const Callable> fn;

  static Value undefined(std::string message = {});  ///< e.g. "'x' is undefined"
  static Value none();
  static Value boolean(bool v);
  static Value integer(std::int64_t v);
  static Value number(double v);
  static Value string(std::string v);
  static Value make_list(List v, bool tuple = false);
  static Value make_dict(Dict v);

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_string() const { return kind == Kind::kString; }
  /// int or bool (Python's bool is an int).
  bool is_integral() const { return kind == Kind::kInt || kind == Kind::kBool; }
  bool is_number() const { return is_integral() || kind == Kind::kFloat; }
  const std::string& str() const { return *s; }  ///< precondition: kString
  std::int64_t as_int() const { return kind == Kind::kBool ? (b ? 1 : 0) : i; }
  double as_double() const { return kind == Kind::kFloat ? f : static_cast<double>(as_int()); }
};

/// Thrown inside the engine for a run-time error; ChatTemplate::render turns it into an Error.
/// `raised`: the message is a raise_exception() text, passed on unchanged.
struct EvalError {
  std::string message;
  bool raised = false;
};
[[noreturn]] void fail(std::string message);

/// What a render may spend: steps (one per expression node, loop iteration, and value a built-in or
/// a walk over a nested value visits) and the size of strings and lists it builds. Exceeding
/// either throws EvalError.
struct Budget {
  std::int64_t steps_left = 0;
  std::size_t max_bytes = 0;
  void charge(std::int64_t n) {
    steps_left -= n;
    if (steps_left < 0) fail("the template exceeded its step limit (max_steps)");
  }
  void check_size(std::size_t bytes) const {
    if (bytes > max_bytes) fail("a string or list grew past the output limit (max_output_bytes)");
  }
};

/// Deepest nesting of a value that equals, compare, str, repr and tojson walk (a list in a list …,
/// or a namespace holding itself): deeper is an EvalError, not a stack overflow.
inline constexpr int kMaxValueDepth = 512;

/// The render running on this thread (ChatTemplate::render opens one around its work): the walks
/// over nested values (equals, compare, to_str, repr, to_json_text) charge its budget one step per
/// value visited — a list shared with itself 40 times over has 2^40 leaves —, and namespace()
/// registers each namespace it makes, whose attributes the scope clears when it closes (a
/// namespace can hold itself: shared_ptr cycles that would outlive the render).
class RenderScope {
 public:
  explicit RenderScope(Budget& budget);
  ~RenderScope();
  RenderScope(const RenderScope&) = delete;
  RenderScope& operator=(const RenderScope&) = delete;
  /// The scope open on this thread, or nullptr (values used outside a render: tests).
  static RenderScope* current();
  Budget& budget() { return budget_; }
  /// Keeps `ns` to be cleared when the scope closes.
  void adopt(const std::shared_ptr<Namespace>& ns) { namespaces_.push_back(ns); }

 private:
  Budget& budget_;
  std::vector<std::shared_ptr<Namespace>> namespaces_;
  RenderScope* outer_;
};

/// jinja2's getattr(obj, name): a dict's key, a namespace's attribute; else Undefined. Throws for
/// an attribute of Undefined ("'x' is undefined"), as jinja2's default Undefined does.
Value get_attr(const Value& obj, std::string_view name);
/// jinja2's getitem(obj, key): a dict's key, a list's / string's index (negative from the end);
/// else Undefined. Throws for an item of Undefined.
Value get_item(const Value& obj, const Value& key);
/// Python slicing obj[start:stop:step] of a list or string (by code points); null parts = omitted.
Value slice(const Value& obj, const Value* start, const Value* stop, const Value* step, Budget& budget);
/// The items `for x in v` visits: a list's items, a dict's keys, a string's characters, none for
/// Undefined; throws for others ("'int' object is not iterable").
List iterate(const Value& v, Budget& budget);

/// Converts JSON (the render context) to a Value: objects become dicts (in nlohmann's key order).
/// Throws EvalError for JSON nested deeper than kMaxValueDepth.
Value from_json(const nlohmann::json& j);

/// Python's type name of a value ('str', 'int', 'dict', ...), for error messages.
const char* type_name(const Value& v);
/// Python truthiness (Undefined is false).
bool truthy(const Value& v);
/// Python ==.
bool equals(const Value& a, const Value& b);
/// Python <, <=, >, >= ("<", "<=", ">", ">="); throws EvalError for unorderable types.
bool compare(const Value& a, const Value& b, std::string_view op);
/// Python str() (jinja2 prints values with it; Undefined prints as "").
std::string to_str(const Value& v);
/// Python repr().
std::string repr(const Value& v);
/// Python repr() of a float: shortest round-trip digits, "1.0", "1e-05", "1e+16", "inf", "nan".
std::string float_repr(double d);
/// HF's tojson: json.dumps(v, ensure_ascii, indent, separators, sort_keys); indent < 0: None.
/// Throws EvalError for what json.dumps cannot serialise (Undefined, namespaces, macros).
std::string to_json_text(const Value& v, int indent, std::string_view item_sep, std::string_view key_sep,
                         bool ensure_ascii, bool sort_keys);

/// The code points of `s` as byte slices (an invalid byte is a slice of its own).
std::vector<std::string_view> utf8_chars(std::string_view s);
/// Python str.isspace() for one code point slice.
bool py_isspace(std::string_view ch);
/// Python str.upper()/lower() per code point (simple case mapping).
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);

}  // namespace mamba::tok::jinja
