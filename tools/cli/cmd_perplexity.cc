// `mamba-cli perplexity`: mean negative log-likelihood and perplexity of a text or id sequence.
//
// The ids are cut into consecutive, non-overlapping windows of ctx+1 ids that share their boundary
// id (window w covers ids [w·ctx, (w+1)·ctx]); each window starts from an empty state and scores
// its ctx predictions (the last window may be shorter). NLL of a prediction = −log-softmax of the
// raw logits at the target id, over the tokenizer's ids when the model has a tokenizer, else over
// the full logits width (sampling.h's logprob definition). Ctrl-C or SIGTERM prints the figures over the
// predictions scored so far (cli/interrupt.h).
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/interrupt.h"
#include "cli/run_common.h"
#include "mamba/generate.h"
#include "mamba/sampling.h"
#include "common/option_rules.h"

namespace mamba::cli {
namespace {

struct PplArgs {
  std::string model, tokenizer, text_file, ids_file;
  std::int64_t ctx = 0;
  int threads = 0;
  std::string precision = "auto";
};

void run(const PplArgs& a, CLI::App& cmd) {
  refuse_extra_arguments(cmd, "give the text to score with -f FILE, or token ids with --ids-file FILE");
  const bool on_terminal = isatty(STDERR_FILENO) == 1;  // progress: a rewritten line there, plain lines in a log
  const bool have_text = cmd.count("--file") > 0, have_ids = cmd.count("--ids-file") > 0;
  if (have_text == have_ids) fail_flag("give exactly one of -f/--file TEXT or --ids-file IDS");

  // A file is read (and a bad path reported) before the (slow) model load; stdin after it, so a
  // bad model or a missing tokenizer is reported without waiting for the input's end.
  const std::string& input = have_ids ? a.ids_file : a.text_file;
  const bool from_stdin = input == "-";
  const std::string input_name = from_stdin ? "stdin" : input;  // as errors name it
  std::string text;
  std::vector<std::int32_t> ids;
  auto read_input = [&] {
    auto read = read_text_file(input);  // UTF-8 checked as it is read (an ids file too: ids are ASCII)
    if (!read.ok()) fail(read.error().message);
    text = std::move(*read);
    if (!have_ids) return;
    // So are the ids themselves (only the vocabulary check needs the model).
    auto parsed = parse_ids(text, input_name);
    if (!parsed.ok()) fail(parsed.error().message);
    ids = std::move(*parsed);
    if (ids.size() < 2) fail(fmt::format("{}: perplexity needs at least 2 token ids, got {}", input_name, ids.size()));
  };
  if (!from_stdin) read_input();

  auto loaded = load_model_and_tokenizer(a.model, a.threads, a.precision, a.tokenizer);
  if (!loaded.ok()) fail(loaded.error().message);
  Model& model = *loaded->model;
  // As `run`: which model and tier scored (logs of an exact and an int8 run differ here).
  std::fprintf(stderr, "model: %s (%s, %lld layers%s)\n", loaded->dir.c_str(), arch_name(model.config().arch),
               static_cast<long long>(model.config().n_layer), precision_note(model, a.precision).c_str());
  const Tokenizer* tok = loaded->tokenizer ? &*loaded->tokenizer : nullptr;
  const std::int64_t width = model.logits_width();

  if (!have_ids && !tok)
    fail(fmt::format("{} has no tokenizer.json: {}, or use --ids-file with token ids", loaded->dir, kGiveTokenizerHint));
  if (from_stdin) read_input();
  if (!have_ids) {
    auto enc = tok->encode(text, /*add_special_tokens=*/true);
    if (!enc.ok()) fail(enc.error().message);
    ids = std::move(*enc);
  }
  if (ids.size() < 2)
    fail(have_ids ? fmt::format("{}: perplexity needs at least 2 token ids, got {}", input_name, ids.size())
                  : fmt::format("{}: perplexity needs a text of at least 2 tokens, got {} ({} bytes)", input_name, ids.size(), text.size()));
  const std::int64_t vocab = vocab_limit(tok, model);
  const std::string vocab_note = vocab_limit_source(tok, model);
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= vocab) {
      if (have_ids)  // named as parse_ids names items: the file, 1-based
        fail(fmt::format("{}: token id {} (item {}) is outside the vocabulary [0, {}){}", input_name, ids[i], i + 1, vocab, vocab_note));
      fail(fmt::format("{}: the tokenizer gave token id {} (position {}), outside the vocabulary [0, {}){}", input_name,
                       ids[i], i, vocab, vocab_note));
    }

