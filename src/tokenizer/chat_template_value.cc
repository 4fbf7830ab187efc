#include "tokenizer/chat_template_value.h"

#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tokenizer/unicode.h"

namespace mamba::tok::jinja {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(std::string key, Value v) {
  for (auto& [k, old] : items)
    if (k == key) {
      old = std::move(v);
      return;
    }
  items.emplace_back(std::move(key), std::move(v));
}

Value Value::undefined(std::string name) {
  Value v;
  if (!name.empty()) v.s = std::make_shared<const std::string>(std::move(name));
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::kNone;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.kind = Kind::kBool;
  v.b = x;
  return v;
}
Value Value::integer(std::int64_t x) {
  Value v;
  v.kind = Kind::kInt;
  v.i = x;
  return v;
}
Value Value::number(double x) {
  Value v;
  v.kind = Kind::kFloat;
  v.f = x;
  return v;
}
Value Value::string(std::string x) {
  Value v;
  v.kind = Kind::kString;
  v.s = std::make_shared<const std::string>(std::move(x));
  return v;
}
namespace {

/// 1 + the deepest of `depths`, refused past kMaxValueDepth (a template nesting a list in itself
/// in a loop: its walks and its destructors would recurse that deep).
template <class Range, class DepthOf>
std::uint16_t container_depth(const Range& items, DepthOf depth_of) {
  int d = 0;
  for (const auto& e : items) d = std::max<int>(d, depth_of(e));
  if (d + 1 > kMaxValueDepth) fail(fmt::format("a value nested more than {} levels deep", kMaxValueDepth));
  return static_cast<std::uint16_t>(d + 1);
}

}  // namespace

Value Value::make_list(List x, bool tuple) {
  Value v;
  v.kind = Kind::kList;
  v.is_tuple = tuple;
  v.depth = container_depth(x, [](const Value& e) { return e.depth; });
  v.list = std::make_shared<const List>(std::move(x));
  return v;
}
Value Value::make_dict(Dict x) {
  Value v;
  v.kind = Kind::kDict;
  v.depth = container_depth(x.items, [](const auto& kv) { return kv.second.depth; });
  v.dict = std::make_shared<const Dict>(std::move(x));
  return v;
}

void fail(std::string message) { throw EvalError{std::move(message), false}; }

namespace {

Value from_json_at(const nlohmann::json& j, int level);

}  // namespace

Value from_json(const nlohmann::json& j) { return from_json_at(j, 0); }

namespace {

Value from_json_at(const nlohmann::json& j, int level) {
  if (level >= kMaxValueDepth) fail(fmt::format("a value nested more than {} levels deep", kMaxValueDepth));
  using T = nlohmann::json::value_t;
  switch (j.type()) {
    case T::null:
    case T::discarded: return Value::none();
    case T::boolean: return Value::boolean(j.get<bool>());
    case T::number_integer: return Value::integer(j.get<std::int64_t>());
    case T::number_unsigned: {
      auto u = j.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<std::int64_t>(u));
    }
    case T::number_float: return Value::number(j.get<double>());
    case T::string: return Value::string(j.get<std::string>());
    case T::array: {
      List l;
      l.reserve(j.size());
      for (const auto& e : j) l.push_back(from_json_at(e, level + 1));
      return Value::make_list(std::move(l));
    }
    case T::object: {
      Dict d;
      d.items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) d.items.emplace_back(it.key(), from_json_at(it.value(), level + 1));
      return Value::make_dict(std::move(d));
    }
    case T::binary: return Value::none();
  }
  return Value::none();
}

}  // namespace

