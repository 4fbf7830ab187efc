#include "common/env_options.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string_view>

namespace mamba::tools {

std::string env_name_for_flag(const std::string& long_flag, const std::string& prefix) {
  std::string name = prefix;
  std::string_view flag = long_flag;
  while (!flag.empty() && flag.front() == '-') flag.remove_prefix(1);
  for (char c : flag) name += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

void read_options_from_env(CLI::App& app, const std::string& prefix, const std::vector<std::string>& except) {
  for (CLI::Option* opt : app.get_options()) {
    const std::vector<std::string>& lnames = opt->get_lnames();
    if (lnames.empty() || lnames[0] == "help" || lnames[0] == "version") continue;
    if (std::find(except.begin(), except.end(), "--" + lnames[0]) != except.end()) continue;
    opt->envname(env_name_for_flag(lnames[0], prefix));
  }
}

std::vector<std::string> options_from_env(const CLI::App& app, int argc, const char* const* argv) {
  std::vector<std::string> out;
  for (const CLI::Option* opt : app.get_options()) {
    const std::string& env = opt->get_envname();
    if (env.empty()) continue;
    const char* value = std::getenv(env.c_str());
    if (value == nullptr || *value == '\0') continue;  // CLI11 takes an empty variable as unset
    bool on_command_line = false;
    for (int i = 1; i < argc && !on_command_line; ++i) {
      const std::string_view arg = argv[i];
      if (arg == "--") break;  // what follows is positional
      for (const std::string& l : opt->get_lnames())
        if (arg == "--" + l || arg.starts_with("--" + l + "=")) on_command_line = true;
      for (const std::string& s : opt->get_snames())
        if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-' && arg.substr(1, s.size()) == s) on_command_line = true;
    }
    if (!on_command_line) out.push_back("--" + opt->get_lnames().front() + " (" + env + ")");
  }
  return out;
}

std::string env_list(const std::vector<std::string>& from_env) {
  std::string list;
  for (std::size_t i = 0; i < from_env.size(); ++i) list += (i ? ", " : "") + from_env[i];
  return list;
}

std::string env_note(const std::vector<std::string>& from_env) {
  return from_env.empty() ? "" : "note: from the environment: " + env_list(from_env) + "\n";
}

}  // namespace mamba::tools
