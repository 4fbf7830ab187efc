// resolve_model_path: a local directory, or an HF repo id looked up in the Hugging Face hub cache.
//
// Layout (huggingface_hub file_download / constants): cache root = $HF_HUB_CACHE, else the legacy
// $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub (each value with ~ and $VAR expanded, as huggingface_hub's
// expanduser/expandvars); repo dir models--ORG--NAME (models--NAME for a legacy id without an
// org, e.g. gpt2); refs/<revision> holds the commit hash; snapshots/<commit>/ holds the files
// (symlinks into blobs/). With no cache variable and no home directory the cache is not looked for
// (a relative ".cache/huggingface/hub" would depend on the working directory).
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "io/mapped_file.h"
#include "mamba/checkpoint.h"

namespace mamba {
namespace {

namespace fs = std::filesystem;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

/// The user's home directory: $HOME, else (unset or empty) the password database's entry for this
/// user, as Python's os.path.expanduser (which huggingface_hub applies to its default
/// "~/.cache/huggingface") falls back to; empty when neither names one (a container's user id
/// without a passwd entry).
std::string home_dir() {
  if (std::string h = env("HOME"); !h.empty()) return h;
  const long hint = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(hint > 0 ? static_cast<std::size_t>(hint) : 16384);
  struct passwd pw {};
  struct passwd* found = nullptr;
  if (::getpwuid_r(::getuid(), &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr && found->pw_dir != nullptr &&
      found->pw_dir[0] == '/')
    return found->pw_dir;
  return {};
}

/// Python's os.path.expandvars then expanduser, as huggingface_hub applies them to its cache
/// variables ("~/hf" and "$HOME/hf" in a .env file or a systemd unit are not expanded by a shell):
/// $NAME and ${NAME} are replaced when NAME is set (left as written otherwise); a leading "~" or
/// "~/" becomes $HOME.
std::string expand(const std::string& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    if (v[i] != '$') {
      out += v[i++];
      continue;
    }
    const bool brace = i + 1 < v.size() && v[i + 1] == '{';
    std::size_t j = i + (brace ? 2 : 1), k = j;
    while (k < v.size() && (std::isalnum(static_cast<unsigned char>(v[k])) || v[k] == '_')) ++k;
    const bool closed = !brace || (k < v.size() && v[k] == '}');
    const char* val = k > j && closed ? std::getenv(v.substr(j, k - j).c_str()) : nullptr;
    const std::size_t end = brace && closed ? k + 1 : k;
    if (val != nullptr) out += val;
    else out += v.substr(i, std::max<std::size_t>(end - i, 1));
    i = std::max(end, i + 1);
  }
  if (!out.empty() && out[0] == '~' && (out.size() == 1 || out[1] == '/')) {
    if (const std::string home = home_dir(); !home.empty()) out = home + out.substr(1);
  }
  return out;
}

/// The hub cache directory, or an empty path when nothing locates it (no cache variable, no home).
fs::path hub_cache_root() {
  if (auto v = env("HF_HUB_CACHE"); !v.empty()) return expand(v);
  if (auto v = env("HUGGINGFACE_HUB_CACHE"); !v.empty()) return expand(v);
  if (auto v = env("HF_HOME"); !v.empty()) return fs::path(expand(v)) / "hub";
  if (auto v = env("XDG_CACHE_HOME"); !v.empty()) return fs::path(expand(v)) / "huggingface" / "hub";
  if (auto v = home_dir(); !v.empty()) return fs::path(v) / ".cache" / "huggingface" / "hub";
  return {};
}

// ORG/NAME, or a legacy NAME without an org (gpt2): non-empty parts of [A-Za-z0-9._-], none
// "." or "..".
bool is_repo_id(const std::string& s) {
  if (s.empty() || s.front() == '/' || s.back() == '/' || std::count(s.begin(), s.end(), '/') > 1) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' || c == '/')) return false;
  const auto slash = s.find('/');
  const std::string org = slash == std::string::npos ? "" : s.substr(0, slash), name = s.substr(slash + 1);
  return org != "." && org != ".." && name != "." && name != "..";
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

/// resolve_model_path for a model (`what` = "model") or a tokenizer ("tokenizer"): `what` names it
/// in the not-found listing, and `files` (" tokenizer.json", or empty for the whole repo) follows
/// the repo id in the `hf download` line, so that a tokenizer's hint does not fetch a
/// 40 GB checkpoint for its 2 MB tokenizer.json.
Result<std::string> resolve_repo(const std::string& model_ref, const char* what, const std::string& files) {
  std::error_code ec;
  if (model_ref.empty()) return make_error(ErrorCode::kInvalidArgument, "empty model reference (expected a directory or ORG/NAME[@REVISION])");
  if (fs::is_directory(model_ref, ec)) return model_ref;
  // A symbolic link that is there but cannot be followed (a loop) is named as such, not searched for
  // in the HF cache as "not found".
  std::error_code link_ec;
  if (ec && ec != std::errc::no_such_file_or_directory && fs::is_symlink(model_ref, link_ec))
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot open: {}", model_ref, ec.message()));
  if (fs::exists(model_ref, ec)) {
    // llama.cpp's format, which its users try first: named as such, not as a misplaced file.
    if (char magic[4] = {}; std::ifstream(model_ref, std::ios::binary).read(magic, 4) && std::string_view(magic, 4) == "GGUF") {
      return make_error(ErrorCode::kUnsupported,
                        fmt::format("{}: a GGUF file (llama.cpp's format), which mamba.cpp does not read: it runs checkpoints as "
                                    "published, a directory holding config.json with *.safetensors (HF) or pytorch_model.bin "
                                    "(state-spaces), or such a repo id in the HF cache (e.g. state-spaces/mamba-130m-hf)",
                                    model_ref));
    }
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: is a file, expected a model directory (the one holding config.json and the weights: {})", model_ref,
                                  fs::path(model_ref).has_parent_path() ? fs::path(model_ref).parent_path().string() : std::string(".")));
  }

