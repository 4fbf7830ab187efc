// resolve_model_path against a fake Hugging Face hub cache laid out as huggingface_hub does.
#include <cstdlib>
#include <gtest/gtest.h>
#include <optional>

#include "io/io_test_util.h"
#include "mamba/checkpoint.h"

namespace mamba {
namespace {

// Sets an environment variable for the scope, restoring the previous value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value->c_str(), 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

const std::string kMain = "0123456789abcdef0123456789abcdef01234567";
const std::string kOther = "fedcba9876543210fedcba9876543210fedcba98";

// hub/models--state-spaces--mamba-130m-hf/{refs/main, refs/v1, snapshots/<kMain>, snapshots/<kOther>}
void make_cache(const test::TempDir& d, const std::string& hub) {
  const std::string repo = hub + "/models--state-spaces--mamba-130m-hf/";
  d.write(repo + "refs/main", kMain);  // huggingface_hub writes the hash without a newline
  d.write(repo + "refs/v1", kOther + "\n");
  d.write(repo + "snapshots/" + kMain + "/config.json", "{}");
  d.write(repo + "snapshots/" + kOther + "/config.json", "{}");
}

TEST(HfCache, ExistingDirectoryIsReturnedAsIs) {
  test::TempDir d;
  auto r = resolve_model_path(d.path());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, d.path());
}

TEST(HfCache, RepoIdResolvesThroughRefs) {
  test::TempDir d;
  make_cache(d, "hub");
  ScopedEnv cache("HF_HUB_CACHE", d.path() + "/hub"), home("HF_HOME", std::nullopt);
  const std::string snaps = d.path() + "/hub/models--state-spaces--mamba-130m-hf/snapshots/";
  auto r = resolve_model_path("state-spaces/mamba-130m-hf");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, snaps + kMain);
  r = resolve_model_path("state-spaces/mamba-130m-hf@v1");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, snaps + kOther);
  r = resolve_model_path("state-spaces/mamba-130m-hf@" + kOther);  // a commit hash names the snapshot directly
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, snaps + kOther);
  // So does any snapshot directory's name without a ref (huggingface_hub's lookup: refs/<rev>,
  // else snapshots/<rev>), e.g. a cache laid out by hand or copied without its refs.
  d.write("hub/models--state-spaces--mamba-130m-hf/snapshots/abc123/config.json", "{}");
  r = resolve_model_path("state-spaces/mamba-130m-hf@abc123");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, snaps + "abc123");
}

TEST(HfCache, HfHomeAndHomeFallbacks) {
  test::TempDir d;
  make_cache(d, "hfhome/hub");
  {
    ScopedEnv cache("HF_HUB_CACHE", std::nullopt), home("HF_HOME", d.path() + "/hfhome");
    auto r = resolve_model_path("state-spaces/mamba-130m-hf");
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(*r, d.path() + "/hfhome/hub/models--state-spaces--mamba-130m-hf/snapshots/" + kMain);
  }
  make_cache(d, "user/.cache/huggingface/hub");
  {
    ScopedEnv cache("HF_HUB_CACHE", std::nullopt), home("HF_HOME", std::nullopt), xdg("XDG_CACHE_HOME", std::nullopt),
        user("HOME", d.path() + "/user");
    auto r = resolve_model_path("state-spaces/mamba-130m-hf");
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(*r, d.path() + "/user/.cache/huggingface/hub/models--state-spaces--mamba-130m-hf/snapshots/" + kMain);
  }
}