const char* type_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "NoneType";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kString: return "str";
    case Value::Kind::kList: return v.is_tuple ? "tuple" : "list";
    case Value::Kind::kDict: return "dict";
    case Value::Kind::kNamespace: return "Namespace";
    case Value::Kind::kCallable: return v.fn && v.fn->macro ? "Macro" : "builtin_function_or_method";
  }
  return "object";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return false;
    case Value::Kind::kBool: return v.b;
    case Value::Kind::kInt: return v.i != 0;
    case Value::Kind::kFloat: return v.f != 0;
    case Value::Kind::kString: return !v.s->empty();
    case Value::Kind::kList: return !v.list->empty();
    case Value::Kind::kDict: return !v.dict->items.empty();
    case Value::Kind::kNamespace:
    case Value::Kind::kCallable: return true;
  }
  return false;
}

namespace {

thread_local RenderScope* g_scope = nullptr;
thread_local int g_walk_depth = 0;

/// One level of a walk over a nested value: charges the render's budget a step and bounds the
/// depth (kMaxValueDepth).
class WalkGuard {
 public:
  WalkGuard() {
    if (g_scope != nullptr) g_scope->budget().charge(1);
    if (g_walk_depth >= kMaxValueDepth) fail(fmt::format("a value nested more than {} levels deep", kMaxValueDepth));
    ++g_walk_depth;
  }
  ~WalkGuard() { --g_walk_depth; }
  WalkGuard(const WalkGuard&) = delete;
  WalkGuard& operator=(const WalkGuard&) = delete;
};

}  // namespace

RenderScope::RenderScope(Budget& budget) : budget_(budget), outer_(g_scope) { g_scope = this; }

RenderScope::~RenderScope() {
  for (const auto& ns : namespaces_) ns->attrs.items.clear();  // breaks cycles through namespaces
  g_scope = outer_;
}

RenderScope* RenderScope::current() { return g_scope; }

bool equals(const Value& a, const Value& b) {
  const WalkGuard guard;
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return *a.s == *b.s;
    case Value::Kind::kList: {
      if (a.is_tuple != b.is_tuple || a.list->size() != b.list->size()) return false;
      for (std::size_t k = 0; k < a.list->size(); ++k)
        if (!equals((*a.list)[k], (*b.list)[k])) return false;
      return true;
    }
    case Value::Kind::kDict: {
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, v] : a.dict->items) {
        const Value* o = b.dict->find(k);
        if (!o || !equals(v, *o)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace: return a.ns == b.ns;
    case Value::Kind::kCallable: return a.fn == b.fn;
    default: return false;
  }
}

