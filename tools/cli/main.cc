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

std::string default_model_path() {
  namespace fs = std::filesystem;
  const std::string name = "mamba2-books-7m-bpe8k";
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("MAMBA_MODEL"); env && *env) candidates.emplace_back(env);
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path d = exe.parent_path();
    candidates.push_back(d / "models" / name);
    candidates.push_back(d / ".." / "share" / "mamba.cpp" / "models" / name);
  }
  candidates.emplace_back(MAMBA_INSTALL_MODEL_DIR);
  candidates.emplace_back(MAMBA_SOURCE_MODEL_DIR);
  for (const auto& c : candidates) {
    if (fs::is_regular_file(c / "config.json", ec)) return fs::weakly_canonical(c, ec).string();
  }
  return {};
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
