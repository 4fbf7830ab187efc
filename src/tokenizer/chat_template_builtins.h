// Built-ins of the chat-template engine: jinja2's filters and tests, the Python str/dict methods
// that jinja2's ImmutableSandboxedEnvironment lets templates call, the globals HF adds
// (raise_exception, strftime_now) and jinja2's own (range, namespace, dict). Each follows jinja2
// 3.1 (jinja2/filters.py, tests.py, sandbox.py). Attribute / item lookup, slicing and iteration
// are the values' own (chat_template_value.h).
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