namespace {

/// -1, 0, 1 for a < b, ==, >; throws for unorderable pairs.
int three_way(const Value& a, const Value& b, std::string_view op) {
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : x > y ? 1 : 0;  // NaN compares as "equal" here; <,> below stay false
  }
  if (a.is_string() && b.is_string()) {
    int c = a.s->compare(*b.s);  // UTF-8 byte order is code point order
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.kind == Value::Kind::kList && b.kind == Value::Kind::kList && a.is_tuple == b.is_tuple) {
    std::size_t n = std::min(a.list->size(), b.list->size());
    for (std::size_t k = 0; k < n; ++k) {
      if (equals((*a.list)[k], (*b.list)[k])) continue;
      return three_way((*a.list)[k], (*b.list)[k], op);
    }
    return a.list->size() < b.list->size() ? -1 : a.list->size() > b.list->size() ? 1 : 0;
  }
  fail("'" + std::string(op) + "' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

}  // namespace

bool compare(const Value& a, const Value& b, std::string_view op) {
  const WalkGuard guard;
  if (a.kind == Value::Kind::kFloat || b.kind == Value::Kind::kFloat) {
    if (a.is_number() && b.is_number()) {
      double x = a.as_double(), y = b.as_double();
      if (op == "<") return x < y;
      if (op == "<=") return x <= y;
      if (op == ">") return x > y;
      return x >= y;
    }
  }
  int c = three_way(a, b, op);
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // [-]D[.DDD]e[+-]XX
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  std::size_t epos = sci.find('e');
  int exp = std::stoi(sci.substr(epos + 1));
  std::string digits = sci.substr(0, epos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  std::string out = neg ? "-" : "";
  if (exp >= -5 + 1 && exp < 16) {  // Python repr: fixed when -4 <= exp < 16
    if (exp < 0) {
      out += "0.";
      out.append(static_cast<std::size_t>(-exp - 1), '0');
      out += digits;
    } else if (static_cast<std::size_t>(exp) + 1 >= digits.size()) {
      out += digits;
      out.append(static_cast<std::size_t>(exp) + 1 - digits.size(), '0');
      out += ".0";
    } else {
      out.append(digits, 0, static_cast<std::size_t>(exp) + 1);
      out += '.';
      out.append(digits, static_cast<std::size_t>(exp) + 1, std::string::npos);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) {
    out += '.';
    out.append(digits, 1, std::string::npos);
  }
  char e[16];
  std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return out + e;
}

namespace {

std::string str_repr(const std::string& s) {
  char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<unsigned char>(q)) out += std::string("\\") + q;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += q;
  return out;
}

}  // namespace

std::string repr(const Value& v) {
  const WalkGuard guard;
  switch (v.kind) {
    case Value::Kind::kString: return str_repr(*v.s);
    case Value::Kind::kList: {
      std::string out = v.is_tuple ? "(" : "[";
      for (std::size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += ", ";
        out += repr((*v.list)[k]);
      }
      if (v.is_tuple && v.list->size() == 1) out += ",";
      return out + (v.is_tuple ? ")" : "]");
    }
    case Value::Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, x] : v.dict->items) {
        if (!first) out += ", ";
        first = false;
        out += str_repr(k) + ": " + repr(x);
      }
      return out + "}";
    }
    case Value::Kind::kUndefined: return "Undefined";
    default: return to_str(v);
  }
}

std::string to_str(const Value& v) {
  const WalkGuard guard;
  switch (v.kind) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.b ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v.i);
    case Value::Kind::kFloat: return float_repr(v.f);
    case Value::Kind::kString: return *v.s;
    case Value::Kind::kList:
    case Value::Kind::kDict: return repr(v);
    case Value::Kind::kNamespace: {
      std::string out = "<Namespace {";
      bool first = true;
      for (const auto& [k, x] : v.ns->attrs.items) {
        if (!first) out += ", ";
        first = false;
        out += str_repr(k) + ": " + repr(x);
      }
      return out + "}>";
    }
    case Value::Kind::kCallable: {
      std::string out = v.fn->macro ? "<Macro '" : "<function '";
      out += v.fn->name;
      out += "'>";
      return out;
    }
  }
  return "";
}

namespace {

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (std::size_t k = 0; k < s.size(); ++k) {
    unsigned char c = static_cast<unsigned char>(s[k]);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    char b[16];
    if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
    } else if (c >= 0x80 && ensure_ascii) {
      std::size_t len = utf8_len(c);
      if (k + len <= s.size() && utf8_valid_prefix(s.substr(k, len)) == len) {
        std::size_t i = k;
        char32_t cp = utf8_next(s, i);
        if (cp >= 0x10000) {
          cp -= 0x10000;
          std::snprintf(b, sizeof b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
        } else {
          std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(cp));
        }
        out += b;
        k += len - 1;
      } else {
        out += "\\ufffd";
      }
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

void json_dump(std::string& out, const Value& v, int indent, int level, std::string_view item_sep,
               std::string_view key_sep, bool ensure_ascii, bool sort_keys) {
  const WalkGuard guard;
  auto newline = [&](int lvl) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<std::size_t>(indent) * static_cast<std::size_t>(lvl), ' ');
  };
  switch (v.kind) {
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += v.b ? "true" : "false"; return;
    case Value::Kind::kInt: out += std::to_string(v.i); return;
    case Value::Kind::kFloat:
      if (std::isnan(v.f)) out += "NaN";
      else if (std::isinf(v.f)) out += v.f > 0 ? "Infinity" : "-Infinity";
      else out += float_repr(v.f);
      return;
    case Value::Kind::kString: json_string(out, *v.s, ensure_ascii); return;
    case Value::Kind::kList: {
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (std::size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += item_sep;
        newline(level + 1);
        json_dump(out, (*v.list)[k], indent, level + 1, item_sep, key_sep, ensure_ascii, sort_keys);
      }
      newline(level);
      out += ']';
      return;
    }
    case Value::Kind::kDict: {
      if (v.dict->items.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.dict->items) items.push_back(&kv);
      if (sort_keys)
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out += '{';
      for (std::size_t k = 0; k < items.size(); ++k) {
        if (k) out += item_sep;
        newline(level + 1);
        json_string(out, items[k]->first, ensure_ascii);
        out += key_sep;
        json_dump(out, items[k]->second, indent, level + 1, item_sep, key_sep, ensure_ascii, sort_keys);
      }
      newline(level);
      out += '}';
      return;
    }
    default: fail(std::string("Object of type ") + type_name(v) + " is not JSON serializable");
  }
}

}  // namespace

