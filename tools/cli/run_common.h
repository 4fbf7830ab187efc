// Shared by `mamba-cli run` and `mamba-cli perplexity`: loading a model with its tokenizer,
// parsing token-id lists, and the one-line error convention.
#pragma once

#include <CLI/CLI.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mamba/model.h"
#include "mamba/status.h"
#include "mamba/tokenizer.h"

namespace mamba::cli {

/// Prints "error: MESSAGE" on stderr and throws CLI::RuntimeError(1) (main() turns it into exit 2,
/// as every error of mamba-cli).
[[noreturn]] void fail(const std::string& message);
/// fail() for a flag whose value is out of its range (found after parsing, e.g. --temp -1): adds
/// the "Run with --help" line CLI11 prints for the flags it rejects itself (docs/USAGE.md).
[[noreturn]] void fail_flag(const std::string& message);

/// The words of subcommand `cmd`'s command line that no option took (it calls allow_extras(); main()
/// has refused unknown options already), in order: its own, without the "--" that ended the options,
/// then those after such a "--" that CLI11 hands up to mamba-cli itself — it does so when the
/// subcommand takes no positional argument or has all it takes (`run -- some words`, `tokenize
/// hello -- world`); a "--" among these is a word.
std::vector<std::string> extra_words(const CLI::App& cmd);

/// Drops a text's one final newline ("\n" or "\r\n": what editors and `echo` add), as llama.cpp's
/// -f does: as a prompt it would become a newline token and change the continuation. A lone final
/// '\r' is text (HF reads it so). Used by `run -f` / stdin and `tokenize` from stdin, so that
/// tokenize shows the ids run runs.
void drop_final_newline(std::string& text);

/// Which side sets vocab_limit(tok, model) (mamba/generate.h), for an out-of-vocabulary id's
/// message: " (the model's)", or " (the tokenizer's; the model's is larger)" when a smaller
/// tokenizer does.
std::string vocab_limit_source(const Tokenizer* tok, const Model& model);

/// fail_flag() naming the arguments CLI11 left over (extra_words), followed by `hint`, e.g. `run -m M
/// "hello"` or `run -m M -- hello`: "unexpected argument 'hello' of run: use -p \"...\" for the prompt
/// ...". Returns when there are none (a "--" that ended the options is not one).
void refuse_extra_arguments(const CLI::App& cmd, const std::string& hint);

/// A loaded model plus its tokenizer: the one `--tokenizer` named, else the model directory's
/// tokenizer.json when it has one.
struct LoadedModel {
  std::unique_ptr<Model> model;
  std::optional<Tokenizer> tokenizer;
  std::string dir;  ///< resolved model directory
  /// The directory of a tokenizer given with --tokenizer (its tokenizer_config.json names the EOS
  /// that model_eos_ids falls back to); empty when the model directory's own is used.
  std::string tokenizer_dir;
};

/// The "model:" log line's tier note: with --precision auto (the default) the tier it chose and
/// why (", precision bf16 (auto: bf16 weights, AVX-512 BF16)", ", precision exact (auto: F32
/// projections)"); a named tier as ", precision exact" / ", precision bf16" / ", precision int8".
std::string precision_note(const Model& model, const std::string& asked);

/// `model_ref`: a directory or an HF repo id; empty → $MAMBA_MODEL, else the embedded default model
/// (resolve_default_model(): a MAMBA_MODEL that does not resolve is an error naming it). `threads` 0 = all hardware threads;
/// `precision` "exact", "bf16" or "int8" (LoadOptions::precision). Errors name the path. Prints
/// "cpu: TARGET (why), weight prefetch on|off (why)" on stderr before loading (cpu_dispatch_description()),
/// then tools::warn_if_more_threads_than_cpus(threads, "-t/--threads").
/// `tokenizer_ref` (--tokenizer): empty, or a tokenizer.json, a directory or a cached repo id
/// (resolve_tokenizer_file), resolved before the model loads so that a bad one is reported at once.
Result<LoadedModel> load_model_and_tokenizer(const std::string& model_ref, int threads, const std::string& precision = "auto",
                                             const std::string& tokenizer_ref = "");

/// Parses token ids separated by commas and/or whitespace ("12,7, 99\n3"), optionally as one
/// bracketed list ("[12, 7, 99]", as JSON prints it). `what` names the source in errors (e.g.
/// "--prompt-ids", a file path). Errors: kInvalidArgument naming the bad item, an empty one (two
/// commas between ids), or a bracket without its partner.
Result<std::vector<std::int32_t>> parse_ids(const std::string& text, const std::string& what);

/// What an error for a model without tokenizer.json adds: how to give one (the original
/// state-spaces checkpoints ship without it and use GPT-NeoX-20B's).
inline constexpr const char* kGiveTokenizerHint =
    "give one with --tokenizer (a tokenizer.json, a directory or a cached repo id; the state-spaces checkpoints use "
    "--tokenizer EleutherAI/gpt-neox-20b)";

/// The most bytes read_text_file reads (1 GiB).
inline constexpr std::size_t kMaxTextFileBytes = std::size_t{1} << 30;

/// The UTF-8 byte-order mark (U+FEFF as EF BB BF), which Windows editors put at a file's start.
inline constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

/// Reads a whole UTF-8 text file without its leading byte-order mark (kUtf8Bom), if any: no user
/// means that as text; path "-" reads stdin (named "stdin" in errors). Pipes, character
/// devices and process substitution (`<(cmd)`) are read as streams. Errors name the path:
/// kNotFound "no such file", kInvalidArgument "is a directory, not a regular file" (or a socket /
/// block device), more than kMaxTextFileBytes (a regular file by its size, before reading; a stream
/// once it has sent that much: an endless /dev/zero) or not UTF-8 (require_utf8's message, found
/// in the first MiB that holds the bad byte: /dev/urandom is refused at once), kIo (cannot open / read).
/// Files are checked before the (slow) model load, not at encoding.
Result<std::string> read_text_file(const std::string& path);

/// ok when `text` is valid UTF-8, else kInvalidArgument naming `source` (a path, "stdin", an
/// option) and the first invalid byte (and a UTF-16 byte-order mark at its start, if any).
Status require_utf8(std::string_view text, const std::string& source);

}  // namespace mamba::cli
