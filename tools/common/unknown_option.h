// Options a program does not have, found before CLI11 parses the command line.
//
// CLI11 reads "-hello" as the flags -h -e -l -l -o (`tokenize "-hello"` printed the help and exited
// 0; `tokenize -time` took "ime" for --tokenizer) and llama.cpp's -fa as -f "a" (its -hf printed the
// help). mamba-cli and mamba-server therefore look for an unknown option first and name it, with
// what it means (unknown_option_note).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "common/llama_flags.h"

namespace mamba::tools {

/// The first argument of argv[first, argc) that starts with '-' but names none of `cmd`'s options.
/// One dash takes one letter: "-x", or "-x" with a number attached ("-n5": no llama.cpp flag starts
/// with a digit); anything else after one dash is unknown. Values of options are skipped; "--" ends
/// the options; "-5" is a number. Empty when every option is known.
std::string unknown_option(const CLI::App& cmd, int argc, char** argv, int first);

/// What the error for unknown option `bad` of `cmd` says it is: llama.cpp's meaning of it and the
/// way in `program` (llama_flag_hint), else, for several letters after one dash, how options are
/// written ("one dash takes one letter; a value goes after a space: -p Hello"). Empty when neither applies.
std::string unknown_option_note(const CLI::App& cmd, const std::string& bad, LlamaHintFor program);

}  // namespace mamba::tools