std::string to_json_text(const Value& v, int indent, std::string_view item_sep, std::string_view key_sep,
                         bool ensure_ascii, bool sort_keys) {
  std::string out;
  json_dump(out, v, indent, 0, item_sep, key_sep, ensure_ascii, sort_keys);
  return out;
}

std::vector<std::string_view> utf8_chars(std::string_view s) {
  std::vector<std::string_view> out;
  out.reserve(s.size());
  for (std::size_t k = 0; k < s.size();) {
    std::size_t len = utf8_len(static_cast<unsigned char>(s[k]));
    if (len == 1 || k + len > s.size() || utf8_valid_prefix(s.substr(k, len)) != len) len = 1;
    out.push_back(s.substr(k, len));
    k += len;
  }
  return out;
}

namespace {
char32_t decode_char(std::string_view ch) {
  if (ch.size() == 1) return static_cast<unsigned char>(ch[0]);
  std::size_t i = 0;
  return utf8_next(ch, i);
}
template <class F>
std::string map_case(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  for (auto ch : utf8_chars(s)) {
    if (ch.size() == 1 && static_cast<unsigned char>(ch[0]) >= 0x80) {
      out += ch;  // an invalid byte stays as it is
      continue;
    }
    utf8_append(out, static_cast<char32_t>(f(static_cast<utf8proc_int32_t>(decode_char(ch)))));
  }
  return out;
}
}  // namespace

bool py_isspace(std::string_view ch) {
  if (ch.size() == 1) {
    unsigned char c = static_cast<unsigned char>(ch[0]);
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
  }
  return is_whitespace(decode_char(ch));
}

std::string py_upper(std::string_view s) { return map_case(s, utf8proc_toupper); }
std::string py_lower(std::string_view s) { return map_case(s, utf8proc_tolower); }

namespace {

/// Using an Undefined: jinja2's error for it (its message, e.g. "'x' is undefined").
[[noreturn]] void undefined_error(const Value& v) { fail(v.s ? *v.s : std::string("undefined value")); }

}  // namespace

// ---- lookup --------------------------------------------------------------------------------------

Value get_attr(const Value& obj, std::string_view name) {
  switch (obj.kind) {
    case Value::Kind::kUndefined: undefined_error(obj);
    case Value::Kind::kDict:
      if (const Value* v = obj.dict->find(name)) return *v;
      return Value::undefined(fmt::format("'dict object' has no attribute '{}'", name));
    case Value::Kind::kNamespace:
      if (const Value* v = obj.ns->attrs.find(name)) return *v;
      return Value::undefined(fmt::format("'Namespace object' has no attribute '{}'", name));
    default: return Value::undefined(fmt::format("'{}' object has no attribute '{}'", type_name(obj), name));
  }
}

