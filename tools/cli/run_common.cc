#include "cli/run_common.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "cli/command.h"
#include "mamba/checkpoint.h"
#include "ops/cpu/cpu_target.h"

namespace mamba::cli {

void fail(const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "error: %s\n", message.c_str());
  throw CLI::RuntimeError(1);
}

Result<LoadedModel> load_model_and_tokenizer(const std::string& model_ref, int threads) {
  std::string ref = model_ref;
  if (ref.empty()) {
    ref = default_model_path();
    if (ref.empty())
      return make_error(ErrorCode::kNotFound,
                        "no -m MODEL given and the embedded default model (models/mamba2-books-7m-bpe8k) was not "
                        "found next to the executable, in the install data dir, or at $MAMBA_MODEL");
  }
  MAMBA_ASSIGN_OR_RETURN(std::string dir, resolve_model_path(ref));
  // Once per process, before any kernel runs: which SIMD path computes, and why (a bad
  // MAMBA_CPU_TARGET is reported here, not at the first matmul).
  std::fprintf(stderr, "cpu: %s\n", ops::cpu::cpu_target_description().c_str());
  LoadOptions lo;
  lo.threads = threads;
  LoadedModel out;
  MAMBA_ASSIGN_OR_RETURN(out.model, Model::load(dir, lo));
  out.dir = out.model->checkpoint().dir();
  const auto tok_path = std::filesystem::path(out.dir) / "tokenizer.json";
  std::error_code ec;
  if (std::filesystem::is_regular_file(tok_path, ec)) {
    MAMBA_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::from_file(tok_path.string()));
    out.tokenizer.emplace(std::move(tok));
  }
  return out;
}

Result<std::vector<std::int32_t>> parse_ids(const std::string& text, const std::string& what) {
  std::vector<std::int32_t> ids;
  std::size_t i = 0;
  const std::size_t n = text.size();
  auto is_sep = [](char c) { return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (i < n) {
    while (i < n && is_sep(text[i])) ++i;
    if (i >= n) break;
    std::size_t j = i;
    while (j < n && !is_sep(text[j])) ++j;
    const std::string_view item(text.data() + i, j - i);
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || p != item.data() + item.size() || v < 0 || v > INT32_MAX)
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: '{}' (item {}) is not a token id (a non-negative integer)", what, item, ids.size() + 1));
    ids.push_back(static_cast<std::int32_t>(v));
    i = j;
  }
  return ids;
}

Result<std::string> read_text_file(const std::string& path) {
  std::stringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return make_error(ErrorCode::kNotFound, fmt::format("{}: no such file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::kIo, fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  ss << in.rdbuf();
  if (in.bad()) return make_error(ErrorCode::kIo, fmt::format("{}: read failed", path));
  return ss.str();
}

}  // namespace mamba::cli
