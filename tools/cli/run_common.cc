#include "cli/run_common.h"

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <sys/stat.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/command.h"
#include "common/out_of_memory.h"
#include "common/thread_warning.h"
#include "core/utf8.h"
#include "mamba/checkpoint.h"
#include "mamba/generate.h"
#include "ops/cpu/cpu_target.h"
#include "tokenizer/unicode.h"

namespace mamba::cli {

void fail(const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "error: %s\n", message.c_str());
  throw CLI::RuntimeError(1);
}

void fail_flag(const std::string& message) { fail(message + "\nRun with --help for more information."); }

std::vector<std::string> extra_words(const CLI::App& cmd) {
  std::vector<std::string> words;
  // remaining() also holds the "--" mark that ended the options (remaining_size() does not count it).
  std::size_t marks = cmd.remaining().size() - cmd.remaining_size();
  for (const std::string& w : cmd.remaining()) {
    if (marks > 0 && w == "--") {
      --marks;
      continue;
    }
    words.push_back(w);
  }
  // After that mark: what CLI11 handed up to mamba-cli itself (main() allows it extras for this).
  if (const CLI::App* parent = cmd.get_parent()) {
    const std::vector<std::string> up = parent->remaining();
    words.insert(words.end(), up.begin(), up.end());
  }
  return words;
}

void refuse_extra_arguments(const CLI::App& cmd, const std::string& hint) {
  const std::vector<std::string> extra = extra_words(cmd);
  std::string words;
  for (const std::string& w : extra) words += fmt::format("{}'{}'", words.empty() ? "" : " ", w);
  if (!extra.empty())
    fail_flag(fmt::format("unexpected argument{} {} of {}: {}", extra.size() > 1 ? "s" : "", words, cmd.get_name(), hint));
}

std::string precision_note(const Model& model, const std::string& asked) {
  if (asked == "auto") return fmt::format(", precision {} (auto: {})", precision_name(model.precision()), model.precision_reason());
  return fmt::format(", precision {}", precision_name(model.precision()));  // the tier named, exact too
}

Result<LoadedModel> load_model_and_tokenizer(const std::string& model_ref, int threads, const std::string& precision,
                                             const std::string& tokenizer_ref) {
  std::string dir;
  if (model_ref.empty()) {
    MAMBA_ASSIGN_OR_RETURN(dir, resolve_default_model());
  } else {
    MAMBA_ASSIGN_OR_RETURN(dir, resolve_model_path(model_ref));
  }
  // Before the (slow) load: a bad --tokenizer, or a model directory's unreadable tokenizer.json.
  MAMBA_ASSIGN_OR_RETURN(const std::optional<std::string> tokenizer_file, model_tokenizer_file(dir, tokenizer_ref));
  // Once per process, before any kernel runs: which SIMD path computes, and why (a bad
  // MAMBA_CPU_TARGET / MAMBA_WEIGHT_PREFETCH is reported here, not at the first matmul).
  std::fprintf(stderr, "cpu: %s\n", ops::cpu::cpu_dispatch_description().c_str());
  tools::warn_if_more_threads_than_cpus(threads, "-t/--threads");
  LoadOptions lo;
  lo.threads = threads;
  MAMBA_ASSIGN_OR_RETURN(lo.precision, parse_precision(precision));
  LoadedModel out;
  MAMBA_ASSIGN_OR_RETURN(out.model, tools::with_out_of_memory_context("loading the model " + dir, [&] { return Model::load(dir, lo); }));
  out.dir = out.model->checkpoint().dir();
  // With --tokenizer, the EOS fallback reads that tokenizer's directory's tokenizer_config.json.
  if (!tokenizer_ref.empty()) out.tokenizer_dir = std::filesystem::path(*tokenizer_file).parent_path().string();
  if (tokenizer_file) {
    MAMBA_ASSIGN_OR_RETURN(Tokenizer tok, tools::load_tokenizer(*tokenizer_file));
    out.tokenizer.emplace(std::move(tok));
    // As mamba-server warns: another model's tokenizer fails only once a prompt reaches its extra
    // ids (a fresh user's `run` then said "prompt token 12092 … outside the vocabulary [0, 8192)").
    if (const std::string why = tokenizer_vocab_mismatch(*out.tokenizer, *out.model); !why.empty()) spdlog::warn("{}", why);
  }
  return out;
}