Value get_item(const Value& obj, const Value& key) {
  switch (obj.kind) {
    case Value::Kind::kUndefined: undefined_error(obj);
    case Value::Kind::kDict:
      if (key.is_string()) {
        if (const Value* v = obj.dict->find(key.str())) return *v;
      }
      return Value::undefined(fmt::format("'dict object' has no attribute {}", repr(key)));
    case Value::Kind::kNamespace:
      if (key.is_string()) return get_attr(obj, key.str());
      return Value::undefined();
    case Value::Kind::kList:
    case Value::Kind::kString: {
      if (!key.is_integral()) {
        return Value::undefined(fmt::format("'{}' object has no attribute {}", type_name(obj), repr(key)));
      }
      std::int64_t i = key.as_int();
      if (obj.kind == Value::Kind::kList) {
        auto n = static_cast<std::int64_t>(obj.list->size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value::undefined(fmt::format("{} object has no element {}", type_name(obj), key.as_int()));
        return (*obj.list)[static_cast<std::size_t>(i)];
      }
      auto cs = utf8_chars(*obj.s);
      auto n = static_cast<std::int64_t>(cs.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined("string index out of range");
      return Value::string(std::string(cs[static_cast<std::size_t>(i)]));
    }
    default: return Value::undefined(fmt::format("'{}' object has no attribute {}", type_name(obj), repr(key)));
  }
}

Value slice(const Value& obj, const Value* start, const Value* stop, const Value* step, Budget& budget) {
  if (obj.is_undefined()) undefined_error(obj);
  auto part = [](const Value* v, const char* what) -> std::optional<std::int64_t> {
    if (!v || v->kind == Value::Kind::kNone) return std::nullopt;
    if (!v->is_integral()) fail(fmt::format("slice {} must be an integer or None", what));
    return v->as_int();
  };
  auto b = part(start, "start"), e = part(stop, "stop"), s = part(step, "step");
  std::int64_t st = s.value_or(1);
  if (st == 0) fail("slice step cannot be zero");
  std::vector<std::string_view> chars;
  std::int64_t n;
  if (obj.kind == Value::Kind::kList) {
    n = static_cast<std::int64_t>(obj.list->size());
  } else if (obj.is_string()) {
    chars = utf8_chars(*obj.s);
    n = static_cast<std::int64_t>(chars.size());
  } else {
    fail(fmt::format("'{}' object is not subscriptable", type_name(obj)));
  }
  auto clamp = [&](std::optional<std::int64_t> x, std::int64_t dflt) {
    if (!x) return dflt;
    std::int64_t v = *x;
    if (v < 0) v = std::max<std::int64_t>(v + n, st < 0 ? -1 : 0);
    else v = std::min(v, st < 0 ? n - 1 : n);
    return v;
  };
  std::int64_t lo = clamp(b, st < 0 ? n - 1 : 0), hi = clamp(e, st < 0 ? -1 : n);
  List items;
  std::string text;
  for (std::int64_t k = lo; st > 0 ? k < hi : k > hi; k += st) {
    budget.charge(1);
    if (obj.kind == Value::Kind::kList) items.push_back((*obj.list)[static_cast<std::size_t>(k)]);
    else text += chars[static_cast<std::size_t>(k)];
  }
  if (obj.kind == Value::Kind::kList) return Value::make_list(std::move(items), obj.is_tuple);
  return Value::string(std::move(text));
}

List iterate(const Value& v, Budget& budget) {
  switch (v.kind) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kList: return *v.list;
    case Value::Kind::kDict: {
      List out;
      for (const auto& [k, x] : v.dict->items) out.push_back(Value::string(k));
      return out;
    }
    case Value::Kind::kString: {
      List out;
      for (auto ch : utf8_chars(*v.s)) out.push_back(Value::string(std::string(ch)));
      return out;
    }
    default: fail(fmt::format("'{}' object is not iterable", type_name(v)));
  }
}

}  // namespace mamba::tok::jinja
