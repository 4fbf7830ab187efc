// llama.cpp's flags that mamba-cli does not have: what a llama.cpp user typing one should do here.
//
// llama.cpp spells many options as one dash and several letters (-ngl, -fa, -hf, -np, -tb, -cnv,
// ...). CLI11 reads such an argument as bundled one-letter options or as one letter with its value
// attached (-fa was -f "a", -hf printed the help), so the program refuses them before parsing
// (unknown_option.h) and names the flag's equivalent here, if any, from this table.
#pragma once

#include <string>
#include <string_view>

namespace mamba::tools {

/// For a llama.cpp option that mamba-cli has no option of the same name for (`flag` as typed, up to
/// an '='; short or long form, e.g. "-ngl", "--n-gpu-layers"): "llama.cpp's -ngl/--n-gpu-layers?
/// " followed by what to do here (the equivalent flag, or why none is needed). Empty for other names.
std::string llama_flag_hint(std::string_view flag);

}  // namespace mamba::tools