// As huggingface_hub: "~" and $VAR in the cache variables are expanded (a .env file or a systemd
// unit passes them unexpanded), the legacy HUGGINGFACE_HUB_CACHE is read after HF_HUB_CACHE, and a
// legacy repo id without an org (gpt2) is models--gpt2.
TEST(HfCache, ExpandedVariablesLegacyCacheVariableAndOrglessIds) {
  test::TempDir d;
  make_cache(d, "user/hfhome/hub");
  {
    ScopedEnv cache("HF_HUB_CACHE", std::nullopt), legacy("HUGGINGFACE_HUB_CACHE", std::nullopt), home("HF_HOME", "~/hfhome"),
        user("HOME", d.path() + "/user");
    auto r = resolve_model_path("state-spaces/mamba-130m-hf");
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(*r, d.path() + "/user/hfhome/hub/models--state-spaces--mamba-130m-hf/snapshots/" + kMain);
  }
  {
    ScopedEnv cache("HF_HUB_CACHE", "${MAMBA_TEST_ROOT}/hfhome/$NO_SUCH_VAR_X/../hub"), legacy("HUGGINGFACE_HUB_CACHE", std::nullopt),
        root("MAMBA_TEST_ROOT", d.path() + "/user"), unset("NO_SUCH_VAR_X", std::nullopt);
    auto r = resolve_model_path("state-spaces/mamba-130m-hf");
    EXPECT_FALSE(r.ok()) << "an unset $VAR stays as written (Python's expandvars), so that path does not exist";
    d.write("user/hfhome/$NO_SUCH_VAR_X/.keep", "");
    r = resolve_model_path("state-spaces/mamba-130m-hf");
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  {
    ScopedEnv cache("HF_HUB_CACHE", std::nullopt), legacy("HUGGINGFACE_HUB_CACHE", d.path() + "/user/hfhome/hub"),
        home("HF_HOME", "/nonexistent");
    auto r = resolve_model_path("state-spaces/mamba-130m-hf");
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  d.write("hub/models--gpt2books/refs/main", kMain);
  d.write("hub/models--gpt2books/snapshots/" + kMain + "/config.json", "{}");
  ScopedEnv cache("HF_HUB_CACHE", d.path() + "/hub");
  auto r = resolve_model_path("gpt2books");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, d.path() + "/hub/models--gpt2books/snapshots/" + kMain);
}

TEST(HfCache, MissingRepoSaysWhereItLookedAndHowToDownload) {
  test::TempDir d;
  make_cache(d, "hub");
  ScopedEnv cache("HF_HUB_CACHE", d.path() + "/hub");
  auto r = resolve_model_path("tiiuae/falcon-mamba-7b");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  const std::string& m = r.error().message;
  EXPECT_NE(m.find(d.path() + "/hub/models--tiiuae--falcon-mamba-7b/refs/main"), std::string::npos) << m;
  EXPECT_NE(m.find("hf download tiiuae/falcon-mamba-7b"), std::string::npos) << m;
  // An unknown revision of a cached repo.
  r = resolve_model_path("state-spaces/mamba-130m-hf@.");  // not a revision (snapshots/. is the directory itself)
  ASSERT_FALSE(r.ok());
  r = resolve_model_path("state-spaces/mamba-130m-hf@nope");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("--revision nope"), std::string::npos) << r.error().message;
  // A ref pointing at a snapshot that is not there.
  d.write("hub/models--state-spaces--mamba-130m-hf/refs/broken", kOther.substr(0, 39) + "0");
  r = resolve_model_path("state-spaces/mamba-130m-hf@broken");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("snapshots/" + kOther.substr(0, 39) + "0"), std::string::npos) << r.error().message;
}

TEST(HfCache, NotADirectoryNorARepoId) {
  auto r = resolve_model_path("/definitely/not/here");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("/definitely/not/here"), std::string::npos);
  r = resolve_model_path("../x");
  ASSERT_FALSE(r.ok());
  r = resolve_model_path("");
  ASSERT_FALSE(r.ok());
}

TEST(HfCache, AFileIsNamedAndADirectoryAskedFor) {
  test::TempDir d;
  d.write("config.json", "{}");
  const std::string file = d.path() + "/config.json";
  auto r = resolve_model_path(file);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  // (llama.cpp takes a file: the directory to give instead is named.)
  EXPECT_EQ(r.error().message, file + ": is a file, expected a model directory (the one holding config.json and the weights: " + d.path() + ")");
  // A GGUF file (what a llama.cpp user passes first) is named as the format it is.
  d.write("mamba-130m.Q8_0.gguf", std::string("GGUF\x03\0\0\0", 8) + std::string(64, '\0'));
  r = resolve_model_path(d.path() + "/mamba-130m.Q8_0.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(r.error().message.find("mamba-130m.Q8_0.gguf: a GGUF file (llama.cpp's format), which mamba.cpp does not read"), std::string::npos)
      << r.error().message;
}

}  // namespace
}  // namespace mamba
