// llama.cpp's option names that mamba-cli and mamba-server do not use, and what to do in each instead.
#include "common/llama_flags.h"

#include <sstream>

#include <fmt/format.h>

namespace mamba::tools {
namespace {

struct LlamaFlag {
  const char* names;   ///< llama.cpp's spellings, separated by spaces
  const char* cli;     ///< what to do in mamba-cli; "": no hint there (it has the flag, or it means nothing there)
  const char* server;  ///< what to do in mamba-server; nullptr: the same as `cli`; "": no hint
  const char* perplexity = nullptr;  ///< what to do in mamba-cli perplexity; nullptr: the same as `cli`
};

constexpr const char* kCpuOnly = "mamba.cpp computes on the CPU only (no GPU offload): leave it out";

constexpr const char* kNoKvCache = "Mamba models keep a fixed-size fp32 state per sequence, not a KV cache: leave it out";
constexpr const char* kNotInteractive =
    "mamba-cli run is not interactive and has no chat mode: it continues the prompt given with -p \"...\", -f FILE or on "
    "stdin (multi-line text works in all three)";
constexpr const char* kServerNotInteractive =
    "mamba-server answers HTTP requests (a chat: POST /v1/chat/completions; a text to continue: POST /generate or "
    "/v1/completions): leave it out";
constexpr const char* kPromptPieces = "mamba.cpp sizes its prompt pieces itself: leave it out";

// llama-cli / llama-perplexity / llama-server options (common/arg.cpp) a user is likely to carry
// over, whose names mamba-cli or mamba-server does not use. The one-letter ones are here for their
// hint only: an unknown one-letter option was already refused.
constexpr LlamaFlag kFlags[] = {
    {"-ngl --gpu-layers --n-gpu-layers", kCpuOnly, nullptr},
    {"-sm --split-mode", kCpuOnly, nullptr},
    {"-mg --main-gpu", kCpuOnly, nullptr},
    {"-ts --tensor-split", kCpuOnly, nullptr},
    {"-dev --device", kCpuOnly, nullptr},
    {"-fa --flash-attn", "Mamba models have no attention: leave it out", nullptr},
    {"-ctk --cache-type-k", kNoKvCache, nullptr},
    {"-ctv --cache-type-v", kNoKvCache, nullptr},
    {"-nkvo --no-kv-offload", kNoKvCache, nullptr},
    {"-c --ctx-size",
     "a Mamba model has no context window to size (its state does not grow with the text): leave it out",
     "a Mamba model has no context window to size (its state does not grow with the text); what bounds a request is "
     "--max-total-tokens N (prompt + generated tokens) and --max-input-tokens N (prompt)",
     "perplexity's scoring window is --ctx N, as llama-perplexity's -c N (windows of N + 1 ids sharing their boundary id)"},
    {"-b --batch-size", kPromptPieces,
     "the prompt tokens prefilled per scheduler iteration are --max-batch-prefill-tokens N (a longer prompt goes in pieces)"},
    {"-ub --ubatch-size", kPromptPieces, nullptr},
    {"-hf -hfr --hf-repo",
     "-m takes a Hugging Face repo id (safetensors or pytorch_model.bin, not GGUF) from the local hub cache, e.g. "
     "-m state-spaces/mamba-130m-hf; mamba.cpp downloads nothing: fetch it first with hf download ORG/NAME",
     nullptr},
    {"-hff --hf-file", "-m ORG/NAME picks the weights file of the repo itself (no GGUF): leave it out", nullptr},
    {"-mu --model-url", "mamba.cpp downloads nothing: download the model (hf download ORG/NAME), then -m ORG/NAME or -m DIR",
     nullptr},
    {"-t --threads", "", "mamba-server's is --threads N"},
    {"-tb --threads-batch", "-t/--threads N sets the threads of prompt processing and generation alike",
     "--threads N sets the threads of prompt processing and generation alike"},
    {"-np --parallel",
     "mamba-cli run generates one sequence; mamba-server batches concurrent requests (--max-batch-size, "
     "--max-concurrent-requests)",
     "mamba-server batches concurrent requests itself: --max-batch-size N bounds the sequences per decode step, "
     "--max-concurrent-requests N the requests it takes (running + queued)"},
    {"-cb --cont-batching", "mamba-cli run generates one sequence (mamba-server always batches requests continuously): leave it out",
     "mamba-server always batches continuously: leave it out"},
    {"-nocb --no-cont-batching", "mamba-cli run generates one sequence: leave it out",
     "mamba-server always batches continuously (--max-batch-size 1 decodes one sequence per step)"},
    {"-n --predict --n-predict", "",
     "the number of tokens to generate is set per request (TGI's parameters.max_new_tokens, default 100; OpenAI's "
     "max_tokens, default 16 on /v1/completions, 256 on /v1/chat/completions)"},
    {"-a --alias", "", "mamba-server's is --model-id NAME (the name /info and /v1/models report)"},
    {"--metrics", "", "GET /metrics is always served: leave it out"},
    {"--jinja --no-jinja", "mamba-cli run has no chat template: it continues the prompt as given",
     "mamba-server always renders chat templates as Jinja2 (docs/SERVER.md, Chat prompt format): leave it out"},
    {"--chat-template", "mamba-cli run has no chat template: it continues the prompt as given", ""},
    {"--chat-template-file", "mamba-cli run has no chat template: it continues the prompt as given",
     "mamba-server's is --chat-template FILE (a file, or the template text itself)"},
    {"-cnv --conversation", kNotInteractive, kServerNotInteractive},
    {"-i --interactive", kNotInteractive, kServerNotInteractive},
    {"-if --interactive-first", kNotInteractive, kServerNotInteractive},
    {"-mli --multiline-input", kNotInteractive, kServerNotInteractive},
    {"-no-cnv --no-conversation", "not needed: mamba-cli run always continues the prompt as given, never chats: leave it out",
     kServerNotInteractive},
    {"-sys --system-prompt", "mamba-cli run has no chat template: put the text at the start of the prompt",
     "a system message goes in each chat request ({\"role\": \"system\", \"content\": ...} first in messages)"},
    {"-s --seed", "mamba-cli run's is --seed N", "the seed is set per request (TGI's parameters.seed, OpenAI's seed)"},
    {"-r --reverse-prompt", "the nearest here is run's --stop TEXT (generation ends at TEXT, which is not printed)",
     "stop strings are set per request (TGI's parameters.stop, OpenAI's stop)"},
    {"-e --escape",
     "-p takes the text as given (no escape processing): write a real newline, e.g. -p $'one\\ntwo' in bash, or use -f FILE",
     "prompts arrive as JSON strings, whose escapes JSON itself reads: leave it out"},
    {"--repeat-last-n", "--repeat-penalty counts every prompt and generated token (no window)",
     "a request's repetition_penalty counts every prompt and generated token (no window)"},
    {"--no-display-prompt", "the prompt is not printed unless --echo is given: leave it out",
     "answers hold the generated text only unless a request asks for the prompt too (TGI's return_full_text, OpenAI's "
     "echo): leave it out"},
};

}  // namespace

std::string llama_flag_hint(std::string_view flag, LlamaHintFor program) {
  for (const LlamaFlag& f : kFlags) {
    std::istringstream names(f.names);
    std::string name, all;
    bool match = false;
    while (names >> name) {
      all += (all.empty() ? "" : "/") + name;
      match = match || name == flag;
    }
    if (!match) continue;
    const char* advice = program == LlamaHintFor::kServer && f.server != nullptr           ? f.server
                         : program == LlamaHintFor::kPerplexity && f.perplexity != nullptr ? f.perplexity
                                                                                             : f.cli;
    return *advice == '\0' ? std::string() : fmt::format("llama.cpp's {}? {}", all, advice);
  }
  return {};
}

}  // namespace mamba::tools
