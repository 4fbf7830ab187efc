// mamba-cli: run, inspect, tokenize, perplexity, ... (one file per subcommand in tools/cli/).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/command.h"
#include "common/option_rules.h"
#include "common/out_of_memory.h"
#include "common/unknown_option.h"

namespace mamba::cli {

std::vector<CommandInfo>& command_registry() {
  static std::vector<CommandInfo> registry;
  return registry;
}

namespace {

/// What the error for unknown option `bad` of `cmd` adds in parentheses: what it is
/// (tools::unknown_option_note: llama.cpp's flag and the way here, or how options are written);
/// and where a subcommand takes positional arguments, that text starting with '-' goes after "--".
std::string unknown_option_notes(const CLI::App& cmd, const std::string& bad) {
  std::vector<std::string> notes;
  const auto program = cmd.get_name() == "perplexity" ? tools::LlamaHintFor::kPerplexity : tools::LlamaHintFor::kCli;
  if (std::string note = tools::unknown_option_note(cmd, bad, program); !note.empty()) notes.push_back(std::move(note));
  if (!cmd.get_options([](const CLI::Option* o) { return !o->nonpositional(); }).empty())  // tokenize's text, inspect's model
    notes.push_back(fmt::format("an argument that starts with '-' and is not an option goes after --, e.g. mamba-cli {} -- {}",
                                cmd.get_name(), bad));
  std::string out;
  for (const std::string& n : notes) out += (out.empty() ? " (" : "; ") + n;
  return out.empty() ? out : out + ")";
}

}  // namespace

}  // namespace mamba::cli

int main(int argc, char** argv) {
  mamba::tools::exit_cleanly_when_out_of_memory();
  CLI::App app{"mamba.cpp: run Mamba-family language models (Mamba-1, Falcon-Mamba, Mamba-2)", "mamba-cli"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("mamba-cli ") + MAMBA_VERSION);
  // A repeated option takes its last value (llama.cpp, TGI's launcher), so a wrapper script's
  // defaults can be overridden by appending; list options (--stop) say TakeAll themselves.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  // Parse errors look like every other error of mamba-cli: one "error: ..." line, exit 2.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "error: " + std::string(e.what()) + "\nRun with --help for more information.\n";
  });
  // Warnings (spdlog::warn) read as mamba-cli's other diagnostics: "warning: ..." on stderr.
  spdlog::set_default_logger(spdlog::stderr_logger_st("mamba-cli"));
  spdlog::set_pattern("%l: %v");
  auto& reg = mamba::cli::command_registry();
  std::sort(reg.begin(), reg.end(), [](const auto& a, const auto& b) { return a.order < b.order; });
  for (auto& c : reg) c.setup(app);
  // `mamba-cli run --version` too (the version is the program's; each subcommand takes the flag).
  for (CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    sub->set_version_flag("--version", std::string("mamba-cli ") + MAMBA_VERSION);
  // Words after a "--" that ended a subcommand's options come to mamba-cli itself when the
  // subcommand takes no positional argument, or has all it takes (CLI11 hands them up; `run -- some
  // words` was refused without run's "use -p" hint). They are the subcommand's (extra_words): run and
  // perplexity refuse them with their hint, tokenize encodes them; one that takes no extras
  // (inspect, quantize) refuses them before it runs, as CLI11 did (in the order typed).
  // A subcommand that calls allow_extras() must read them (extra_words / refuse_extra_arguments):
  // nothing else refuses its words after "--".
  app.allow_extras();  // after the subcommands are added: each inherits the setting it is created with
  app.parse_complete_callback([&app] {
    std::vector<std::string> words = app.remaining();
    if (words.empty()) return;
    for (const CLI::App* sub : app.get_subcommands())
      if (!sub->get_allow_extras()) throw CLI::ExtrasError(sub->get_name(), std::vector<std::string>(words.rbegin(), words.rend()));
  });
  mamba::cli::strict_numbers(app);  // "010" is ten, "" and "0x10" are errors (CLI11 alone: 8, 0, 16)
  std::string names;
  for (const auto& c : reg) names += (names.empty() ? "" : ", ") + c.name;
  // The first argument that is not an option names the subcommand (mamba-cli has no top-level
  // options taking values): an unknown one is named, with the valid ones, instead of CLI11's
  // "A subcommand is required".
  if (argc > 1 && argv[1][0] != '-' &&
      std::none_of(reg.begin(), reg.end(), [&](const auto& c) { return c.name == argv[1]; })) {
    std::fprintf(stderr, "error: unknown subcommand '%s' (expected one of: %s)\nRun with --help for more information.\n",
                 argv[1], names.c_str());
    return 2;
  }
  // mamba-cli's own options are --help and --version; any other option before the subcommand
  // (mamba-cli --bogus, mamba-cli -m DIR run) is named, not reported as a missing subcommand.
  if (argc > 1 && argv[1][0] == '-' && std::strcmp(argv[1], "-h") != 0 && std::strcmp(argv[1], "--help") != 0 &&
      std::strcmp(argv[1], "--version") != 0) {
    if (std::strcmp(argv[1], "-v") == 0 || std::strcmp(argv[1], "-V") == 0) {  // no short form: it is not an option after it either
      std::fprintf(stderr, "error: unknown option '%s' (the version is --version)\nRun with --help for more information.\n", argv[1]);
      return 2;
    }
    std::fprintf(stderr, "error: unknown option '%s' before the subcommand (options go after it: mamba-cli SUBCOMMAND "
                 "[OPTIONS]; subcommands: %s)\nRun with --help for more information.\n", argv[1], names.c_str());
    return 2;
  }
  if (argc == 1) {
    std::fprintf(stderr, "error: a subcommand is required: one of %s\nRun with --help for more information.\n", names.c_str());
    return 2;
  }
  const CLI::App* sub = nullptr;  // the subcommand (argv[1] is a registered name or an option here)
  for (const CLI::App* c : app.get_subcommands([](const CLI::App*) { return true; }))
    if (c->get_name() == argv[1]) sub = c;
  if (const std::string bad = sub ? mamba::tools::unknown_option(*sub, argc, argv, 2) : ""; !bad.empty()) {
    std::fprintf(stderr, "error: unknown option '%s' of %s%s\nRun with --help for more information.\n", bad.c_str(), argv[1],
                 mamba::cli::unknown_option_notes(*sub, bad).c_str());
    return 2;
  }
  // With a subcommand named, mamba-cli's own --help / --version are off: the words after a "--" that
  // CLI11 hands up to mamba-cli (above) would otherwise be read as them again (`tokenize hello --
  // --help` printed the help, `run -- -hello` too, as -h). The subcommands keep their own -h/--help.
  if (sub != nullptr) {
    app.set_help_flag();
    app.set_version_flag();
  }
  int rc = 0;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    rc = app.exit(e);
    rc = rc == 0 ? 0 : 2;  // --help / --version exit 0
  }
  // Output that could not be written (a full disk, a closed stdout) fails the command, as in
  // coreutils: a script capturing --json must not get a truncated file and exit 0.
  const bool earlier = std::ferror(stdout) != 0;  // errno of that failed write is gone by now
  errno = 0;
  if (std::fflush(stdout) != 0 || earlier) {
    std::fprintf(stderr, "error: write error on standard output%s%s (the output is incomplete)\n", errno ? ": " : "",
                 errno ? std::strerror(errno) : "");
    return 2;  // as every other error of mamba-cli (docs/USAGE.md)
  }
  return rc;
}
