#include "common/chat_template_flag.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace mamba::tools {

Result<ChatTemplateFlag> read_chat_template_flag(const std::string& value) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(value, ec)) {
    const auto size = std::filesystem::file_size(value, ec);
    if (ec) return make_error(ErrorCode::kIo, fmt::format("--chat-template {}: {}", value, ec.message()));
    if (size > kMaxChatTemplateBytes)
      return make_error(ErrorCode::kInvalidArgument, fmt::format("--chat-template {}: {} bytes, more than a chat template's "
                                                                 "{} bytes at most", value, size, kMaxChatTemplateBytes));
    std::ifstream in(value, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in && !in.eof()) return make_error(ErrorCode::kIo, fmt::format("--chat-template {}: cannot be read", value));
    if (text.str().empty())
      return make_error(ErrorCode::kInvalidArgument, fmt::format("--chat-template {}: the file is empty (no template)", value));
    return ChatTemplateFlag{text.str(), "--chat-template " + value};
  }
  if (value.find("{{") != std::string::npos || value.find("{%") != std::string::npos)
    return ChatTemplateFlag{value, "--chat-template"};
  if (std::filesystem::exists(value, ec))
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("--chat-template {}: not a regular file (a file of Jinja2 text, or the template text itself)", value));
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("--chat-template '{}': no such file, and not a template (no \"{{{{\" or \"{{%\" in it)", value));
}

}  // namespace mamba::tools
