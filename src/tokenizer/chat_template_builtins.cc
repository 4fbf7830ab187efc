#include "tokenizer/chat_template_builtins.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <optional>

#include "core/utf8.h"
#include "tokenizer/chat_template_parser.h"

namespace mamba::tok::jinja {

namespace {

/// Binds a call's arguments to named parameters, as Python does (too many / unknown ones throw).
class Params {
 public:
  Params(std::string_view what, const Args& args, std::initializer_list<std::string_view> names)
      : names_(names), slots_(names.size(), nullptr) {
    if (args.pos.size() > names_.size())
      fail(fmt::format("{}() takes at most {} argument(s) ({} given)", what, names_.size(), args.pos.size()));
    for (std::size_t k = 0; k < args.pos.size(); ++k) slots_[k] = &args.pos[k];
    for (const auto& [key, v] : args.kw) {
      auto it = std::find(names_.begin(), names_.end(), key);
      if (it == names_.end()) fail(fmt::format("{}() got an unexpected keyword argument '{}'", what, key));
      slots_[static_cast<std::size_t>(it - names_.begin())] = &v;
    }
  }
  const Value* get(std::size_t k) const { return slots_[k]; }
  bool has(std::size_t k) const { return slots_[k] != nullptr; }
  Value value(std::size_t k, Value dflt) const { return slots_[k] ? *slots_[k] : std::move(dflt); }
  bool flag(std::size_t k, bool dflt) const { return slots_[k] ? truthy(*slots_[k]) : dflt; }
  std::int64_t integer(std::size_t k, std::int64_t dflt) const {
    if (!slots_[k]) return dflt;
    if (!slots_[k]->is_integral()) fail(fmt::format("'{}' must be an integer, got '{}'", names_[k], type_name(*slots_[k])));
    return slots_[k]->as_int();
  }

