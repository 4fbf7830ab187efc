// libFuzzer target: chat templates (src/tokenizer/chat_template.h). The input is a template,
// optionally followed by "\n#CONTEXT#\n" and a JSON context; without one (or when it does not
// parse as an object) a fixed chat context is used. Parse, then render with small limits: any
// input must give a result or an Error, within the limits — never a crash, leak or hang.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "tokenizer/chat_template.h"

namespace {

const nlohmann::json& fixed_context() {
  static const nlohmann::json ctx = nlohmann::json::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi 😀"},
                 {"role": "assistant", "content": "Hello", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
                 {"role": "user", "content": "  2+2?\n"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "n": 3, "x": 1.5, "none": null})");
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  constexpr std::string_view kSep = "\n#CONTEXT#\n";
  std::string_view source = input;
  nlohmann::json ctx = fixed_context();
  if (auto at = input.find(kSep); at != std::string_view::npos) {
    source = input.substr(0, at);
    auto parsed = nlohmann::json::parse(input.substr(at + kSep.size()), nullptr, false);
    if (parsed.is_object()) ctx = std::move(parsed);
  }
  auto tpl = mamba::tok::ChatTemplate::parse(source, "fuzz");
  if (!tpl.ok()) return 0;
  mamba::tok::ChatTemplateLimits limits;
  limits.max_steps = 100000;
  limits.max_output_bytes = 1 << 20;
  limits.max_depth = 64;
  auto out = tpl->render(ctx, limits);
  if (out.ok() && out->size() > limits.max_output_bytes) __builtin_trap();
  return 0;
}
