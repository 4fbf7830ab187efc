// Where the embedded default model is found (build tree, install tree, $MAMBA_MODEL).
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "mamba/checkpoint.h"

namespace mamba {
namespace {

std::string model_env() {
  const char* env = std::getenv("MAMBA_MODEL");
  return env ? std::string(env) : std::string();
}

}  // namespace

std::string default_model_path() {
  namespace fs = std::filesystem;
  std::error_code ec;
  // An explicit $MAMBA_MODEL is the answer even when it does not resolve: the caller's
  // resolve_model_path reports it instead of another model being used silently.
  if (std::string env = model_env(); !env.empty()) {
    if (fs::is_regular_file(fs::path(env) / "config.json", ec)) return fs::weakly_canonical(env, ec).string();
    return env;
  }
  const std::string name = "mamba2-books-7m-bpe8k";
  std::vector<fs::path> candidates;
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

Result<std::string> resolve_default_model() {
  namespace fs = std::filesystem;
  if (std::string env = model_env(); !env.empty()) {
    auto dir = resolve_model_path(env);
    if (!dir.ok()) {
      return make_error(dir.error().code,
                        fmt::format("MAMBA_MODEL={} (the model used when none is given) does not resolve: {}", env, dir.error().message));
    }
    std::error_code ec;
    if (!fs::is_regular_file(fs::path(*dir) / "config.json", ec)) {
      return make_error(ErrorCode::kNotFound,
                        fmt::format("MAMBA_MODEL={} (the model used when none is given): {} has no config.json (expected a model directory)",
                                    env, *dir));
    }
    return fs::weakly_canonical(*dir, ec).string();
  }
  std::string path = default_model_path();
  if (path.empty()) {
    return make_error(ErrorCode::kNotFound,
                      "no model given and the embedded default model (models/mamba2-books-7m-bpe8k) was not found next to the "
                      "executable, in the install data dir or in the source tree (name a model directory — mamba-cli -m MODEL — or set MAMBA_MODEL)");
  }
  return path;
}

}  // namespace mamba
