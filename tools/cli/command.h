// mamba-cli subcommand registry: each tools/cli/cmd_*.cc defines one subcommand and registers it
// with a static `CommandRegistrar`, so subcommands live in their own files.
#pragma once

#include <CLI/CLI.hpp>

#include "common/option_rules.h"

#include "mamba/checkpoint.h"
#include "mamba/thread_limit.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <functional>
#include <limits>
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

/// CLI11 validator: a decimal integer that fits an int option (CLI11 alone says "Could not convert"
/// past 2^31 − 1); `range` words the accepted values, e.g. "from -1 (no limit) to 2147483647". The
/// option's own rules (checked after parsing) still apply inside that range.
inline CLI::Validator int32_value(std::string range) {
  return CLI::Validator(
      [range](std::string& v) {
        int n = 0;
        const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
        if (ec == std::errc() && p == v.data() + v.size() && !v.empty()) return std::string();
        return fmt::format("expected an integer {}, got {}", range, v);
      },
      "INT32");
}

/// CLI11 validator: a decimal integer in [1, 2^63 − 1] (e.g. a window size), checked at parse time
/// like every other flag (so the error ends with "Run with --help").
inline CLI::Validator positive_int64() {
  return CLI::Validator(
      [](std::string& v) {
        std::int64_t n = 0;
        const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
        if (ec == std::errc() && p == v.data() + v.size() && !v.empty() && n >= 1) return std::string();
        return fmt::format("expected an integer from 1 to {}, got {}", std::numeric_limits<std::int64_t>::max(), v);
      },
      "INT >= 1");
}

/// CLI11 validator: a decimal integer in [0, 2^64 − 1] (CLI11 itself clamps larger values to the
/// maximum silently).
inline CLI::Validator uint64_value() {
  return CLI::Validator(
      [](std::string& v) {
        std::uint64_t n = 0;
        const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
        if (ec == std::errc() && p == v.data() + v.size() && !v.empty()) return std::string();
        return fmt::format("expected an integer from 0 to {}, got {}", std::numeric_limits<std::uint64_t>::max(), v);
      },
      "UINT64");
}

struct CommandRegistrar {
  CommandRegistrar(std::string name, int order, CommandSetup setup) {
    command_registry().push_back({std::move(name), order, std::move(setup)});
  }
};

/// Path of the embedded default model (see mamba::default_model_path in checkpoint.h).
using mamba::default_model_path;

}  // namespace mamba::cli
