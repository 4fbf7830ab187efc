// Command-line parsing shared by the bench programs: parse errors look like mamba-cli's.
#pragma once

#include <CLI/CLI.hpp>

#include "common/option_rules.h"

#include <cstdio>
#include <optional>
#include <string>

#include "mamba/checkpoint.h"

namespace mamba::bench {

/// Parses argv into `app` (numbers as plain decimal: cli::strict_numbers). Returns nullopt to go on, else the exit status to return from main:
/// 0 after --help, 2 after a parse error, which prints "error: ..." and the --help hint as mamba-cli (CLI11_PARSE's own
/// exit codes, 105 and others, told a script nothing).
inline std::optional<int> parse_args(CLI::App& app, int argc, char** argv) {
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "error: " + std::string(e.what()) + "\nRun with --help for more information.\n";
  });
  // CLI11's delimiter split drops empty items ("16,,32" read as 16,32): a list with one is refused.
  for (int i = 1; i < argc; ++i) {
    const std::string v = argv[i];
    const bool list = !v.empty() && v[0] != '-' && v.find(',') != std::string::npos &&
                      v.find_first_not_of("0123456789,") == std::string::npos;
    if (list && (v.front() == ',' || v.back() == ',' || v.find(",,") != std::string::npos)) {
      std::fprintf(stderr, "error: %s%s: empty item in the comma-separated list \"%s\"\n", i > 1 ? argv[i - 1] : "",
                   i > 1 ? "" : "argument", v.c_str());
      return 2;
    }
  }
  cli::strict_numbers(app);  // "010" is ten, "" and "0x10" are errors (CLI11 alone: 8, 0, 16)
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return std::nullopt;
}

/// The model a bench measures when none is given, as mamba-cli resolves it ($MAMBA_MODEL, named
/// when it does not resolve; else the embedded model): nullopt to go on with `dir` set, else the
/// exit status 2 after one "error: ..." line.
inline std::optional<int> default_model(std::string& dir) {
  auto def = resolve_default_model();
  if (!def.ok()) {
    std::fprintf(stderr, "error: %s\n", def.error().message.c_str());
    return 2;
  }
  dir = *def;
  return std::nullopt;
}

}  // namespace mamba::bench
