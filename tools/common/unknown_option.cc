#include "common/unknown_option.h"

#include <fmt/format.h>

namespace mamba::tools {
namespace {
bool takes_value(const CLI::Option* o) { return o->get_items_expected_max() > 0; }  // flags: 0
}  // namespace

std::string unknown_option(const CLI::App& cmd, int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") return {};
    if (a.size() < 2 || a[0] != '-' || (a[1] >= '0' && a[1] <= '9') || a[1] == '.') continue;
    if (a[1] == '-') {  // --name or --name=value
      const CLI::Option* o = cmd.get_option_no_throw(a.substr(0, a.find('=')));
      if (o == nullptr) return a;
      if (takes_value(o) && a.find('=') == std::string::npos) ++i;
      continue;
    }
    const CLI::Option* o = cmd.get_option_no_throw(a.substr(0, 2));
    if (o == nullptr) return a;
    if (a.size() == 2) {
      if (takes_value(o)) ++i;  // the value is the next argument
    } else if (!takes_value(o) || a[2] < '0' || a[2] > '9') {
      return a;
    }
  }
  return {};
}

std::string unknown_option_note(const CLI::App& cmd, const std::string& bad, LlamaHintFor program) {
  if (std::string hint = llama_flag_hint(bad.substr(0, bad.find('=')), program); !hint.empty()) return hint;
  if (bad[1] != '-' && bad.size() > 2) {
    const CLI::Option* o = cmd.get_option_no_throw(bad.substr(0, 2));
    return o != nullptr && takes_value(o)
               ? fmt::format("one dash takes one letter; a value goes after a space: {} {}", bad.substr(0, 2), bad.substr(2))
               : std::string("one dash takes one letter; long options take two, as --help lists them");
  }
  return {};
}

}  // namespace mamba::tools
