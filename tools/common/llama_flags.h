// llama.cpp's flags that mamba-cli and mamba-server do not have: what a llama.cpp user typing one
// should do here.
//
// llama.cpp spells many options as one dash and several letters (-ngl, -fa, -hf, -np, -tb, -cnv,
// ...). CLI11 reads such an argument as bundled one-letter options or as one letter with its value
// attached (-fa was -f "a", -hf printed the help), so both programs refuse them before parsing
// (unknown_option.h) and name the flag's equivalent there, if any, from this table.
#pragma once

#include <string>
#include <string_view>

namespace mamba::tools {

/// The program a hint is for: some llama.cpp flags have another equivalent in each (llama.cpp's -c
/// sizes a context: mamba-cli perplexity's scoring window is --ctx, as llama-perplexity's -c is; a
/// server request's bound is --max-total-tokens).
enum class LlamaHintFor { kCli, kPerplexity, kServer };

/// For a llama.cpp option that `program` has no option of the same name for (`flag` as typed, up to
/// an '='; short or long form, e.g. "-ngl", "--n-gpu-layers"): "llama.cpp's -ngl/--gpu-layers/--n-gpu-layers?
/// " followed by what to do in `program` (the equivalent flag, or why none is needed). Empty for
/// other names, and for a llama.cpp flag with no meaning to add there (mamba-cli's -a).
std::string llama_flag_hint(std::string_view flag, LlamaHintFor program);

}  // namespace mamba::tools
