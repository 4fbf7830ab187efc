// Chat templates: the Jinja2 subset that Hugging Face checkpoints' `chat_template`
// (tokenizer_config.json) is written in, rendered as HF transformers renders it:
// jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the
// loopcontrols extension ({% break %}, {% continue %}), the globals raise_exception(msg) and
// strftime_now(fmt), and HF's tojson filter (json.dumps(x, ensure_ascii=False, indent=...)).
//
// What is implemented (and what is not) is listed in docs or the engine's sources:
// chat_template_parser.h (syntax), chat_template_builtins.h (filters, tests, methods, globals).
// Dicts from the context iterate in nlohmann::json's order (sorted keys), as that is all a
// nlohmann::json keeps; dicts the template builds keep their insertion order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "mamba/status.h"

namespace mamba::tok {

/// Bounds on one render (a template comes from a checkpoint or a flag, the context from HTTP clients).
struct ChatTemplateLimits {
  std::size_t max_output_bytes = std::size_t{64} << 20;  ///< rendered text
  std::int64_t max_steps = 10'000'000;                   ///< expression nodes evaluated + loop iterations
  int max_depth = 256;                                   ///< nested calls / macro recursion at render
};

/// A parsed chat template; immutable, so one instance may render on many threads at once.
class ChatTemplate {
 public:
  /// Parses Jinja2 source. Errors: kFormat "NAME: line L, column C: <what>" for a syntax error;
  /// kUnsupported "NAME: line L: <construct> is not supported" for valid Jinja this engine does not implement.
  static Result<ChatTemplate> parse(std::string_view source, std::string_view name = "chat_template");
  /// Renders with `context` (a JSON object; its keys are the template's variables: messages,
  /// add_generation_prompt, bos_token, eos_token, tools, ...). Thread-safe (const; many HTTP threads).
  /// Errors: kInvalidArgument whose message is exactly the template's raise_exception(msg) text;
  /// kInvalidArgument "NAME: line L: <what>" for a run-time error (type error, unknown filter/method,
  /// limits exceeded).
  Result<std::string> render(const nlohmann::json& context, const ChatTemplateLimits& limits = {}) const;
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ~ChatTemplate();

 private:
  struct Impl;
  explicit ChatTemplate(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;  ///< immutable after parse
};

}  // namespace mamba::tok