namespace {
/// An ids-list item as an error message shows it, between quotes: control bytes (a NUL, an ESC that
/// would drive the terminal) as \xNN, a quote or backslash escaped, and at most kMaxShown bytes
/// (cut before a UTF-8 character, then "…" and the item's length): a 5 MB item is not echoed whole.
std::string shown_item(std::string_view item) {
  constexpr std::size_t kMaxShown = 40;
  const std::size_t keep = utf8_cut(item, kMaxShown);
  std::string out = "'";
  for (std::size_t k = 0; k < keep; ++k) {
    const auto c = static_cast<unsigned char>(item[k]);
    if (c < 0x20 || c == 0x7F)
      out += fmt::format("\\x{:02X}", c);
    else if (c == '\'' || c == '\\')
      out += std::string("\\") + static_cast<char>(c);
    else
      out += static_cast<char>(c);
  }
  out += keep < item.size() ? fmt::format("…' ({} bytes)", item.size()) : "'";
  return out;
}
}  // namespace

Result<std::vector<std::int32_t>> parse_ids(const std::string& text, const std::string& what) {
  std::vector<std::int32_t> ids;
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  auto is_sep = [&](char c) { return c == ',' || is_space(c); };
  // (An ids file's byte-order mark is gone already: read_text_file skips it.)
  std::size_t i = 0, n = text.size();
  // A JSON-style list: one pair of brackets around the whole text, both or neither.
  while (i < n && is_space(text[i])) ++i;
  while (n > i && is_space(text[n - 1])) --n;
  // One comma after the last id is allowed, also after a bracketed list ("[1, 2],").
  if (n > i + 1 && text[n - 1] == ',' && text[n - 2] == ']') {
    --n;
    while (n > i && is_space(text[n - 1])) --n;
  }
  const bool open = i < n && text[i] == '[', close = n > i && text[n - 1] == ']';
  if (open != close)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: unbalanced brackets: the list {} with '{}' but does not {} with '{}'", what,
                                  open ? "starts" : "ends", open ? '[' : ']', open ? "end" : "start", open ? ']' : '['));
  if (open) ++i, --n;
  while (i < n) {
    // Commas separate items: "1,,2" and ",1" have an empty item (a typo, or a lost id), an error;
    // one comma after the last item is allowed, as in Python's and JavaScript's lists.
    int commas = 0;
    for (; i < n && is_sep(text[i]); ++i) commas += text[i] == ',';
    if (commas > 0 && ids.empty())
      return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: empty item before item 1 (the list starts with a comma)", what));
    if (commas > 1)
      return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: empty item after item {} (two commas)", what, ids.size()));
    if (i >= n) break;
    std::size_t j = i;
    while (j < n && !is_sep(text[j])) ++j;
    const std::string_view item(text.data() + i, j - i);
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    const bool digits = !item.empty() && item.find_first_not_of("0123456789") == std::string_view::npos;
    if (digits && (ec == std::errc::result_out_of_range || v > INT32_MAX))
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: {} (item {}) is too large for a token id (at most {})", what, shown_item(item), ids.size() + 1, INT32_MAX));
    // Digits only: "-0" is no id either (from_chars reads it as 0).
    if (!digits || ec != std::errc() || p != item.data() + item.size())
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: {} (item {}) is not a token id (a non-negative integer)", what, shown_item(item), ids.size() + 1));
    ids.push_back(static_cast<std::int32_t>(v));
    i = j;
  }
  return ids;
}