  const std::int64_t total = static_cast<std::int64_t>(ids.size()) - 1;  // predictions overall
  const std::int64_t ctx = a.ctx > 0 ? a.ctx : total;
  // Prefill pieces of ~2048 tokens (ModelConfig::prompt_piece) bound the [piece, width] logits buffer.
  constexpr std::int64_t kPieceTokens = 2048;
  std::vector<float> logits, lp(static_cast<std::size_t>(vocab));
  double nll_sum = 0;
  std::int64_t n_pred = 0;
  // Ctrl-C or SIGTERM (cli/interrupt.h): stop after the current piece of ≤ 2048 predictions and
  // print the figures over the predictions scored so far, then end as that signal.
  std::optional<Interrupt> interrupt;
  interrupt.emplace();
  // Progress on stderr after each piece: on a terminal one line rewritten at most once a second,
  // in a log a line every 30 s (a 20 MB text is minutes of scoring): predictions so far, the
  // perplexity over them, the time left at the rate so far.
  const auto t0 = std::chrono::steady_clock::now();
  auto last_shown = t0;
  bool shown = false;
  // last: the final figures of a run that showed progress (else a long run's line ended below 100%).
  auto progress = [&](bool last) {
    const auto now = std::chrono::steady_clock::now();
    if (n_pred == 0 || (last ? !shown : now - last_shown < (on_terminal ? std::chrono::seconds(1) : std::chrono::seconds(30)))) return;
    last_shown = now;
    shown = true;
    const double secs = std::chrono::duration<double>(now - t0).count();
    const double left = secs / static_cast<double>(n_pred) * static_cast<double>(total - n_pred);
    std::fprintf(stderr, "%sscored %lld/%lld predictions (%.1f%%), perplexity so far %.4f, about %.0f s left%s",
                 on_terminal ? "\r" : "", static_cast<long long>(n_pred), static_cast<long long>(total),
                 100.0 * static_cast<double>(n_pred) / static_cast<double>(total), std::exp(nll_sum / static_cast<double>(n_pred)), left,
                 on_terminal ? "   " : "\n");
    std::fflush(stderr);
  };
  for (std::int64_t start = 0; start < total && !Interrupt::interrupted(); start += ctx) {
    const std::int64_t n = std::min(ctx, total - start);  // predictions of this window
    State state = model.new_state();
    for (std::int64_t off = 0, m = 0; off < n && !Interrupt::interrupted(); off += m) {
      m = model.config().prompt_piece(off, n - off, kPieceTokens);  // the window's state starts at 0
      logits.resize(static_cast<std::size_t>(m * width));
      std::span<const std::int32_t> in(ids.data() + start + off, static_cast<std::size_t>(m));
      if (Status st = model.prefill(in, state, LogitsMode::kAll, logits.data()); !st.ok()) fail(st.message());
      for (std::int64_t i = 0; i < m; ++i) {
        std::span<const float> row(logits.data() + i * width, static_cast<std::size_t>(width));
        if (Status st = log_softmax(row, vocab, lp); !st.ok()) fail(st.message());
        nll_sum -= lp[static_cast<std::size_t>(ids[static_cast<std::size_t>(start + off + i + 1)])];
        ++n_pred;
      }
      progress(false);
    }
  }
  interrupt.reset();
  progress(true);
  if (shown && on_terminal) std::fprintf(stderr, "\n");
  if (Interrupt::interrupted()) {
    std::fprintf(stderr, "interrupted (%s) after %lld of %lld predictions%s\n", Interrupt::reason(), static_cast<long long>(n_pred),
                 static_cast<long long>(total), n_pred > 0 ? ": the figures below cover those" : "");
    if (n_pred == 0) Interrupt::end_as_interrupted();
  }
  const double mean = nll_sum / static_cast<double>(n_pred);
  // The tier last: the figures depend on it, and the default (auto) differs by CPU.
  std::printf("predictions: %lld\nmean_nll: %.6f\nperplexity: %.4f\nprecision: %s\n", static_cast<long long>(n_pred), mean, std::exp(mean),
              precision_name(model.precision()));
  if (Interrupt::interrupted()) Interrupt::end_as_interrupted();
}

const CommandRegistrar kRegister("perplexity", 40, [](CLI::App& app) {
  auto a = std::make_shared<PplArgs>();
  CLI::App* cmd = app.add_subcommand("perplexity", "Mean NLL and perplexity of a text or of token ids");
  cmd->add_option("-m,--model", a->model, "Model directory or HF repo id (default: $MAMBA_MODEL, else the embedded model)")
      ->check(non_empty("a model directory or HF repo id ORG/NAME (leave -m out for the default model)"));
  cmd->add_option("--tokenizer", a->tokenizer, "tokenizer.json to use instead of the model directory's (a file, a directory, or a cached HF repo id such as EleutherAI/gpt-neox-20b)")
      ->check(non_empty("a tokenizer.json file, a directory holding one, or an HF repo id ORG/NAME"));
  cmd->add_option("-f,--file", a->text_file, "UTF-8 text file to score (tokenized with the model's tokenizer; a leading byte-order mark skipped); - = stdin")
      ->check(non_empty("a file path, or - for stdin"));
  cmd->add_option("--ids-file", a->ids_file, "File of token ids (whitespace- or comma-separated); - = stdin")
      ->check(non_empty("a file path, or - for stdin"));
  cmd->add_option("--ctx", a->ctx, "Window size N: windows of N+1 ids sharing their boundary id (default: one window)")
      ->check(positive_int64());
  cmd->add_option("-t,--threads", a->threads, "CPU threads, 0 to 1024 (0 = all, or OMP_NUM_THREADS when set)")->check(thread_count());
  cmd->add_option("--precision", a->precision, kPrecisionHelp)
      ->transform(precision_tier())
      ->capture_default_str();
  cmd->allow_extras();  // a bare word is refused by run() with the -f hint (CLI11 said only "not expected")
  cmd->callback([a, cmd] { run(*a, *cmd); });
});

}  // namespace
}  // namespace mamba::cli
