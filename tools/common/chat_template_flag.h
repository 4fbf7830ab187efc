// mamba-server's --chat-template value: a file of Jinja2 text, or the template itself (vLLM's
// --chat-template takes both the same way).
#pragma once

#include <cstddef>
#include <string>

#include "mamba/status.h"

namespace mamba::tools {

/// A chat template given on the command line.
struct ChatTemplateFlag {
  std::string source;  ///< the Jinja2 text
  std::string origin;  ///< "--chat-template FILE", or "--chat-template" for inline text: named in errors
};

/// Largest template file read (bytes): real chat templates are a few KB.
inline constexpr std::size_t kMaxChatTemplateBytes = std::size_t{1} << 20;

/// `value` names a regular file → its contents (at most kMaxChatTemplateBytes); else `value` with
/// "{{" or "{%" in it → the template itself. Errors: kInvalidArgument naming the value when it is
/// neither (a misspelt path), or the file is larger; kIo when the file cannot be read.
Result<ChatTemplateFlag> read_chat_template_flag(const std::string& value);

}  // namespace mamba::tools
