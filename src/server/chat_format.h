// How /v1/chat/completions (and /tokenize with `messages`) turn chat messages into the prompt text:
// the model's chat template — the HF `chat_template` Jinja source (tokenizer_config.json, or
// mamba-server's --chat-template), rendered as transformers' apply_chat_template does — or, for a
// model without one, the fixed format (docs/SERVER.md §Chat prompt format).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mamba/status.h"
#include "server/api_error.h"

namespace mamba::tok {
class ChatTemplate;
}

namespace mamba::server {

struct ChatMessage {
  std::string role;     ///< system | user | assistant | tool | developer
  std::string content;  ///< text (array-of-parts content is joined)
};

/// A server's chat prompt format; immutable once made, shared by the HTTP threads.
class ChatFormat {
 public:
  /// The fixed format: "<Role>: <content>\n\n" per message, then "Assistant:", and the stop string
  /// "\nUser:" (format_chat_prompt).
  ChatFormat();
  ~ChatFormat();
  ChatFormat(ChatFormat&&) noexcept;
  ChatFormat& operator=(ChatFormat&&) noexcept;

  /// A chat template's format. `source`: Jinja2 text (HF chat_template); `origin`: where it came
  /// from, for messages ("<dir>/tokenizer_config.json", "--chat-template FILE"); special_tokens:
  /// the variables bos_token, eos_token, pad_token, … (tokenizer_config.json's, name → text; one
  /// it lacks stays undefined, as in transformers). The template is parsed, then rendered once with
  /// one user message "Hello" and the generation prompt, so that a construct it cannot render (an
  /// unknown filter, say) is found at start, not on every request; the template's own
  /// raise_exception there (one that requires a system message) is no fault of it. Errors:
  /// kFormat / kUnsupported / kInvalidArgument "<origin>: chat template: line L…" (the engine's
  /// tok::ChatTemplate::parse / render).
  static Result<ChatFormat> from_template(const std::string& source, const std::string& origin,
                                          std::map<std::string, std::string> special_tokens);

  /// Whether a chat template renders the prompts (else the fixed format).
  bool has_template() const { return tmpl_ != nullptr; }
  /// Where the template came from (from_template's `origin`); "" for the fixed format.
  const std::string& origin() const { return origin_; }

  /// How a request asks for its prompt (vLLM's chat fields).
  struct Request {
    bool add_generation_prompt = true;  ///< end with the assistant's turn opened
    /// End the prompt inside the final message (an assistant's), which the model then continues:
    /// the text rendered without the generation prompt, cut after the final message's content
    /// (as transformers' continue_final_message).
    bool continue_final_message = false;
    const nlohmann::json* kwargs = nullptr;  ///< `chat_template_kwargs`, or nullptr
  };

  /// The prompt text of `messages`. With a template: rendered with the context {messages: [{role,
  /// content}] ("developer" given as "system", the role templates know), add_generation_prompt,
  /// tools: none, documents: none, the special tokens} plus the request's kwargs (an object whose
  /// keys are added to the context, replacing those; `messages` among them is refused), as
  /// transformers' apply_chat_template and vLLM do; the fixed format otherwise. Errors: a 400
  /// validation error — the template's own raise_exception message ("chat template: <message>"),
  /// a run-time error of the template on this request ("chat template: line L: …"), a bad
  /// `chat_template_kwargs`, or continue_final_message with generation prompt, or whose final
  /// message is not an assistant's or not found in the rendered text.
  std::optional<ApiError> render(const std::vector<ChatMessage>& messages, const Request& request, std::string& out) const;

  /// Stop strings the format adds to a chat request: "\nUser:" for the fixed format (the model
  /// would otherwise go on writing the user's next turn); none with a template (the model's EOS,
  /// e.g. ChatML's <|im_end|>, ends the answer).
  std::vector<std::string> stop_strings() const;

  /// The default of a chat request's `add_special_tokens`: false with a template (vLLM's default
  /// for chat: templates write their own BOS), true for the fixed format (which writes none).
  bool default_add_special_tokens() const { return !has_template(); }

 private:
  std::unique_ptr<tok::ChatTemplate> tmpl_;
  std::string origin_;
  std::map<std::string, std::string> special_tokens_;
};

/// The fixed format's prompt: each message as "<Role>: <content>\n\n" with Role System (also for
/// developer), User, Assistant or Tool, then "Assistant:" when generation_prompt.
std::string format_chat_prompt(const std::vector<ChatMessage>& messages, bool generation_prompt = true);

}  // namespace mamba::server