 private:
  std::vector<std::string_view> names_;
  std::vector<const Value*> slots_;
};

std::string text_of(const Value& v) { return to_str(v); }

const std::string& need_string(const Value& v, std::string_view what) {
  if (!v.is_string()) fail(fmt::format("{} expects a string, got '{}'", what, type_name(v)));
  return v.str();
}

/// Python str.strip / lstrip / rstrip; `chars` null: whitespace.
std::string py_strip(std::string_view s, const Value* chars, bool left, bool right) {
  std::vector<std::string_view> set;
  bool whitespace = !chars || chars->kind == Value::Kind::kNone;
  if (!whitespace) set = utf8_chars(need_string(*chars, "strip"));
  auto strip_it = [&](std::string_view ch) {
    return whitespace ? py_isspace(ch) : std::find(set.begin(), set.end(), ch) != set.end();
  };
  auto cs = utf8_chars(s);
  std::size_t b = 0, e = cs.size();
  if (left)
    while (b < e && strip_it(cs[b])) ++b;
  if (right)
    while (e > b && strip_it(cs[e - 1])) --e;
  std::string out;
  for (std::size_t k = b; k < e; ++k) out += cs[k];
  return out;
}

std::string py_capitalize(std::string_view s) {
  auto cs = utf8_chars(s);
  if (cs.empty()) return "";
  std::string rest;
  for (std::size_t k = 1; k < cs.size(); ++k) rest += cs[k];
  return py_upper(cs[0]) + py_lower(rest);
}

bool is_cased(std::string_view ch) { return py_upper(ch) != ch || py_lower(ch) != ch; }

/// Python str.title().
std::string py_title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (auto ch : utf8_chars(s)) {
    out += prev_cased ? py_lower(ch) : py_upper(ch);
    prev_cased = is_cased(ch);
  }
  return out;
}

/// jinja2's title filter: words start after runs of [-\s({\[<].
std::string jinja_title(std::string_view s) {
  auto is_sep = [](std::string_view ch) {
    return py_isspace(ch) || ch == "-" || ch == "(" || ch == "{" || ch == "[" || ch == "<";
  };
  std::string out;
  bool word_start = true;
  for (auto ch : utf8_chars(s)) {
    if (is_sep(ch)) {
      out += ch;
      word_start = true;
    } else {
      out += word_start ? py_upper(ch) : py_lower(ch);
      word_start = false;
    }
  }
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& repl, std::int64_t count,
                       Budget& budget) {
  std::string out;
  if (count < 0) count = INT64_MAX;
  if (old.empty()) {
    auto cs = utf8_chars(s);
    std::int64_t n = 0;
    for (std::size_t k = 0; k <= cs.size(); ++k) {
      if (n < count) {
        out += repl;
        ++n;
      }
      if (k < cs.size()) out += cs[k];
      budget.check_size(out.size());
    }
    return out;
  }
  std::size_t pos = 0;
  std::int64_t n = 0;
  while (n < count) {
    std::size_t hit = s.find(old, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += repl;
    budget.check_size(out.size());
    pos = hit + old.size();
    ++n;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

List py_split(const std::string& s, const Value* sep, std::int64_t maxsplit) {
  List out;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (!sep || sep->kind == Value::Kind::kNone) {
    auto cs = utf8_chars(s);
    std::size_t k = 0;
    std::int64_t n = 0;
    while (true) {
      while (k < cs.size() && py_isspace(cs[k])) ++k;
      if (k >= cs.size()) break;
      std::string word;
      if (n >= maxsplit) {
        for (; k < cs.size(); ++k) word += cs[k];
        // Python keeps the rest as is, but strips its trailing whitespace
        out.push_back(Value::string(py_strip(word, nullptr, false, true)));
        break;
      }
      while (k < cs.size() && !py_isspace(cs[k])) word += cs[k++];
      out.push_back(Value::string(std::move(word)));
      ++n;
    }
    return out;
  }
  const std::string& d = need_string(*sep, "split");
  if (d.empty()) fail("empty separator");
  std::size_t pos = 0;
  std::int64_t n = 0;
  while (n < maxsplit) {
    std::size_t hit = s.find(d, pos);
    if (hit == std::string::npos) break;
    out.push_back(Value::string(s.substr(pos, hit - pos)));
    pos = hit + d.size();
    ++n;
  }
  out.push_back(Value::string(s.substr(pos)));
  return out;
}

std::int64_t py_count(const std::string& s, const std::string& sub) {
  if (sub.empty()) return static_cast<std::int64_t>(utf8_char_count(s)) + 1;
  std::int64_t n = 0;
  for (std::size_t pos = s.find(sub); pos != std::string::npos; pos = s.find(sub, pos + sub.size())) ++n;
  return n;
}

std::int64_t py_find(const std::string& s, const std::string& sub, bool reverse) {
  std::size_t hit = reverse ? s.rfind(sub) : s.find(sub);
  if (hit == std::string::npos) return -1;
  return static_cast<std::int64_t>(utf8_char_count(std::string_view(s).substr(0, hit)));
}

bool prefix_match(const std::string& s, const Value& arg, bool suffix) {
  auto one = [&](const Value& p) {
    const std::string& x = need_string(p, suffix ? "endswith" : "startswith");
    if (x.size() > s.size()) return false;
    return suffix ? s.compare(s.size() - x.size(), x.size(), x) == 0 : s.compare(0, x.size(), x) == 0;
  };
  if (arg.kind == Value::Kind::kList && arg.is_tuple) {
    for (const auto& p : *arg.list)
      if (one(p)) return true;
    return false;
  }
  return one(arg);
}

std::size_t length_of(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kString: return utf8_char_count(*v.s);
    case Value::Kind::kList: return v.list->size();
    case Value::Kind::kDict: return v.dict->items.size();
    case Value::Kind::kUndefined: return 0;
    default: fail(fmt::format("object of type '{}' has no len()", type_name(v)));
  }
}

/// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then index 0.
Value attr_path(const Value& v, const std::string& path) {
  Value cur = v;
  std::size_t start = 0;
  while (true) {
    std::size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = digits && part.size() < 18 ? get_item(cur, Value::integer(std::stoll(part))) : get_item(cur, Value::string(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

/// A sort key: lower-cased when a string and !case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(py_lower(*v.s));
  return v;
}

bool less_than(const Value& a, const Value& b) { return compare(a, b, "<"); }

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

/// Python's str.splitlines() on \n, \r\n, \r (and the rarer separators).
std::vector<std::string> splitlines(std::string_view s) {
  std::vector<std::string> out;
  std::string line;
  auto cs = utf8_chars(s);
  for (std::size_t k = 0; k < cs.size(); ++k) {
    auto ch = cs[k];
    bool brk = ch == "\n" || ch == "\r" || ch == "\v" || ch == "\f" || ch == "\x1c" || ch == "\x1d" || ch == "\x1e" ||
               ch == "\xc2\x85" || ch == "\xe2\x80\xa8" || ch == "\xe2\x80\xa9";
    if (!brk) {
      line += ch;
      continue;
    }
    if (ch == "\r" && k + 1 < cs.size() && cs[k + 1] == "\n") ++k;
    out.push_back(std::move(line));
    line.clear();
  }
  if (!line.empty()) out.push_back(std::move(line));
  return out;
}

std::string indent_filter(const std::string& in, const Value* width, bool first, bool blank) {
  std::string ind = width && width->is_string() ? width->str()
                    : std::string(static_cast<std::size_t>(std::max<std::int64_t>(0, std::min<std::int64_t>(width ? width->as_int() : 4, 1 << 16))), ' ');
  if (width && !width->is_string() && !width->is_integral()) fail("indent width must be an integer or a string");
  std::string s = in + "\n";
  auto lines = splitlines(s);
  std::string rv;
  if (blank) {
    for (std::size_t k = 0; k < lines.size(); ++k) {
      if (k) rv += "\n" + ind;
      rv += lines[k];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    if (lines.size() > 1) {
      rv += "\n";
      for (std::size_t k = 1; k < lines.size(); ++k) {
        if (k > 1) rv += "\n";
        rv += lines[k].empty() ? lines[k] : ind + lines[k];
      }
    }
  }
  if (first) rv = ind + rv;
  return rv;
}

double round_half_even_digits(double x, std::int64_t digits) {
  if (!std::isfinite(x) || digits > 300) return x;
  if (digits < -308) return 0.0 * x;
  if (digits < 0) {
    double p = std::pow(10.0, static_cast<double>(-digits));
    double y = x / p;
    double r = std::nearbyint(y);  // half to even (default rounding mode)
    return r * p;
  }
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(digits), x);  // correctly rounded, half-even on ties
  return std::strtod(buf, nullptr);
}

/// Python int(str, base 10): optional sign, digits, underscores between digits, surrounding whitespace.
std::optional<std::int64_t> parse_int(std::string_view s) {
  std::string t = py_strip(s, nullptr, true, true);
  std::size_t k = 0;
  bool neg = false;
  if (k < t.size() && (t[k] == '+' || t[k] == '-')) neg = t[k++] == '-';
  if (k >= t.size()) return std::nullopt;
  std::int64_t v = 0;
  bool prev_digit = false;
  for (; k < t.size(); ++k) {
    char c = t[k];
    if (c == '_' && prev_digit && k + 1 < t.size() && t[k + 1] != '_') {
      prev_digit = false;
      continue;
    }
    if (c < '0' || c > '9') return std::nullopt;
    if (v > (INT64_MAX - (c - '0')) / 10) return std::nullopt;
    v = v * 10 + (c - '0');
    prev_digit = true;
  }
  return neg ? -v : v;
}

std::optional<double> parse_float(std::string_view s) {
  std::string t = py_strip(s, nullptr, true, true);
  if (t.empty()) return std::nullopt;
  std::string lower = py_lower(t);
  std::string body = lower[0] == '+' || lower[0] == '-' ? lower.substr(1) : lower;
  if (body == "inf" || body == "infinity" || body == "nan") {
    double v = body == "nan" ? NAN : INFINITY;
    return lower[0] == '-' ? -v : v;
  }
  for (char c : body)
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == '+' || c == '-')) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size()) return std::nullopt;
  return v;
}

Value to_int_filter(const Value& v, const Value& dflt) {
  switch (v.kind) {
    case Value::Kind::kBool:
    case Value::Kind::kInt: return Value::integer(v.as_int());
    case Value::Kind::kFloat:
      if (!std::isfinite(v.f) || std::fabs(v.f) >= 9.2e18) return dflt;
      return Value::integer(static_cast<std::int64_t>(v.f));
    case Value::Kind::kString: {
      if (auto i = parse_int(*v.s)) return Value::integer(*i);
      if (auto f = parse_float(*v.s); f && std::isfinite(*f) && std::fabs(*f) < 9.2e18) return Value::integer(static_cast<std::int64_t>(*f));
      return dflt;
    }
    default: return dflt;
  }
}

Value to_float_filter(const Value& v, const Value& dflt) {
  switch (v.kind) {
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat: return Value::number(v.as_double());
    case Value::Kind::kString:
      if (auto f = parse_float(*v.s)) return Value::number(*f);
      return dflt;
    default: return dflt;
  }
}

Value tojson_filter(const Value& v, const Args& args) {
  Params p("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  int indent = -1;
  std::string indent_str;
  if (const Value* i = p.get(1); i && i->kind != Value::Kind::kNone) {
    if (!i->is_integral()) fail("tojson: indent must be an integer");
    indent = static_cast<int>(std::clamp<std::int64_t>(i->as_int(), 0, 1024));
  }
  std::string item_sep = indent < 0 ? ", " : ",", key_sep = ": ";
  if (const Value* s = p.get(2); s && s->kind != Value::Kind::kNone) {
    if (s->kind != Value::Kind::kList || s->list->size() != 2 || !(*s->list)[0].is_string() || !(*s->list)[1].is_string())
      fail("tojson: separators must be a pair of strings");
    item_sep = (*s->list)[0].str();
    key_sep = (*s->list)[1].str();
  }
  return Value::string(to_json_text(v, indent, item_sep, key_sep, p.flag(0, false), p.flag(3, false)));
}

/// map / select / reject / selectattr / rejectattr.
Value map_like(std::string_view name, const Value& v, const Args& args, Budget& budget) {
  List items = iterate(v, budget);
  List out;
  if (name == "map") {
    if (args.pos.empty()) {
      Params p("map", args, {"attribute", "default"});
      if (!p.has(0)) fail("map requires a filter or attribute argument");
      std::string attr = text_of(*p.get(0));
      for (auto& x : items) {
        Value r = attr_path(x, attr);
        if (r.is_undefined() && p.has(1)) r = *p.get(1);
        out.push_back(std::move(r));
      }
    } else {
      std::string filter = text_of(args.pos[0]);
      Args rest{std::vector<Value>(args.pos.begin() + 1, args.pos.end()), args.kw};
      for (auto& x : items) out.push_back(apply_filter(filter, x, rest, budget));
    }
    return Value::make_list(std::move(out));
  }
  bool attr = name == "selectattr" || name == "rejectattr";
  bool keep_if = name == "select" || name == "selectattr";
  std::size_t base = attr ? 1 : 0;
  if (attr && args.pos.empty()) fail(fmt::format("{} requires an attribute name", name));
  std::string attr_name = attr ? text_of(args.pos[0]) : "";
  std::optional<std::string> test;
  if (args.pos.size() > base) test = text_of(args.pos[base]);
  Args rest{std::vector<Value>(args.pos.begin() + static_cast<std::ptrdiff_t>(std::min(args.pos.size(), base + 1)), args.pos.end()), args.kw};
  for (auto& x : items) {
    budget.charge(1);
    Value subject = attr ? attr_path(x, attr_name) : x;
    bool ok = test ? apply_test(*test, subject, rest, budget) : truthy(subject);
    if (ok == keep_if) out.push_back(x);
  }
  return Value::make_list(std::move(out));
}

Value sort_filter(const Value& v, const Args& args, Budget& budget) {
  Params p("sort", args, {"reverse", "case_sensitive", "attribute"});
  bool reverse = p.flag(0, false), cs = p.flag(1, false);
  List items = iterate(v, budget);
  budget.charge(static_cast<std::int64_t>(items.size()) * 4);
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& x : items) {
    Value k = p.has(2) ? attr_path(x, text_of(*p.get(2))) : x;
    keyed.emplace_back(sort_key(k, cs), x);
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? less_than(b.first, a.first) : less_than(a.first, b.first);
  });
  List out;
  for (auto& [k, x] : keyed) out.push_back(std::move(x));
  return Value::make_list(std::move(out));
}

Value unique_filter(const Value& v, const Args& args, Budget& budget) {
  Params p("unique", args, {"case_sensitive", "attribute"});
  bool cs = p.flag(0, false);
  List items = iterate(v, budget);
  budget.charge(static_cast<std::int64_t>(items.size()) * static_cast<std::int64_t>(items.size() / 16 + 1));
  List out, seen;
  for (auto& x : items) {
    Value k = sort_key(p.has(1) ? attr_path(x, text_of(*p.get(1))) : x, cs);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) continue;
    seen.push_back(k);
    out.push_back(x);
  }
  return Value::make_list(std::move(out));
}

Value minmax_filter(const Value& v, const Args& args, Budget& budget, bool want_max) {
  Params p(want_max ? "max" : "min", args, {"case_sensitive", "attribute"});
  bool cs = p.flag(0, false);
  List items = iterate(v, budget);
  if (items.empty()) return Value::undefined("no items");
  std::size_t best = 0;
  auto key = [&](const Value& x) { return sort_key(p.has(1) ? attr_path(x, text_of(*p.get(1))) : x, cs); };
  Value bk = key(items[0]);
  for (std::size_t k = 1; k < items.size(); ++k) {
    Value kk = key(items[k]);
    if (want_max ? less_than(bk, kk) : less_than(kk, bk)) {
      best = k;
      bk = kk;
    }
  }
  return items[best];
}

Value add(const Value& a, const Value& b, Budget& budget) {
  if (a.is_integral() && b.is_integral()) {
    std::int64_t r;
    if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) fail("integer overflow");
    return Value::integer(r);
  }
  if (a.is_number() && b.is_number()) return Value::number(a.as_double() + b.as_double());
  fail(fmt::format("unsupported operand type(s) for +: '{}' and '{}'", type_name(a), type_name(b)));
}

