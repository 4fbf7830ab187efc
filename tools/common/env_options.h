// Options read from the environment when not given as flags (mamba-server: MAMBA_PORT for --port,
// as TGI's launcher reads PORT and llama.cpp's server LLAMA_ARG_PORT): containers and service
// managers set them, and a secret such as the API key then stays out of the process list.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace mamba::tools {

/// The variable a long flag is read from: `prefix` + the name in upper snake case
/// ("--max-batch-size", "MAMBA_" → "MAMBA_MAX_BATCH_SIZE").
std::string env_name_for_flag(const std::string& long_flag, const std::string& prefix);

/// Gives every option of `app` that has a long name an environment variable (env_name_for_flag),
/// except --help, --version and the long names in `except` (options whose variable the program
/// reads itself). CLI11 then takes a set, non-empty variable for a flag not on the command line
/// (a flag given wins), and --help shows "(Env:NAME)". Call after the options are added.
void read_options_from_env(CLI::App& app, const std::string& prefix, const std::vector<std::string>& except = {});

/// The options whose value will come from the environment in this run: their variable is set and
/// non-empty and the flag (any of its names, alone or as --flag=VALUE) is not among argv[1..argc).
/// One entry per option: "--port (MAMBA_PORT)". Call before parsing.
std::vector<std::string> options_from_env(const CLI::App& app, int argc, const char* const* argv);

/// Variables of the environment that start with `prefix`, are none of the options' variables nor
/// `also_read`, and are within two edits of one of those (a typo: MAMBA_APIKEY for MAMBA_API_KEY,
/// which would leave the server without its key), each as "MAMBA_APIKEY (did you mean
/// MAMBA_API_KEY?)". Other variables of the prefix (micromamba's MAMBA_ROOT_PREFIX) are left alone.
std::vector<std::string> env_near_misses(const CLI::App& app, const std::string& prefix, const std::vector<std::string>& also_read);

/// The entries joined by ", ": "--port (MAMBA_PORT), --api-key (MAMBA_API_KEY)".
std::string env_list(const std::vector<std::string>& from_env);

/// "" when `from_env` is empty, else a line for an error message naming them:
/// "note: from the environment: --port (MAMBA_PORT), --api-key (MAMBA_API_KEY)\n".
std::string env_note(const std::vector<std::string>& from_env);

}  // namespace mamba::tools
