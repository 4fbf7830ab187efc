// mamba-cli tokenize: text → token ids (or ids → text with --decode) with a model's tokenizer.json.
//   mamba-cli tokenize --model state-spaces/mamba-130m-hf "Hello world"
//   mamba-cli tokenize --tokenizer tokenizer.json --decode 12092 1533
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

#include <unistd.h>

#include "cli/command.h"
#include "cli/run_common.h"
#include "common/out_of_memory.h"
#include "mamba/checkpoint.h"
#include "mamba/tokenizer.h"

namespace mamba::cli {
namespace {

struct TokenizeOptions {
  std::string model, tokenizer;
  bool decode = false, special = false, show_tokens = false, skip_special = false;
  std::vector<std::string> args;
};

[[noreturn]] void fail(const std::string& msg) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  throw CLI::RuntimeError(1);
}

Result<std::string> tokenizer_path(const TokenizeOptions& o) {
  // As run and perplexity: --tokenizer replaces the model directory's tokenizer (the hint for a
  // model without one says to add it); the model must still exist.
  if (!o.tokenizer.empty() && o.model.empty()) return resolve_tokenizer_file(o.tokenizer);
  MAMBA_ASSIGN_OR_RETURN(std::string dir, o.model.empty() ? resolve_default_model() : resolve_model_path(o.model));
  MAMBA_ASSIGN_OR_RETURN(const std::optional<std::string> file, model_tokenizer_file(dir, o.tokenizer));
  if (!file) return make_error(ErrorCode::kNotFound, fmt::format("{}: the model has no tokenizer.json: {}", dir, kGiveTokenizerHint));
  return *file;
}

void run(const TokenizeOptions& o) {
  auto path = tokenizer_path(o);
  if (!path.ok()) {
    // `tokenize -t 4`: run's and perplexity's -t is the thread count, tokenize's the tokenizer.
    const bool number = !o.tokenizer.empty() && o.tokenizer.find_first_not_of("0123456789") == std::string::npos;
    fail(path.error().message + (number ? fmt::format("\n(here -t is -t/--tokenizer, not a thread count: tokenize runs no model, "
                                                      "so it takes no -t N threads; leave -t {} out)", o.tokenizer)
                                        : std::string()));
  }
  auto tok = tools::load_tokenizer(*path);
  if (!tok.ok()) fail(tok.error().message);
  if (o.decode) {
    // Ids separated by spaces and/or commas, optionally in [ ] (parse_ids).
    std::string joined;
    for (const auto& a : o.args) joined += (joined.empty() ? "" : " ") + a;
    auto ids = parse_ids(joined, "--decode");
    if (!ids.ok()) fail(ids.error().message);
    auto text = tok->decode(*ids, o.skip_special);
    if (!text.ok()) fail(text.error().message);
    std::fwrite(text->data(), 1, text->size(), stdout);
    std::fputc('\n', stdout);
    return;
  }
  std::string text;
  for (std::size_t k = 0; k < o.args.size(); ++k) text += (k ? " " : "") + o.args[k];
  auto ids = tok->encode(text, o.special);
  if (!ids.ok()) fail(ids.error().message);
  std::string line;
  for (std::size_t k = 0; k < ids->size(); ++k) {
    if (k) line += ' ';
    line += std::to_string((*ids)[k]);
    if (o.show_tokens) line += "(" + tok->id_to_token((*ids)[k]).value_or("?") + ")";
  }
  std::puts(line.c_str());
}

CommandRegistrar reg("tokenize", 30, [](CLI::App& app) {
  auto opts = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Print the token ids of TEXT (or, with --decode, the text of IDS)");
  cmd->add_option("--model,-m", opts->model, "model directory or HF repo id (default: $MAMBA_MODEL, else the embedded model)")
      ->check(non_empty("a model directory or HF repo id ORG/NAME (leave -m out for the default model)"));
  cmd->add_option("--tokenizer,-t", opts->tokenizer, "a tokenizer.json file, a directory holding one, or a cached HF repo id")->check(non_empty("a tokenizer.json path"));
  auto* d = cmd->add_flag("--decode,-d", opts->decode, "decode token ids (space or comma separated, optionally in [ ]) to text");
  // Each of the others applies to one direction only: given with the other it is an error, not ignored.
  cmd->add_flag("--special", opts->special, "add the post-processor's special tokens (e.g. BOS) when encoding")->excludes(d);
  cmd->add_flag("--skip-special", opts->skip_special, "drop special tokens when decoding")->needs(d);
  cmd->add_flag("--tokens", opts->show_tokens, "print each id's token string too (encoding)")->excludes(d);
  // The first word is the positional; the others arrive as extras (allow_extras: main() has already
  // refused unknown options). CLI11 splits a vector option's argument written as "[...]" on its
  // commas and drops the brackets and empty pieces ("[hello]" was encoded as "hello", "[a,,b]" as
  // "a b"); a one-value option and the extras keep every argument as typed.
  cmd->add_option("text", opts->args, "text to encode, or ids to decode (several words are joined by spaces); none: read from stdin (not a terminal)")
      ->expected(1)
      ->allow_extra_args(false);
  cmd->allow_extras();
  cmd->callback([opts, cmd] {
    // The extras without the "--" that ended the options (a later "--" is a word of the text),
    // also the words after one that follows the first word (`tokenize hello -- world`).
    for (std::string& w : extra_words(*cmd)) opts->args.push_back(std::move(w));
    if (opts->args.empty()) {
      // No TEXT: a pipe or file on stdin is the text (or the ids), one trailing newline dropped as
      // run's -f does; a terminal is not waited on.
      if (isatty(STDIN_FILENO)) fail_flag("text is required (as arguments, or piped on stdin)");
      auto in = read_text_file("-");
      if (!in.ok()) fail(in.error().message);
      std::string text = std::move(*in);
      drop_final_newline(text);
      opts->args.push_back(std::move(text));
    }
    run(*opts);
  });
});

}  // namespace
}  // namespace mamba::cli