  std::string repo = model_ref, rev = "main";
  if (auto at = model_ref.rfind('@'); at != std::string::npos) {
    repo = model_ref.substr(0, at);
    rev = model_ref.substr(at + 1);
  }
  if (!is_repo_id(repo) || rev.empty() || rev == "." || rev.find("..") != std::string::npos) {
    return make_error(ErrorCode::kNotFound,
                      fmt::format("{}: no such model directory (and not a Hugging Face repo id of the form [ORG/]NAME[@REVISION])", model_ref));
  }
  std::string flat = repo;  // models--ORG--NAME, or models--NAME
  if (const auto slash = flat.find('/'); slash != std::string::npos) flat.replace(slash, 1, "--");
  const fs::path root = hub_cache_root();
  if (root.empty())
    return make_error(ErrorCode::kNotFound,
                      fmt::format("{} '{}' not found: it is no directory, and the Hugging Face hub cache was not looked in: "
                                  "HF_HUB_CACHE, HF_HOME and XDG_CACHE_HOME are unset, HOME is unset or empty, and this user "
                                  "has no home directory in the password database (set HF_HUB_CACHE to the cache directory)",
                                  what, model_ref));
  const fs::path repo_dir = root / ("models--" + flat);
  std::vector<std::string> looked;
  looked.push_back(fmt::format("directory '{}'", model_ref));

  std::string commit;
  const fs::path ref_file = repo_dir / "refs" / rev;
  if (fs::is_regular_file(ref_file, ec)) {
    auto text = io::read_text_file(ref_file.string());
    if (text.ok()) commit = trim(*text);
  }
  looked.push_back(ref_file.string());
  // No ref of that name: the revision names a snapshot directly (a commit hash, as huggingface_hub's
  // cache lookup takes it).
  if (commit.empty() && rev.find('/') == std::string::npos) commit = rev;
  if (!commit.empty()) {
    if (commit.find('/') != std::string::npos || commit.find("..") != std::string::npos) {
      return make_error(ErrorCode::kFormat, fmt::format("{}: malformed revision \"{}\"", ref_file.string(), commit));
    }
    const fs::path snap = repo_dir / "snapshots" / commit;
    if (fs::is_directory(snap, ec)) return snap.string();
    looked.push_back(snap.string());
  }
  std::string where;
  for (const auto& l : looked) where += "\n  " + l;
  return make_error(ErrorCode::kNotFound,
                    fmt::format("{} '{}' not found; looked in:{}\n(hub cache root {}: set HF_HUB_CACHE or HF_HOME to use another)\n"
                                "download it with: hf download {}{}{}",
                                what, model_ref, where, root.string(), repo, files, rev == "main" ? "" : " --revision " + rev));
}

}  // namespace

Result<std::string> resolve_model_path(const std::string& model_ref) { return resolve_repo(model_ref, "model", ""); }

Result<std::string> resolve_tokenizer_file(const std::string& tokenizer_ref) {
  if (tokenizer_ref.empty())
    return make_error(ErrorCode::kInvalidArgument, "empty tokenizer reference (expected a tokenizer.json file, a directory or ORG/NAME)");
  std::error_code ec;
  // A bare file name as ./NAME: callers read the tokenizer's directory as the path's parent.
  if (fs::is_regular_file(tokenizer_ref, ec)) return fs::path(tokenizer_ref).has_parent_path() ? tokenizer_ref : (fs::path(".") / tokenizer_ref).string();
  // A directory (or a cached repo): its tokenizer.json, named when it has none.
  std::string dir = tokenizer_ref;
  if (!fs::is_directory(tokenizer_ref, ec)) {
    if (fs::exists(tokenizer_ref, ec))
      return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: not a regular file (expected a tokenizer.json)", tokenizer_ref));
    std::error_code link_ec;
    if (fs::is_symlink(tokenizer_ref, link_ec))  // there, but pointing nowhere (or in a loop)
      return make_error(ErrorCode::kNotFound, fmt::format("{}: symbolic link to {}, which cannot be opened", tokenizer_ref,
                                                          fs::read_symlink(tokenizer_ref, link_ec).string()));
    auto resolved = resolve_repo(tokenizer_ref, "tokenizer", " tokenizer.json");
    if (!resolved.ok()) {
      Error e = resolved.error();
      if (e.message.find("no such model directory") != std::string::npos)
        e.message = fmt::format("{}: no such tokenizer file or directory (and not a Hugging Face repo id of the form [ORG/]NAME[@REVISION])",
                                tokenizer_ref);
      return e;
    }
    dir = *resolved;
  }
  MAMBA_ASSIGN_OR_RETURN(const bool has, has_model_file(dir, "tokenizer.json"));
  if (!has) return make_error(ErrorCode::kNotFound, fmt::format("{}: holds no tokenizer.json", dir));
  return (fs::path(dir) / "tokenizer.json").string();
}

Result<std::optional<std::string>> model_tokenizer_file(const std::string& model_dir, const std::string& tokenizer_ref) {
  if (!tokenizer_ref.empty()) {
    MAMBA_ASSIGN_OR_RETURN(std::string file, resolve_tokenizer_file(tokenizer_ref));
    return std::optional<std::string>(std::move(file));
  }
  MAMBA_ASSIGN_OR_RETURN(const bool has, has_model_file(model_dir, "tokenizer.json"));
  if (!has) return std::optional<std::string>();
  return std::optional<std::string>((fs::path(model_dir) / "tokenizer.json").string());
}

}  // namespace mamba
