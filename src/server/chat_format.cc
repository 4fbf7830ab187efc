// Chat prompts: a chat template (tok::ChatTemplate, HF apply_chat_template's context) or the fixed
// format. See chat_format.h.
#include "server/chat_format.h"

#include <fmt/format.h>

#include "tokenizer/chat_template.h"

namespace mamba::server {

ChatFormat::ChatFormat() = default;
ChatFormat::~ChatFormat() = default;
ChatFormat::ChatFormat(ChatFormat&&) noexcept = default;
ChatFormat& ChatFormat::operator=(ChatFormat&&) noexcept = default;

Result<ChatFormat> ChatFormat::from_template(const std::string& source, const std::string& origin, std::string bos_token,
                                             std::string eos_token) {
  auto parsed = tok::ChatTemplate::parse(source, origin + ": chat_template");
  if (!parsed.ok()) return parsed.error();
  ChatFormat f;
  f.tmpl_ = std::make_unique<tok::ChatTemplate>(std::move(parsed).value());
  f.origin_ = origin;
  f.bos_token_ = std::move(bos_token);
  f.eos_token_ = std::move(eos_token);
  std::string probe;
  if (auto e = f.render({{"user", "Hello"}}, true, nullptr, probe))
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("{}: the chat template does not render one user message: {}", origin, e->message));
  return f;
}

std::optional<ApiError> ChatFormat::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                           const nlohmann::json* kwargs, std::string& out) const {
  if (!tmpl_) {
    out = format_chat_prompt(messages, add_generation_prompt);
    return std::nullopt;
  }
  nlohmann::json ctx = nlohmann::json::object();
  if (kwargs != nullptr && !kwargs->is_null()) {
    if (!kwargs->is_object())
      return ApiError::validation(fmt::format("`chat_template_kwargs` must be an object, got {}", kwargs->type_name()));
    if (kwargs->contains("messages"))
      return ApiError::validation("`chat_template_kwargs` cannot set `messages` (give them as the request's `messages`)");
    ctx = *kwargs;
  }
  nlohmann::json msgs = nlohmann::json::array();
  for (const ChatMessage& m : messages)
    msgs.push_back({{"role", m.role == "developer" ? "system" : m.role}, {"content", m.content}});
  ctx["messages"] = std::move(msgs);
  // The request's kwargs may set these (vLLM merges them the same way); the server's otherwise.
  if (!ctx.contains("add_generation_prompt")) ctx["add_generation_prompt"] = add_generation_prompt;
  if (!ctx.contains("bos_token")) ctx["bos_token"] = bos_token_;
  if (!ctx.contains("eos_token")) ctx["eos_token"] = eos_token_;
  auto r = tmpl_->render(ctx);
  if (!r.ok()) return ApiError::validation(fmt::format("chat template: {}", r.error().message));
  out = std::move(r).value();
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