std::string join_values(const List& items, const std::string& sep, const Value* attribute, Budget& budget) {
  std::string out;
  for (std::size_t k = 0; k < items.size(); ++k) {
    if (k) out += sep;
    out += text_of(attribute ? attr_path(items[k], text_of(*attribute)) : items[k]);
    budget.check_size(out.size());
  }
  return out;
}

}  // namespace

// ---- filters -------------------------------------------------------------------------------------

Value apply_filter(std::string_view name, const Value& v, const Args& args, Budget& budget) {
  budget.charge(1);
  if (name == "safe" || name == "string") {
    Params("string", args, {});
    return name == "safe" && v.is_string() ? v : Value::string(text_of(v));
  }
  if (name == "trim") {
    Params p("trim", args, {"chars"});
    return Value::string(py_strip(text_of(v), p.get(0), true, true));
  }
  if (name == "length" || name == "count") {
    Params(name, args, {});
    return Value::integer(static_cast<std::int64_t>(length_of(v)));
  }
  if (name == "upper") return Value::string(py_upper(text_of(v)));
  if (name == "lower") return Value::string(py_lower(text_of(v)));
  if (name == "capitalize") return Value::string(py_capitalize(text_of(v)));
  if (name == "title") return Value::string(jinja_title(text_of(v)));
  if (name == "default" || name == "d") {
    Params p("default", args, {"default_value", "boolean"});
    if (v.is_undefined() || (p.flag(1, false) && !truthy(v))) return p.value(0, Value::string(""));
    return v;
  }
  if (name == "first") {
    if (v.is_undefined()) return Value::undefined("no first item");
    List items = iterate(v, budget);
    return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
  }
  if (name == "last") {
    if (v.kind == Value::Kind::kDict) fail("'dict' object is not reversible");
    if (v.is_undefined()) return Value::undefined("no last item");
    List items = iterate(v, budget);
    return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
  }
  if (name == "join") {
    Params p("join", args, {"d", "attribute"});
    return Value::string(join_values(iterate(v, budget), text_of(p.value(0, Value::string(""))), p.get(1), budget));
  }
  if (name == "replace") {
    Params p("replace", args, {"old", "new", "count"});
    if (!p.has(0) || !p.has(1)) fail("replace() requires 'old' and 'new'");
    const Value* c = p.get(2);
    std::int64_t count = c && c->kind != Value::Kind::kNone ? p.integer(2, -1) : -1;
    std::string out = py_replace(text_of(v), text_of(*p.get(0)), text_of(*p.get(1)), count, budget);
    return Value::string(std::move(out));
  }
  if (name == "list") return Value::make_list(iterate(v, budget));
  if (name == "int") {
    Params p("int", args, {"default", "base"});
    if (p.has(1) && p.integer(1, 10) != 10) fail("int: only base 10 is supported");
    return to_int_filter(v, p.value(0, Value::integer(0)));
  }
  if (name == "float") {
    Params p("float", args, {"default"});
    return to_float_filter(v, p.value(0, Value::number(0.0)));
  }
  if (name == "abs") {
    if (v.is_integral()) {
      if (v.as_int() == INT64_MIN) fail("integer overflow");
      return Value::integer(std::llabs(v.as_int()));
    }
    if (v.kind == Value::Kind::kFloat) return Value::number(std::fabs(v.f));
    fail(fmt::format("bad operand type for abs(): '{}'", type_name(v)));
  }
  if (name == "round") {
    Params p("round", args, {"precision", "method"});
    std::int64_t prec = p.integer(0, 0);
    std::string method = text_of(p.value(1, Value::string("common")));
    if (!v.is_number()) fail(fmt::format("type {} doesn't define __round__ method", type_name(v)));
    if (method == "common") {
      if (v.is_integral()) return Value::integer(v.as_int());  // round(int, n) stays an int
      return Value::number(round_half_even_digits(v.f, prec));
    }
    if (method != "ceil" && method != "floor") fail("method must be common, ceil or floor");
    double scale = std::pow(10.0, static_cast<double>(prec));
    double x = v.as_double() * scale;
    return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
  }
  if (name == "tojson") return tojson_filter(v, args);
  if (name == "items") {
    if (v.is_undefined()) return Value::make_list({});
    if (v.kind != Value::Kind::kDict) fail("Can only get item pairs from a mapping.");
    List out;
    for (const auto& [k, x] : v.dict->items) out.push_back(Value::make_list({Value::string(k), x}, true));
    return Value::make_list(std::move(out));
  }
  if (name == "dictsort") {
    Params p("dictsort", args, {"case_sensitive", "by", "reverse"});
    if (v.kind != Value::Kind::kDict) fail("dictsort: expected a mapping");
    bool cs = p.flag(0, false), rev = p.flag(2, false);
    std::string by = text_of(p.value(1, Value::string("key")));
    if (by != "key" && by != "value") fail("You can only sort by either \"key\" or \"value\"");
    std::vector<std::pair<std::string, Value>> items = v.dict->items;
    budget.charge(static_cast<std::int64_t>(items.size()) * 4);
    std::stable_sort(items.begin(), items.end(), [&](const auto& a, const auto& b) {
      Value ka = sort_key(by == "key" ? Value::string(a.first) : a.second, cs);
      Value kb = sort_key(by == "key" ? Value::string(b.first) : b.second, cs);
      return rev ? less_than(kb, ka) : less_than(ka, kb);
    });
    List out;
    for (auto& [k, x] : items) out.push_back(Value::make_list({Value::string(k), x}, true));
    return Value::make_list(std::move(out));
  }
  if (name == "reverse") {
    if (v.is_string()) {
      auto cs = utf8_chars(*v.s);
      std::string out;
      for (auto it = cs.rbegin(); it != cs.rend(); ++it) out += *it;
      return Value::string(std::move(out));
    }
    List items = iterate(v, budget);
    std::reverse(items.begin(), items.end());
    return Value::make_list(std::move(items));
  }
  if (name == "sort") return sort_filter(v, args, budget);
  if (name == "unique") return unique_filter(v, args, budget);
  if (name == "max" || name == "min") return minmax_filter(v, args, budget, name == "max");
  if (name == "sum") {
    Params p("sum", args, {"attribute", "start"});
    Value total = p.value(1, Value::integer(0));
    for (auto& x : iterate(v, budget)) total = add(total, p.has(0) ? attr_path(x, text_of(*p.get(0))) : x, budget);
    return total;
  }
  if (name == "map" || name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr")
    return map_like(name, v, args, budget);
  if (name == "escape" || name == "e") return Value::string(html_escape(text_of(v)));
  if (name == "indent") {
    Params p("indent", args, {"width", "first", "blank"});
    std::string out = indent_filter(text_of(v), p.get(0), p.flag(1, false), p.flag(2, false));
    budget.check_size(out.size());
    return Value::string(std::move(out));
  }
  if (name == "wordcount") {
    std::int64_t n = 0;
    bool in_word = false;
    const std::string text = text_of(v);  // outlives the views utf8_chars returns
    for (auto ch : utf8_chars(text)) {
      unsigned char c = static_cast<unsigned char>(ch[0]);
      bool w = c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
      if (w && !in_word) ++n;
      in_word = w;
    }
    return Value::integer(n);
  }
  fail(fmt::format("No filter named '{}'.", name));
}

// ---- tests ---------------------------------------------------------------------------------------

bool apply_test(std::string_view name, const Value& v, const Args& args, Budget& budget) {
  budget.charge(1);
  auto arg = [&](std::string_view what) -> const Value& {
    if (args.pos.empty()) fail(fmt::format("the '{}' test needs an argument", what));
    return args.pos[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.kind == Value::Kind::kNone;
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind == Value::Kind::kInt;
  if (name == "float") return v.kind == Value::Kind::kFloat;
  if (name == "boolean") return v.kind == Value::Kind::kBool;
  if (name == "true") return v.kind == Value::Kind::kBool && v.b;
  if (name == "false") return v.kind == Value::Kind::kBool && !v.b;
  if (name == "mapping") return v.kind == Value::Kind::kDict;
  if (name == "iterable")
    return v.kind == Value::Kind::kList || v.kind == Value::Kind::kDict || v.is_string() || v.is_undefined();
  if (name == "sequence")
    return v.kind == Value::Kind::kList || v.kind == Value::Kind::kDict || v.is_string() || v.is_undefined();
  if (name == "callable") return v.kind == Value::Kind::kCallable;
  if (name == "lower") return v.is_string() && py_lower(*v.s) == *v.s;
  if (name == "upper") return v.is_string() && py_upper(*v.s) == *v.s;
  if (name == "even" || name == "odd" || name == "divisibleby") {
    std::int64_t d = 2;
    if (name == "divisibleby") {
      const Value& a = arg(name);
      if (!a.is_integral()) fail("divisibleby expects an integer");
      d = a.as_int();
      if (d == 0) fail("integer division or modulo by zero");
    }
    if (!v.is_number()) fail(fmt::format("unsupported operand type(s) for %: '{}' and 'int'", type_name(v)));
    if (v.kind == Value::Kind::kFloat) {
      double m = std::fmod(v.f, static_cast<double>(d));
      return name == "odd" ? m != 0 : m == 0;
    }
    std::int64_t m = d == -1 ? 0 : v.as_int() % d;
    return name == "odd" ? m != 0 : m == 0;
  }
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") return equals(v, arg(name));
  if (name == "ne" || name == "!=") return !equals(v, arg(name));
  if (name == "lt" || name == "<" || name == "lessthan") return compare(v, arg(name), "<");
  if (name == "le" || name == "<=") return compare(v, arg(name), "<=");
  if (name == "gt" || name == ">" || name == "greaterthan") return compare(v, arg(name), ">");
  if (name == "ge" || name == ">=") return compare(v, arg(name), ">=");
  if (name == "in") {
    const Value& seq = arg(name);
    if (seq.is_string()) return v.is_string() && seq.s->find(*v.s) != std::string::npos;
    if (seq.kind == Value::Kind::kDict) return v.is_string() && seq.dict->find(v.str()) != nullptr;
    for (auto& x : iterate(seq, budget))
      if (equals(x, v)) return true;
    return false;
  }
  fail(fmt::format("No test named '{}'.", name));
}

// ---- methods -------------------------------------------------------------------------------------

bool call_method(const Value& obj, std::string_view name, const Args& args, Budget& budget, Value& result) {
  budget.charge(1);
  if (obj.is_string()) {
    const std::string& s = obj.str();
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      Params p(name, args, {"chars"});
      result = Value::string(py_strip(s, p.get(0), name != "rstrip", name != "lstrip"));
    } else if (name == "startswith" || name == "endswith") {
      Params p(name, args, {"prefix"});
      if (!p.has(0)) fail(fmt::format("{}() takes at least 1 argument (0 given)", name));
      result = Value::boolean(prefix_match(s, *p.get(0), name == "endswith"));
    } else if (name == "split") {
      Params p(name, args, {"sep", "maxsplit"});
      result = Value::make_list(py_split(s, p.get(0), p.integer(1, -1)));
    } else if (name == "upper") {
      result = Value::string(py_upper(s));
    } else if (name == "lower") {
      result = Value::string(py_lower(s));
    } else if (name == "title") {
      result = Value::string(py_title(s));
    } else if (name == "capitalize") {
      result = Value::string(py_capitalize(s));
    } else if (name == "replace") {
      Params p(name, args, {"old", "new", "count"});
      if (!p.has(0) || !p.has(1)) fail("replace() takes at least 2 arguments");
      result = Value::string(py_replace(s, need_string(*p.get(0), "replace"), need_string(*p.get(1), "replace"),
                                        p.integer(2, -1), budget));
    } else if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
      Params p(name, args, {"sub"});
      if (!p.has(0)) fail(fmt::format("{}() takes at least 1 argument (0 given)", name));
      std::int64_t at = py_find(s, need_string(*p.get(0), name), name[0] == 'r');
      if (at < 0 && (name == "index" || name == "rindex")) fail("substring not found");
      result = Value::integer(at);
    } else if (name == "count") {
      Params p(name, args, {"sub"});
      if (!p.has(0)) fail("count() takes at least 1 argument (0 given)");
      result = Value::integer(py_count(s, need_string(*p.get(0), "count")));
    } else if (name == "join") {
      Params p(name, args, {"iterable"});
      if (!p.has(0)) fail("join() takes exactly one argument (0 given)");
      List items = iterate(*p.get(0), budget);
      for (auto& x : items)
        if (!x.is_string()) fail(fmt::format("sequence item: expected str instance, {} found", type_name(x)));
      result = Value::string(join_values(items, s, nullptr, budget));
    } else if (name == "splitlines") {
      List out;
      for (auto& l : splitlines(s)) out.push_back(Value::string(l));
      result = Value::make_list(std::move(out));
    } else if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum") {
      auto cs = utf8_chars(s);
      bool ok = !cs.empty();
      for (auto ch : cs) {
        unsigned char c = static_cast<unsigned char>(ch[0]);
        bool digit = c >= '0' && c <= '9', alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
        if (name == "isdigit") ok = ok && digit;
        else if (name == "isspace") ok = ok && py_isspace(ch);
        else if (name == "isalpha") ok = ok && alpha;
        else ok = ok && (alpha || digit);
      }
      result = Value::boolean(ok);
    } else if (name == "islower" || name == "isupper") {
      bool any_cased = false, ok = true;
      for (auto ch : utf8_chars(s)) {
        if (!is_cased(ch)) continue;
        any_cased = true;
        ok = ok && (name == "islower" ? py_lower(ch) == ch : py_upper(ch) == ch);
      }
      result = Value::boolean(any_cased && ok);
    } else if (name == "format" || name == "format_map") {
      fail("str.format is not supported by this engine");
    } else {
      return false;
    }
    return true;
  }
  if (obj.kind == Value::Kind::kDict) {
    if (name == "items" || name == "keys" || name == "values") {
      Params(name, args, {});
      List out;
      for (const auto& [k, x] : obj.dict->items) {
        if (name == "items") out.push_back(Value::make_list({Value::string(k), x}, true));
        else out.push_back(name == "keys" ? Value::string(k) : x);
      }
      result = Value::make_list(std::move(out));
      return true;
    }
    if (name == "get") {
      Params p(name, args, {"key", "default"});
      if (!p.has(0)) fail("get expected at least 1 argument, got 0");
      const Value* v = p.get(0)->is_string() ? obj.dict->find(p.get(0)->str()) : nullptr;
      result = v ? *v : p.value(1, Value::none());
      return true;
    }
    if (name == "copy") {
      result = obj;
      return true;
    }
    static constexpr std::array<std::string_view, 6> kMutating = {"update", "pop", "popitem", "setdefault", "clear", "__setitem__"};
    if (std::find(kMutating.begin(), kMutating.end(), name) != kMutating.end())
      fail(fmt::format("access to attribute '{}' of 'dict' object is unsafe.", name));
    return false;
  }
  if (obj.kind == Value::Kind::kList) {
    static constexpr std::array<std::string_view, 8> kMutating = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"};
    if (std::find(kMutating.begin(), kMutating.end(), name) != kMutating.end())
      fail(fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, type_name(obj)));
    if (name == "count" || name == "index") {
      Params p(name, args, {"value"});
      if (!p.has(0)) fail(fmt::format("{}() takes exactly one argument (0 given)", name));
      std::int64_t n = 0, first = -1;
      for (std::size_t k = 0; k < obj.list->size(); ++k)
        if (equals((*obj.list)[k], *p.get(0))) {
          if (first < 0) first = static_cast<std::int64_t>(k);
          ++n;
        }
      if (name == "index" && first < 0) fail(fmt::format("{} is not in list", repr(*p.get(0))));
      result = Value::integer(name == "count" ? n : first);
      return true;
    }
  }
  return false;
}

