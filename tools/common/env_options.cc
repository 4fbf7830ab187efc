#include "common/env_options.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string_view>

#include <unistd.h>  // environ

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

namespace {
/// Levenshtein distance of a and b (both short: environment variable names).
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}
}  // namespace

std::vector<std::string> env_near_misses(const CLI::App& app, const std::string& prefix, const std::vector<std::string>& also_read) {
  std::vector<std::string> known = also_read;
  for (const CLI::Option* opt : app.get_options())
    if (!opt->get_envname().empty()) known.push_back(opt->get_envname());
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry = *e;
    const std::string_view name = entry.substr(0, entry.find('='));
    if (!name.starts_with(prefix) || std::find(known.begin(), known.end(), name) != known.end()) continue;
    for (const std::string& k : known)
      if (edit_distance(name, k) <= 2) {
        out.push_back(std::string(name) + " (did you mean " + k + "?)");
        break;
      }
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
