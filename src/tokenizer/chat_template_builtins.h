// Built-ins of the chat-template engine: jinja2's filters and tests, the Python str/dict methods
// that jinja2's ImmutableSandboxedEnvironment lets templates call, the globals HF adds
// (raise_exception, strftime_now) and jinja2's own (range, namespace, dict), and jinja2's
// attribute / item lookup. Each follows jinja2 3.1 (jinja2/filters.py, tests.py, sandbox.py).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/chat_template_value.h"

namespace mamba::tok::jinja {

/// Arguments of a call: positional, then keyword.
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
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

/// Applies the filter `name` (jinja2's built-ins plus HF's tojson); throws EvalError for an
/// unknown filter ("No filter named 'x'") or bad arguments.
Value apply_filter(std::string_view name, const Value& v, const Args& args, Budget& budget);
/// Applies the test `name` (`v is name(args)`); throws for an unknown test.
bool apply_test(std::string_view name, const Value& v, const Args& args, Budget& budget);
/// Calls obj.name(args) for the str / dict methods the sandbox allows. Returns false when `obj`
/// has no such method (the caller reports it); throws for the mutating list / dict methods the
/// immutable sandbox forbids ("access to attribute 'append' of 'list' object is unsafe.").
bool call_method(const Value& obj, std::string_view name, const Args& args, Budget& budget, Value& result);
/// Calls a built-in global: range, namespace, dict, strftime_now, raise_exception (throws an
/// EvalError with raised = true and the message as given).
Value call_global(std::string_view name, const Args& args, Budget& budget);
/// Names of the built-in globals.
bool is_global_function(std::string_view name);

}  // namespace mamba::tok::jinja
