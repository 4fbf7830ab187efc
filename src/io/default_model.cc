// Where the embedded default model is found (build tree, install tree, $MAMBA_MODEL).
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "mamba/checkpoint.h"

namespace mamba {

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

}  // namespace mamba
