// llama.cpp's option names that mamba-cli does not use, and what to do here instead.
#include "common/llama_flags.h"

#include <sstream>

#include <fmt/format.h>

namespace mamba::tools {
namespace {

struct LlamaFlag {
  const char* names;  ///< llama.cpp's spellings, separated by spaces
  const char* advice;
};

constexpr const char* kCpuOnly = "mamba.cpp computes on the CPU only (no GPU offload): leave it out";

constexpr const char* kNoKvCache = "Mamba models keep a fixed-size fp32 state per sequence, not a KV cache: leave it out";
constexpr const char* kNotInteractive =
    "mamba-cli run is not interactive and has no chat mode: it continues the prompt given with -p \"...\", -f FILE or on "
    "stdin (multi-line text works in all three)";

// llama-cli / llama-perplexity / llama-server options (common/arg.cpp) a user is likely to carry
// over, whose names mamba-cli does not use. The one-letter ones are here for their hint only: an
// unknown one-letter option was already refused.
constexpr LlamaFlag kFlags[] = {
    {"-ngl --gpu-layers --n-gpu-layers", kCpuOnly},
    {"-sm --split-mode", kCpuOnly},
    {"-mg --main-gpu", kCpuOnly},
    {"-ts --tensor-split", kCpuOnly},
    {"-dev --device", kCpuOnly},
    {"-fa --flash-attn", "Mamba models have no attention: leave it out"},
    {"-ctk --cache-type-k", kNoKvCache},
    {"-ctv --cache-type-v", kNoKvCache},
    {"-nkvo --no-kv-offload", kNoKvCache},
    {"-c --ctx-size",
     "a Mamba model has no context window to size (its state does not grow with the text): leave it out; "
     "perplexity's scoring window is --ctx N"},
    {"-b --batch-size", "mamba.cpp sizes its prompt pieces itself: leave it out"},
    {"-ub --ubatch-size", "mamba.cpp sizes its prompt pieces itself: leave it out"},
    {"-hf -hfr --hf-repo",
     "-m takes a Hugging Face repo id (safetensors or pytorch_model.bin, not GGUF) from the local hub cache, e.g. "
     "-m state-spaces/mamba-130m-hf; mamba.cpp downloads nothing: fetch it first with huggingface-cli download ORG/NAME"},
    {"-hff --hf-file", "-m ORG/NAME picks the weights file of the repo itself (no GGUF): leave it out"},
    {"-mu --model-url", "mamba.cpp downloads nothing: download the model (huggingface-cli download ORG/NAME), then -m ORG/NAME or -m DIR"},
    {"-tb --threads-batch", "-t/--threads N sets the threads of prompt processing and generation alike"},
    {"-np --parallel",
     "mamba-cli run generates one sequence; mamba-server batches concurrent requests (--max-batch-size, "
     "--max-concurrent-requests)"},
    {"-cnv --conversation", kNotInteractive},
    {"-i --interactive", kNotInteractive},
    {"-if --interactive-first", kNotInteractive},
    {"-mli --multiline-input", kNotInteractive},
    {"-no-cnv --no-conversation", "not needed: mamba-cli run always continues the prompt as given, never chats: leave it out"},
    {"-sys --system-prompt", "mamba-cli run has no chat template: put the text at the start of the prompt"},
    {"-s --seed", "mamba-cli run's is --seed N"},
    {"-r --reverse-prompt", "the nearest here is run's --stop TEXT (generation ends at TEXT, which is not printed)"},
    {"-e --escape",
     "-p takes the text as given (no escape processing): write a real newline, e.g. -p $'one\\ntwo' in bash, or use -f FILE"},
    {"--repeat-last-n", "--repeat-penalty counts every prompt and generated token (no window)"},
    {"--no-display-prompt", "the prompt is not printed unless --echo is given: leave it out"},
};

}  // namespace

std::string llama_flag_hint(std::string_view flag) {
  for (const LlamaFlag& f : kFlags) {
    std::istringstream names(f.names);
    std::string name, all;
    bool match = false;
    while (names >> name) {
      all += (all.empty() ? "" : "/") + name;
      match = match || name == flag;
    }
    if (match) return fmt::format("llama.cpp's {}? {}", all, f.advice);
  }
  return {};
}

}  // namespace mamba::tools
