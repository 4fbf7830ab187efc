// mamba-cli: run, inspect, tokenize, perplexity, ... (one file per subcommand in tools/cli/).
#include <algorithm>
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
  auto& reg = mamba::cli::command_registry();
  std::sort(reg.begin(), reg.end(), [](const auto& a, const auto& b) { return a.order < b.order; });
  for (auto& c : reg) c.setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return 0;
}
