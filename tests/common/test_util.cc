#include "common/test_util.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace mamba::test {

std::optional<std::string> shared_dir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("MAMBA_SHARED_DIR"); env && *env) {
    if (fs::is_directory(env)) return std::string(env);
    return std::nullopt;
  }
  fs::path p = fs::path(MAMBA_TEST_SOURCE_DIR) / ".." / "shared";
  if (fs::is_directory(p / "fixtures")) return fs::weakly_canonical(p).string();
  return std::nullopt;
}

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << "cannot open " << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string source_dir() { return MAMBA_TEST_SOURCE_DIR; }
std::string binary_dir() { return MAMBA_TEST_BINARY_DIR; }

}  // namespace mamba::test
