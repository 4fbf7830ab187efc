// mamba-cli: run, inspect, tokenize, perplexity, ... (one file per subcommand in tools/cli/).
#include <algorithm>
#include <string>
#include <cstdio>
#include <filesystem>
#include <unistd.h>

#include "cli/command.h"

namespace mamba::cli {

std::vector<CommandInfo>& command_registry() {
  static std::vector<CommandInfo> registry;
  return registry;
}

}  // namespace mamba::cli

int main(int argc, char** argv) {
  CLI::App app{"mamba.cpp: run Mamba-family language models (Mamba-1, Falcon-Mamba, Mamba-2)", "mamba-cli"};
  app.require_subcommand(1);
  // Parse errors look like every other error of mamba-cli: one "error: ..." line, exit 2.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "error: " + std::string(e.what()) + "\nRun with --help for more information.\n";
  });
  auto& reg = mamba::cli::command_registry();
  std::sort(reg.begin(), reg.end(), [](const auto& a, const auto& b) { return a.order < b.order; });
  for (auto& c : reg) c.setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // --help / --version exit 0
  }
  return 0;
}