// ---- globals -------------------------------------------------------------------------------------

bool is_global_function(std::string_view name) {
  return name == "range" || name == "namespace" || name == "dict" || name == "raise_exception" || name == "strftime_now";
}

Value call_global(std::string_view name, const Args& args, Budget& budget) {
  if (name == "raise_exception") {
    std::string msg = args.pos.empty() ? "" : text_of(args.pos[0]);
    throw EvalError{std::move(msg), true};
  }
  if (name == "strftime_now") {
    if (args.pos.size() != 1 || !args.pos[0].is_string()) fail("strftime_now() takes one string argument");
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    const std::string& fmt_str = args.pos[0].str();
    if (fmt_str.empty()) return Value::string("");
    // strftime returns 0 both for a buffer too small and for an empty result: grow it a few times.
    std::string buf;
    std::size_t n = 0;
    for (std::size_t size = fmt_str.size() * 8 + 64; size <= budget.max_bytes && size <= (std::size_t{1} << 26); size *= 4) {
      buf.assign(size, '\0');
      n = std::strftime(buf.data(), buf.size(), fmt_str.c_str(), &tm);
      if (n != 0) break;
    }
    buf.resize(n);
    return Value::string(std::move(buf));
  }
  if (name == "range") {
    if (!args.kw.empty()) fail("range() takes no keyword arguments");
    if (args.pos.empty() || args.pos.size() > 3) fail(fmt::format("range expected at most 3 arguments, got {}", args.pos.size()));
    for (auto& a : args.pos)
      if (!a.is_integral()) fail(fmt::format("'{}' object cannot be interpreted as an integer", type_name(a)));
    std::int64_t start = 0, stop, step = 1;
    if (args.pos.size() == 1) {
      stop = args.pos[0].as_int();
    } else {
      start = args.pos[0].as_int();
      stop = args.pos[1].as_int();
      if (args.pos.size() == 3) step = args.pos[2].as_int();
    }
    if (step == 0) fail("range() arg 3 must not be zero");
    // Python's len(range): ceil((stop - start) / step) when positive, computed without overflow.
    long double span = static_cast<long double>(stop) - static_cast<long double>(start);
    long double len_ld = std::ceil(span / static_cast<long double>(step));
    std::int64_t len = len_ld > 0 ? static_cast<std::int64_t>(std::min<long double>(len_ld, 1e18L)) : 0;
    constexpr std::int64_t kMaxRange = 100000;  // jinja2's sandbox MAX_RANGE
    if (len > kMaxRange) fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    budget.charge(len);
    List out;
    out.reserve(static_cast<std::size_t>(len));
    for (std::int64_t k = 0; k < len; ++k) out.push_back(Value::integer(start + k * step));
    return Value::make_list(std::move(out));
  }
  if (name == "namespace" || name == "dict") {
    Dict d;
    for (auto& a : args.pos) {
      if (a.kind != Value::Kind::kDict) fail(fmt::format("{}() positional arguments must be mappings", name));
      for (auto& [k, x] : a.dict->items) d.set(k, x);
    }
    for (auto& [k, x] : args.kw) d.set(k, x);
    if (name == "dict") return Value::make_dict(std::move(d));
    Value v;
    v.kind = Value::Kind::kNamespace;
    v.ns = std::make_shared<Namespace>(Namespace{std::move(d)});
    if (RenderScope* scope = RenderScope::current()) scope->adopt(v.ns);  // its attributes cleared after the render
    return v;
  }
  fail(fmt::format("'{}' is not callable", name));
}

}  // namespace mamba::tok::jinja
