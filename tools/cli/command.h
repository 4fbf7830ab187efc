// mamba-cli subcommand registry: each tools/cli/cmd_*.cc defines one subcommand and registers it
// with a static `CommandRegistrar`, so subcommands live in their own files.
#pragma once

#include <CLI/CLI.hpp>

#include "mamba/checkpoint.h"

#include <functional>
#include <string>
#include <vector>

namespace mamba::cli {

/// Adds the subcommand (options + callback) to `app`. The callback reports failure by throwing
/// CLI::RuntimeError(exit_code) after printing a one-line "error: ..." message to stderr.
using CommandSetup = std::function<void(CLI::App& app)>;

struct CommandInfo {
  std::string name;
  int order;  ///< position in --help
  CommandSetup setup;
};

std::vector<CommandInfo>& command_registry();

/// CLI11 validator: the value must not start with '-' (unsigned options would otherwise wrap around).
inline CLI::Validator non_negative_integer() {
  return CLI::Validator(
      [](std::string& v) { return (!v.empty() && v[0] == '-') ? std::string("must be a non-negative integer, got ") + v : std::string(); },
      "NONNEGATIVE");
}

struct CommandRegistrar {
  CommandRegistrar(std::string name, int order, CommandSetup setup) {
    command_registry().push_back({std::move(name), order, std::move(setup)});
  }
};

/// Path of the embedded default model (see mamba::default_model_path in checkpoint.h).
using mamba::default_model_path;

}  // namespace mamba::cli
