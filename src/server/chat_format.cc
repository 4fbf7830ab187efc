// Chat prompts: a chat template (tok::ChatTemplate, HF apply_chat_template's context) or the fixed
// format. See chat_format.h.
#include "server/chat_format.h"

#include <fmt/format.h>

#include "tokenizer/chat_template.h"
#include "tokenizer/unicode.h"

namespace mamba::server {

ChatFormat::ChatFormat() = default;
ChatFormat::~ChatFormat() = default;
ChatFormat::ChatFormat(ChatFormat&&) noexcept = default;
ChatFormat& ChatFormat::operator=(ChatFormat&&) noexcept = default;

namespace {

/// The name the engine gives its errors: "chat template: line 3: …" (the client's message on a
/// request; prefixed with the origin at start).
constexpr const char* kEngineName = "chat template";

/// Python's str.strip() of ASCII whitespace (transformers strips the final message's content).
std::string_view strip(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

/// Whether a render error is the engine's own ("chat template: line L: …": a type error, an unknown
/// filter, a limit) or invalid UTF-8 in what it rendered, not a message of the template's
/// raise_exception.
bool is_engine_error(const std::string& message) {
  return message.rfind(fmt::format("{}: line ", kEngineName), 0) == 0 ||
         message.rfind(fmt::format("{}: the rendered prompt is not valid UTF-8", kEngineName), 0) == 0;
}

}  // namespace

Result<ChatFormat> ChatFormat::from_template(const std::string& source, const std::string& origin,
                                             std::map<std::string, std::string> special_tokens) {
  auto parsed = tok::ChatTemplate::parse(source, kEngineName);
  if (!parsed.ok()) return make_error(parsed.error().code, fmt::format("{}: {}", origin, parsed.error().message));
  ChatFormat f;
  f.tmpl_ = std::make_unique<tok::ChatTemplate>(std::move(parsed).value());
  f.origin_ = origin;
  f.special_tokens_ = std::move(special_tokens);
  std::string probe;
  // A run-time error of the engine ("chat template: line …") fails; the template's own
  // raise_exception refusing a lone user message does not.
  if (auto e = f.render({{"user", "Hello"}}, Request{}, probe); e && is_engine_error(e->message))
    return make_error(ErrorCode::kUnsupported, fmt::format("{}: {} (rendering one user message)", origin, e->message));
  return f;
}

std::optional<ApiError> ChatFormat::render(const std::vector<ChatMessage>& messages, const Request& request, std::string& out) const {
  if (request.continue_final_message) {
    if (request.add_generation_prompt)
      return ApiError::validation("`continue_final_message` and `add_generation_prompt` cannot both be true (set "
                                  "`add_generation_prompt` to false to continue the final message)");
    if (messages.empty() || messages.back().role != "assistant")
      return ApiError::validation("`continue_final_message` needs the final message to be an assistant's");
  }
  if (!tmpl_) {
    out = format_chat_prompt(messages, request.add_generation_prompt);
  } else {
    nlohmann::json ctx = nlohmann::json::object();
    if (request.kwargs != nullptr && !request.kwargs->is_null()) {
      if (!request.kwargs->is_object())
        return ApiError::validation(fmt::format("`chat_template_kwargs` must be an object, got {}", request.kwargs->type_name()));
      if (request.kwargs->contains("messages"))
        return ApiError::validation("`chat_template_kwargs` cannot set `messages` (give them as the request's `messages`)");
      ctx = *request.kwargs;
    }
    nlohmann::json msgs = nlohmann::json::array();
    for (const ChatMessage& m : messages)
      msgs.push_back({{"role", m.role == "developer" ? "system" : m.role}, {"content", m.content}});
    ctx["messages"] = std::move(msgs);
    // apply_chat_template's variables; the request's kwargs may set them (vLLM merges them the same way).
    const auto set_default = [&ctx](const char* key, nlohmann::json v) {
      if (!ctx.contains(key)) ctx[key] = std::move(v);
    };
    set_default("add_generation_prompt", request.add_generation_prompt);
    set_default("tools", nullptr);
    set_default("documents", nullptr);
    for (const auto& [name, text] : special_tokens_) set_default(name.c_str(), text);
    auto r = tmpl_->render(ctx);
    // The engine's errors already say "chat template: line L: …"; the template's own get that prefix.
    if (!r.ok()) {
      const std::string& m = r.error().message;
      return ApiError::validation(is_engine_error(m) ? m : fmt::format("{}: {}", kEngineName, m));
    }
    out = std::move(r).value();
    // The template's own text can hold invalid UTF-8 (a file's bytes), which the tokenizer refuses:
    // said as the template's fault, not the request's.
    if (const std::size_t bad = tok::utf8_valid_prefix(out); bad != out.size())
      return ApiError::validation(fmt::format("{}: the rendered prompt is not valid UTF-8 (byte 0x{:02X} at offset {})", kEngineName,
                                              static_cast<unsigned char>(out[bad]), bad));
  }
  if (request.continue_final_message) {
    // transformers: the rendered text up to the end of the final message's (stripped) content.
    const std::string_view content = strip(messages.back().content);
    const std::size_t at = content.empty() ? std::string::npos : out.rfind(content);
    if (at == std::string::npos)
      return ApiError::validation("`continue_final_message`: the final message's content is not in the rendered prompt (an empty "
                                  "message, or one the chat template leaves out)");
    out.resize(at + content.size());
  }
  return std::nullopt;
}

std::vector<std::string> ChatFormat::stop_strings() const {
  if (tmpl_) return {};
  return {"\nUser:"};
}

std::string format_chat_prompt(const std::vector<ChatMessage>& messages, bool generation_prompt) {
  std::string p;
  for (const auto& m : messages) {
    std::string role = m.role == "developer" ? "System" : m.role;
    if (!role.empty() && role[0] >= 'a' && role[0] <= 'z') role[0] = static_cast<char>(role[0] - 'a' + 'A');
    p += role;
    p += ": ";
    p += m.content;
    p += "\n\n";
  }
  if (generation_prompt) p += "Assistant:";
  return p;
}

}  // namespace mamba::server
