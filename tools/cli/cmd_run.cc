// `mamba-cli run`: generate text (or ids) from a prompt, streamed to stdout as tokens are produced.
//
// Default sampling is greedy (deterministic, HF generate's default for these checkpoints, which
// ship no do_sample in generation_config.json). --temp T samples at temperature T; --top-k,
// --top-p, --min-p, --typical-p alone turn sampling on at temperature 1 (TGI's rule).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/interrupt.h"
#include "cli/run_common.h"
#include "io/generation_config.h"
#include "mamba/generate.h"
#include "common/option_rules.h"

namespace mamba::cli {
namespace {

struct RunArgs {
  std::string model, tokenizer, prompt, prompt_file, prompt_ids;
  int n_predict = 128;
  int threads = 0;
  std::string precision = "auto";
  std::vector<std::string> logit_bias;  ///< --logit-bias items, ID+BIAS / ID-BIAS (llama.cpp's form)
  float temp = 1.0f;
  GenerateOptions gen;
  std::uint64_t seed = 0;
  bool seed_random = false;  ///< --seed -1: a random seed, as without --seed (llama.cpp's -1)
  bool json = false, echo = false;
};

nlohmann::json logprob_json(float v) {
  if (std::isfinite(v)) return static_cast<double>(v);
  return nullptr;  // -inf (an id outside the tokenizer) has no JSON number
}

/// "1 token", "2 tokens": `n` and `noun`, plural unless n is 1.
std::string count_of(std::size_t n, const char* noun) { return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s"); }

/// Whether two descriptors write to the same file or pipe (stdout and stderr into one log).
bool same_destination(int fd1, int fd2) {
  struct stat s1 {}, s2 {};
  return ::fstat(fd1, &s1) == 0 && ::fstat(fd2, &s2) == 0 && s1.st_dev == s2.st_dev && s1.st_ino == s2.st_ino;
}

/// One --logit-bias item, llama.cpp's TOKEN_ID(+|-)BIAS (e.g. 15043+1, 0-100, 0-inf), or a clear error.
std::pair<std::int32_t, float> parse_logit_bias(const std::string& item) {
  const std::size_t sign = item.find_first_of("+-");
  const std::string id_text = item.substr(0, sign);
  const bool digits = !id_text.empty() && id_text.size() <= 10 && id_text.find_first_not_of("0123456789") == std::string::npos;
  char* end = nullptr;
  const std::string bias_text = sign == std::string::npos ? std::string() : item.substr(sign);
  const double bias = bias_text.size() > 1 ? std::strtod(bias_text.c_str(), &end) : 0.0;
  if (!digits || std::stoll(id_text) > INT32_MAX || bias_text.size() < 2 || end != bias_text.c_str() + bias_text.size())
    fail_flag(fmt::format("--logit-bias: expected TOKEN_ID+BIAS or TOKEN_ID-BIAS (e.g. 15043+1, 0-100, 0-inf), got '{}'", item));
  // Each item in range as given (a sum of repeats is clamped, not refused), as the server's rule.
  if (!(bias >= -100.0 && bias <= 100.0) && bias != -std::numeric_limits<double>::infinity())
    fail_flag(fmt::format("--logit-bias '{}': the bias must be in [-100, 100] (or -inf: banned)", item));
  if (bias != 0.0 && static_cast<float>(bias) == 0.0f)
    fail_flag(fmt::format("--logit-bias '{}': the bias is below 7.1e-46 in magnitude, which a 32-bit float rounds to 0", item));
  return {static_cast<std::int32_t>(std::stoll(id_text)), static_cast<float>(bias)};
}

void run(const RunArgs& a, CLI::App& cmd) {
  refuse_extra_arguments(cmd, "use -p \"...\" for the prompt (in quotes when it has spaces), or -f FILE, or give it on stdin");
  GenerateOptions opts = a.gen;
  // A repeated id adds up, as llama.cpp's biases do (the library takes each id once), clamped to
  // [-100, 100]; -inf bans whatever else is given.
  for (const std::string& item : a.logit_bias) {
    const auto [id, bias] = parse_logit_bias(item);
    auto& lb = opts.sampling.logit_bias;
    auto same = std::find_if(lb.begin(), lb.end(), [id = id](const auto& e) { return e.first == id; });
    if (same == lb.end()) {
      lb.emplace_back(id, bias);
    } else if (same->second != -std::numeric_limits<float>::infinity()) {  // banned stays banned
      same->second = bias == -std::numeric_limits<float>::infinity() ? bias : std::clamp(same->second + bias, -100.0f, 100.0f);
    }
  }
  // -1: no limit (until EOS, or Ctrl-C), as llama.cpp's -n -1.
  opts.max_new_tokens = a.n_predict == -1 ? std::numeric_limits<int>::max() : a.n_predict;
  if (cmd.count("--temp")) {
    opts.sampling.temperature = a.temp;
    opts.sampling.do_sample = true;
  }
  if (cmd.count("--seed") && !a.seed_random) {
    opts.sampling.seed = a.seed;
    opts.sampling.has_seed = true;
  }
  if (a.n_predict < -1) fail_flag(fmt::format("-n/--n-predict = {} must be >= 0, or -1 for no limit", a.n_predict));
  if (Status st = opts.sampling.validate(); !st.ok()) fail_flag(st.message());
  if (opts.sampling.has_seed && !opts.sampling.sampling())
    std::fprintf(stderr, "note: --seed has no effect: decoding is greedy (give --temp, or a --top-k/--top-p/--min-p/--typical-p that restricts)\n");
  if (cmd.count("--temp") && a.temp == 0.0f) {
    std::string ignored;
    for (const char* f : {"--top-k", "--top-p", "--min-p", "--typical-p"})
      if (cmd.count(f)) ignored += ignored.empty() ? f : std::string(", ") + f;
    if (!ignored.empty()) std::fprintf(stderr, "note: %s: no effect with --temp 0 (greedy decoding)\n", ignored.c_str());
  }
  const int sources = (cmd.count("--prompt") > 0) + (cmd.count("--file") > 0) + (cmd.count("--prompt-ids") > 0);
  if (sources > 1) fail_flag("give at most one of -p/--prompt, -f/--file, --prompt-ids");
  if (!a.json && (cmd.count("--top-logprobs") || cmd.count("--prompt-logprobs")))
    fail_flag("--top-logprobs and --prompt-logprobs need --json (the streamed text has no place for them)");
  for (const std::string& s : opts.stop) {
    if (s.empty()) fail_flag("--stop: an empty stop string would stop before the first token");
    // The generated text is valid UTF-8, so a stop string that is not could never match.
    if (Status st = require_utf8(s, "--stop"); !st.ok()) fail(st.message());
  }

  // A bad -f FILE or --prompt-ids is reported before the (slow) model load; -f - (stdin) is read
  // after it, once the tokenizer is known to exist (as a prompt on stdin without -f).
  std::string prompt_text;
  const bool prompt_from_stdin = cmd.count("--file") ? a.prompt_file == "-" : !cmd.count("--prompt") && !cmd.count("--prompt-ids");
  if (cmd.count("--file") && !prompt_from_stdin) {
    auto text = read_text_file(a.prompt_file);  // UTF-8 checked as it is read
    if (!text.ok()) fail(text.error().message);
    prompt_text = std::move(*text);
    drop_final_newline(prompt_text);
  }
  std::vector<std::int32_t> prompt;
  if (cmd.count("--prompt-ids")) {
    auto ids = parse_ids(a.prompt_ids, "--prompt-ids");
    if (!ids.ok()) fail_flag(ids.error().message);  // a flag's value (a file's ids, --ids-file, are not)
    prompt = std::move(*ids);
    if (prompt.empty()) fail_flag("--prompt-ids: no token ids (the prompt would be empty)");  // before the load
  }

  auto loaded = load_model_and_tokenizer(a.model, a.threads, a.precision, a.tokenizer);
  if (!loaded.ok()) fail(loaded.error().message);
  Model& model = *loaded->model;
  const Tokenizer* tok = loaded->tokenizer ? &*loaded->tokenizer : nullptr;
  for (const auto& [id, bias] : opts.sampling.logit_bias)
    if (id >= vocab_limit(tok, model))
      fail_flag(fmt::format("--logit-bias: token id {} is outside the vocabulary [0, {})", id, vocab_limit(tok, model)));
  if (cmd.count("--prompt-ids")) {
    // Named as parse_ids and perplexity --ids-file name items (1-based), before generate() would
    // name the 0-based position.
    const std::int64_t vocab = vocab_limit(tok, model);
    for (std::size_t i = 0; i < prompt.size(); ++i)
      if (prompt[i] >= vocab)
        fail_flag(fmt::format("--prompt-ids: token id {} (item {}) is outside the vocabulary [0, {}){}", prompt[i], i + 1, vocab,
                              vocab_limit_source(tok, model)));
  }
  std::fprintf(stderr, "model: %s (%s, %lld layers%s%s)\n", loaded->dir.c_str(), arch_name(model.config().arch),
               static_cast<long long>(model.config().n_layer), precision_note(model, a.precision).c_str(), tok ? "" : ", no tokenizer");
  // HF generate() samples where the model's generation_config.json says do_sample: true; run stays
  // greedy unless a sampling flag is given (as TGI; vLLM applies the file), and says so.
  if (!opts.sampling.sampling() && !cmd.count("--temp"))
    if (auto note = io::generation_sampling_note(loaded->dir); !note.empty())
      std::fprintf(stderr, "note: %s; run does not apply it: decoding is greedy (give --temp, --top-k, --top-p, --min-p or --typical-p to sample)\n",
                   note.c_str());
  // A tokenizer given apart from the model (--tokenizer): the EOS fallback reads its directory's
  // tokenizer_config.json, not the model directory's (generate() would read the latter).
  if (!loaded->tokenizer_dir.empty() && !opts.ignore_eos && opts.eos_ids.empty()) {
    auto eos = model_eos_ids(model, tok, loaded->tokenizer_dir);
    if (!eos.ok()) fail(eos.error().message);
    opts.eos_ids = std::move(*eos);
    opts.ignore_eos = opts.eos_ids.empty();  // none: nothing to stop at (not the model directory's)
  }

  if (!cmd.count("--prompt-ids")) {
    if (!tok)  // before stdin is read
      fail(fmt::format("{} has no tokenizer.json: {}, or give the prompt as token ids with --prompt-ids 12,7,99", loaded->dir,
                       kGiveTokenizerHint));
    if (cmd.count("--prompt")) {
      prompt_text = a.prompt;
    } else if (prompt_from_stdin) {
      if (isatty(STDIN_FILENO)) std::fprintf(stderr, "reading the prompt from stdin (end with Ctrl-D; or use -p TEXT)\n");
      auto text = read_text_file("-");
      if (!text.ok()) fail(text.error().message);
      prompt_text = std::move(*text);
      drop_final_newline(prompt_text);
    }
    auto ids = tok->encode(prompt_text, /*add_special_tokens=*/true);
    if (!ids.ok()) fail(ids.error().message);
    prompt = std::move(*ids);
  }
  if (prompt.empty()) fail("the prompt is empty: give some text (-p, -f, stdin) or --prompt-ids");

  const bool long_prompt = static_cast<std::int64_t>(prompt.size()) > kPromptLogprobsPiece;
  if (long_prompt && isatty(STDERR_FILENO) == 1)  // no \r progress lines in redirected logs
    opts.on_prefill_progress = [t0 = std::chrono::steady_clock::now()](std::int64_t done, std::int64_t total) {
      // As perplexity's: the share done and the time left at the rate so far.
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double left = done > 0 ? secs / static_cast<double>(done) * static_cast<double>(total - done) : 0.0;
      std::fprintf(stderr, "\rprefill: %lld/%lld prompt tokens (%.1f%%), about %.0f s left   ", static_cast<long long>(done),
                   static_cast<long long>(total), 100.0 * static_cast<double>(done) / static_cast<double>(total), left);
      if (done == total) std::fprintf(stderr, "\n");
      std::fflush(stderr);
    };

  // --echo: the prompt's text (for --prompt-ids, the ids' text with special tokens left out, as in
  // the generated text), streamed before the generated text or, with --json, as "prompt".
  if (a.echo && tok != nullptr && cmd.count("--prompt-ids")) {
    auto text = tok->decode(prompt, /*skip_special_tokens=*/true);
    if (!text.ok()) fail(text.error().message);
    prompt_text = std::move(*text);
  }
  if (a.json && a.echo && tok == nullptr)
    std::fprintf(stderr, "note: --echo adds no \"prompt\" text to --json without a tokenizer (its \"prompt_ids\" hold the prompt)\n");

  std::function<bool(const TokenEvent&)> on_token;
  bool printed_id = false;  // ids are separated by one space, with none after the last
  if (!a.json && tok == nullptr) {
    // No tokenizer, no text: the ids themselves, space-separated (the prompt's first with --echo).
    if (a.echo)
      for (std::int32_t id : prompt) {
        std::printf(printed_id ? " %d" : "%d", id);
        printed_id = true;
      }
    std::fflush(stdout);
    on_token = [&printed_id](const TokenEvent& ev) {
      std::printf(printed_id ? " %d" : "%d", ev.id);
      printed_id = true;
      std::fflush(stdout);
      return true;
    };
  } else if (!a.json) {
    if (a.echo) {
      std::fwrite(prompt_text.data(), 1, prompt_text.size(), stdout);
      std::fflush(stdout);
    }
    on_token = [](const TokenEvent& ev) {
      if (!ev.text_delta.empty()) {
        std::fwrite(ev.text_delta.data(), 1, ev.text_delta.size(), stdout);
        std::fflush(stdout);
      }
      return true;
    };
  }
  // Ctrl-C or SIGTERM (cli/interrupt.h): stop after the current token, print what there is, end as that signal.
  std::optional<Interrupt> interrupt;
  interrupt.emplace();
  opts.should_stop = [] { return Interrupt::interrupted(); };  // also between prefill pieces: a long prompt stops soon
  // Streamed text needs no record of the tokens: an endless run (-n -1) keeps a constant memory.
  opts.keep_output = a.json;
  auto res = generate(model, tok, prompt, opts, [&on_token](const TokenEvent& ev) {
    return (!on_token || on_token(ev)) && !Interrupt::interrupted();
  });
  interrupt.reset();
  if (!res.ok()) fail(res.error().message);
  if (on_token && tok != nullptr && !res->cancelled_tail.empty()) {
    // Text a partial stop-string match held back when Ctrl-C came: --json's "text" has it too.
    std::fwrite(res->cancelled_tail.data(), 1, res->cancelled_tail.size(), stdout);
  }

  if (a.json) {
    nlohmann::json j;
    j["prompt_ids"] = prompt;
    std::vector<std::int32_t> ids;
    nlohmann::json logprobs = nlohmann::json::array(), top = nlohmann::json::array();
    for (const auto& ev : res->tokens) {
      ids.push_back(ev.id);
      logprobs.push_back(logprob_json(ev.logprob));
      if (opts.top_logprobs > 0) {
        nlohmann::json step_ids = nlohmann::json::array(), step_vals = nlohmann::json::array();
        for (const auto& [id, lp] : ev.top) {
          step_ids.push_back(id);
          step_vals.push_back(logprob_json(lp));
        }
        top.push_back({{"ids", step_ids}, {"logprobs", step_vals}});
      }
    }
    j["ids"] = ids;
    if (tok) j["text"] = res->text;
    if (tok && a.echo) j["prompt"] = prompt_text;  // as --echo prints it (OpenAI's echo, TGI's return_full_text)
    j["logprobs"] = logprobs;
    if (opts.top_logprobs > 0) j["top_logprobs"] = top;
    if (opts.prompt_logprobs) {
      nlohmann::json pl = nlohmann::json::array();
      pl.push_back(nullptr);  // the first prompt token has no context
      for (float v : res->prompt_logprobs) pl.push_back(logprob_json(v));
      j["prompt_logprobs"] = pl;
    }
    j["finish_reason"] = finish_reason_name(res->finish);
    j["precision"] = precision_name(model.precision());  // the tier that computed (auto's choice differs by CPU)
    if (opts.sampling.sampling()) j["seed"] = res->seed;
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else if (tok == nullptr || isatty(STDOUT_FILENO) || same_destination(STDOUT_FILENO, STDERR_FILENO)) {
    std::printf("\n");  // the stats below start on a line of their own (stdout kept exact when apart)
  }
  std::fflush(stdout);

  const auto n_gen = static_cast<double>(res->n_generated);
  const double pre_tps = res->prefill_seconds > 0 ? static_cast<double>(prompt.size()) / res->prefill_seconds : 0.0;
  const double gen_tps = res->decode_seconds > 0 ? n_gen / res->decode_seconds : 0.0;
  if (opts.sampling.sampling() && !opts.sampling.has_seed)
    std::fprintf(stderr, "seed: %llu (repeat with --seed)\n", static_cast<unsigned long long>(res->seed));
  // Cancelled during the prefill (no token, no decode time): the prompt's rate is not known.
  const bool prefill_cut = res->finish == FinishReason::kCancelled && res->n_generated == 0 && res->decode_seconds == 0;
  // The generation's end; the stats must not read as a finished run when stdout could not be
  // written (main() then fails the command with the write error).
  const std::string finish =
      (Interrupt::interrupted() ? fmt::format("cancelled ({})", Interrupt::reason()) : std::string(finish_reason_name(res->finish))) +
      (std::ferror(stdout) != 0 ? ", but the output could not be written" : "");
  const std::string prompt_rate = prefill_cut ? "prefill not finished" : fmt::format("{:.1f} tokens/s", pre_tps);
  std::fprintf(stderr, "finish: %s | prompt: %s, %s | generated: %s, %.1f tokens/s\n", finish.c_str(),
               count_of(prompt.size(), "token").c_str(), prompt_rate.c_str(), count_of(res->n_generated, "token").c_str(), gen_tps);
  if (Interrupt::interrupted()) Interrupt::end_as_interrupted();  // now that the output is complete
}

const CommandRegistrar kRegister("run", 10, [](CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Generate text from a prompt (streamed to stdout)");
  cmd->add_option("-m,--model", a->model, "Model directory or HF repo id (default: $MAMBA_MODEL, else the embedded model)")
      ->check(non_empty("a model directory or HF repo id ORG/NAME (leave -m out for the default model)"));
  cmd->add_option("--tokenizer", a->tokenizer, "tokenizer.json to use instead of the model directory's (a file, a directory, or a cached HF repo id such as EleutherAI/gpt-neox-20b)")
      ->check(non_empty("a tokenizer.json file, a directory holding one, or an HF repo id ORG/NAME"));
  cmd->add_option("-p,--prompt", a->prompt, "Prompt text");
  cmd->add_option("-f,--file", a->prompt_file, "Read the prompt from a file, pipe or - (stdin): UTF-8, a leading byte-order mark skipped")->check(non_empty("a file path, or - for stdin"));
  cmd->add_option("--prompt-ids", a->prompt_ids, "Prompt as token ids, e.g. 12,7,99 (for checkpoints without tokenizer)");
  cmd->add_option("-n,--n-predict", a->n_predict, "Maximum number of tokens to generate (-1: no limit, until EOS)")
      ->check(int32_value("from -1 (no limit) to 2147483647"))
      ->capture_default_str();
  cmd->add_option("--temp", a->temp, "Sample at this temperature (default: greedy; 0 = greedy)")->check(float32_range());
  cmd->add_option("--top-k", a->gen.sampling.top_k, "Keep the K most likely tokens (0 = off)")
      ->check(int32_value("from 0 (off) to 2147483647"));
  cmd->add_option("--top-p", a->gen.sampling.top_p, "Nucleus sampling mass in (0, 1] (1 = off)")->check(float32_range());
  cmd->add_option("--min-p", a->gen.sampling.min_p, "Drop tokens below min_p × the top probability (0 = off)")->check(float32_range());
  cmd->add_option("--typical-p", a->gen.sampling.typical_p, "Locally typical sampling mass in (0, 1] (1 = off)")->check(float32_range());
  cmd->add_option("--repeat-penalty", a->gen.sampling.repetition_penalty, "HF repetition penalty (> 0, 1 = off)")->check(float32_range());
  cmd->add_option("--frequency-penalty", a->gen.sampling.frequency_penalty, "OpenAI frequency penalty in [-2, 2]")->check(float32_range());
  cmd->add_option("--presence-penalty", a->gen.sampling.presence_penalty, "OpenAI presence penalty in [-2, 2]")->check(float32_range());
  cmd->add_option("-l,--logit-bias", a->logit_bias,
                  "Add BIAS in [-100, 100] to a token's logit before sampling, as TOKEN_ID+BIAS or TOKEN_ID-BIAS "
                  "(repeatable, a repeated id adds up; TOKEN_ID-inf bans the token)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option_function<std::string>(
         "--seed",
         [a](const std::string& v) {
           a->seed_random = v == "-1";
           if (!a->seed_random) std::from_chars(v.data(), v.data() + v.size(), a->seed);  // checked below
         },
         "RNG seed 0 to 2^64-1 (same seed + same input = same output); -1: a random one (as without --seed)")
      ->check(CLI::Validator(
          [](std::string& v) {
            const std::string e = v == "-1" ? std::string() : uint64_value()(v);
            return e.empty() ? e : fmt::format("expected an integer from 0 to {}, or -1 for a random seed, got {}",
                                               std::numeric_limits<std::uint64_t>::max(), v);
          },
          "UINT64|-1"));
  cmd->add_option("--stop", a->gen.stop, "Stop string (repeatable); its text is not printed")
      ->expected(1)
      ->allow_extra_args(false)  // else CLI11 splits a "[...]" value on commas, dropping the brackets
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_flag("--ignore-eos", a->gen.ignore_eos, "Keep generating after the EOS token");
  cmd->add_option("-t,--threads", a->threads, "CPU threads, 0 to 1024 (0 = all, or OMP_NUM_THREADS when set)")->check(thread_count());
  cmd->add_option("--precision", a->precision, kPrecisionHelp)
      ->transform(precision_tier())
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "Print one JSON object: ids, text, logprobs, ... instead of streaming");
  cmd->add_option("--top-logprobs", a->gen.top_logprobs, "With --json: the K most likely tokens per step (0 to 100)")
      ->check(decimal_int_in(0, 100, "", "INT in [0, 100]"));
  cmd->add_flag("--prompt-logprobs", a->gen.prompt_logprobs, "With --json: logprob of each prompt token");
  cmd->add_flag("--echo", a->echo, "Print the prompt text before the generated text (with --json: as \"prompt\")");
  cmd->allow_extras();  // a bare word is refused by run() with the -p hint (CLI11 said only "not expected")
  cmd->callback([a, cmd] { run(*a, *cmd); });
});

}  // namespace
}  // namespace mamba::cli
