// Command-line parsing shared by the bench programs: parse errors look like mamba-cli's.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/option_rules.h"

#include <optional>
#include <string>

namespace mamba::bench {

/// Parses argv into `app` (numbers as plain decimal: cli::strict_numbers). Returns nullopt to go on, else the exit status to return from main:
/// 0 after --help, 2 after a parse error, which prints one "error: ..." line (CLI11_PARSE's own
/// exit codes, 105 and others, told a script nothing).
inline std::optional<int> parse_args(CLI::App& app, int argc, char** argv) {
  app.failure_message([](const CLI::App*, const CLI::Error& e) { return "error: " + std::string(e.what()) + "\n"; });
  cli::strict_numbers(app);  // "010" is ten, "" and "0x10" are errors (CLI11 alone: 8, 0, 16)
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return std::nullopt;
}

}  // namespace mamba::bench