namespace {
/// The error for text that is not UTF-8 at byte `bad`, naming `source` (a path, "stdin", "--stop")
/// and the byte; a UTF-16 file (Windows PowerShell's `>` writes one) is named as such.
Error utf8_error(std::string_view text, std::size_t bad, const std::string& source) {
  const bool utf16 = text.size() >= 2 && ((text[0] == '\xFF' && text[1] == '\xFE') || (text[0] == '\xFE' && text[1] == '\xFF'));
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("{}: not valid UTF-8 text (invalid byte 0x{:02X} at offset {}){}", source,
                                static_cast<unsigned char>(text[bad]), bad,
                                utf16 ? fmt::format(": it starts with the UTF-16 byte-order mark {:02X} {:02X}; save it as UTF-8",
                                                    static_cast<unsigned char>(text[0]), static_cast<unsigned char>(text[1]))
                                      : ""));
}

/// Reads `in` to its end into a string of at most kMaxTextFileBytes (an endless stream such as
/// /dev/zero would otherwise fill the memory), checking each 1 MiB as it comes that the text is
/// UTF-8: binary input (/dev/urandom) is refused at its first chunk, not after 1 GiB. `name`
/// names the input in errors.
Result<std::string> read_capped(std::istream& in, const std::string& name) {
  std::string out;
  std::vector<char> buf(std::size_t{1} << 20);
  std::size_t valid = 0;  // out[0, valid) is UTF-8
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto got = static_cast<std::size_t>(in.gcount());
    if (out.size() + got > kMaxTextFileBytes)
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: more than {} MiB of input (the limit for prompt and text files)", name,
                                    kMaxTextFileBytes >> 20));
    out.append(buf.data(), got);
    valid += tok::utf8_valid_prefix(std::string_view(out).substr(valid));
    // A character cut by the chunk's end (at most 3 of its bytes) is checked again with the next
    // chunk; 4 bytes or more from `valid` hold a whole sequence, so it is invalid.
    if (out.size() - valid > 3) return utf8_error(out, valid, name);
  }
  if (in.bad()) return make_error(ErrorCode::kIo, fmt::format("{}: read failed", name));
  if (valid < out.size()) return utf8_error(out, valid, name);
  // A leading UTF-8 byte-order mark (EF BB BF: Windows editors write one) is no part of the text:
  // it had reached the tokenizer as a U+FEFF token or two at the prompt's start.
  if (out.rfind(kUtf8Bom, 0) == 0) out.erase(0, kUtf8Bom.size());
  return out;
}
}  // namespace

Status require_utf8(std::string_view text, const std::string& source) {
  const std::size_t bad = tok::utf8_valid_prefix(text);
  if (bad == text.size()) return {};
  return utf8_error(text, bad, source);
}

Result<std::string> read_text_file(const std::string& path) {
  if (path == "-") return read_capped(std::cin, "stdin");
  // Regular files, and streams: FIFOs, character devices (/dev/stdin, /dev/null), and shell process
  // substitution <(...) (a /dev/fd/N pipe). stat() follows symlinks.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return make_error(ErrorCode::kNotFound, fmt::format("{}: no such file", path));
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  }
  if (S_ISDIR(st.st_mode)) return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: is a directory, not a regular file", path));
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode))
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: not a regular file (nor a pipe or character device)", path));
  // A regular file's size is known: one over the limit is refused before any of it is read.
  if (S_ISREG(st.st_mode) && static_cast<std::uintmax_t>(st.st_size) > kMaxTextFileBytes)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: {} bytes ({:.1f} MiB), more than the {} MiB limit for prompt and text files", path,
                                  static_cast<std::uintmax_t>(st.st_size), static_cast<double>(st.st_size) / (1 << 20),
                                  kMaxTextFileBytes >> 20));
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::kIo, fmt::format("{}: cannot open: {}", path, errno ? std::strerror(errno) : "unknown error"));
  return read_capped(in, path);
}

std::string vocab_limit_source(const Tokenizer* tok, const Model& model) {
  return vocab_limit(tok, model) < model.config().vocab_size ? " (the tokenizer's; the model's is larger)" : " (the model's)";
}

void drop_final_newline(std::string& text) {
  if (text.empty() || text.back() != '\n') return;
  text.pop_back();
  if (!text.empty() && text.back() == '\r') text.pop_back();
}

}  // namespace mamba::cli
