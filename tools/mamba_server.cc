// mamba-server: TGI- and OpenAI-compatible HTTP server with continuous batching (docs/SERVER.md).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "mamba/checkpoint.h"
#include "mamba/model.h"
#include "mamba/generate.h"
#include "mamba/server.h"
#include "mamba/tokenizer.h"
#include "io/generation_config.h"
#include "ops/cpu/cpu_target.h"
#include "ops/ops.h"
#include "server/chat_format.h"
#include "server/listen_address.h"
#include "server/slot_pool.h"
#include "common/chat_template_flag.h"
#include "common/env_options.h"
#include "common/option_rules.h"
#include "common/out_of_memory.h"
#include "common/thread_warning.h"
#include "common/unknown_option.h"

namespace {
/// The line after a flag's error, as mamba-cli's (SERVER.md: "a bad flag adds the hint line").
constexpr const char* kHelpHint = "Run with --help for more information.\n";
/// A byte below 0x20 or DEL: what an HTTP header value cannot carry and a log line must not hold.
bool has_control_char(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

/// What a SIGTERM / SIGINT / SIGHUP does in each phase of the process (the signal thread in main).
enum SignalPhase : int { kStartingUp, kServing, kDraining };

const char* signal_name(int sig) { return sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : sig == SIGHUP ? "SIGHUP" : "a signal"; }

/// The weights are memory-mapped: a model file truncated or overwritten in place while the server
/// runs (a copy or a re-download into the served directory) makes the next read of a lost page
/// raise SIGBUS. The process still dies (its weights are gone), but says why on stderr first
/// (async-signal-safe write), then dies of the signal as before (exit status 135).
void install_sigbus_note() {
  struct sigaction sa {};
  sa.sa_handler = [](int) {
    static const char kMsg[] =
        "mamba-server: fatal: SIGBUS reading memory-mapped weights: a model file was most likely truncated or "
        "overwritten while the server ran (put new weights in a new directory, then restart)\n";
    ssize_t ignored = ::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
    (void)ignored;
    std::signal(SIGBUS, SIG_DFL);
    std::raise(SIGBUS);
  };
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  sigaction(SIGBUS, &sa, nullptr);
}
}  // namespace

int main(int argc, char** argv) {
  mamba::tools::exit_cleanly_when_out_of_memory();
  CLI::App app{"mamba-server: TGI- and OpenAI-compatible HTTP server for Mamba models (continuous batching)", "mamba-server"};
  app.set_version_flag("--version", std::string("mamba-server ") + MAMBA_VERSION);
  mamba::ServerOptions o;
  // A repeated option takes its last value (llama.cpp, TGI's launcher), so a wrapper script's
  // defaults can be overridden by appending; list options (--stop) say TakeAll themselves.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::string model_ref, tokenizer_ref, state_memory = "2GiB", prefix_cache_memory = "512MiB", chat_template_flag;
  int threads = 0;
  std::string precision = "auto";
  double grace = o.drain_grace_seconds;
  app.add_option("-m,--model", model_ref, "model directory or HF repo id (default: $MAMBA_MODEL, else the embedded model)")
      ->check(mamba::cli::non_empty("a model directory or HF repo id ORG/NAME (leave -m out for the default model)"));
  app.add_option("--tokenizer", tokenizer_ref,
                 "tokenizer.json to use instead of the model directory's (a file, a directory, or a cached HF repo id such as "
                 "EleutherAI/gpt-neox-20b)")
      ->check(mamba::cli::non_empty("a tokenizer.json file, a directory holding one, or an HF repo id ORG/NAME"));
  app.add_option("--chat-template", chat_template_flag,
                 "the chat template /v1/chat/completions renders messages with: a file of Jinja2 text, the template itself, "
                 "or the name of one of the tokenizer_config.json's named templates (default: the tokenizer's tokenizer_config.json chat_template, else the fixed \"User: …\" format)")
      ->check(mamba::cli::non_empty("a Jinja2 template file, the template text, or a template's name"));
  app.add_option("--host", o.host, "address to listen on")
      ->check(mamba::cli::non_empty("an address such as 127.0.0.1, 0.0.0.0 or ::"))
      // An IPv6 address in a URL's brackets ("[::1]", as the listening line prints it) is the address.
      ->transform(CLI::Validator(
          [](std::string& v) {
            if (v.size() > 2 && v.front() == '[' && v.back() == ']') v = v.substr(1, v.size() - 2);
            return std::string();
          },
          ""))
      ->capture_default_str();
  app.add_option("--port", o.port, "port (0 = any free port, printed at start)")->check(CLI::Range(0, 65535))->capture_default_str();
  app.add_option("--max-concurrent-requests", o.max_concurrent_requests,
                 "requests in the server (running + queued); more get 429")->check(mamba::cli::positive_int())->capture_default_str();
  app.add_option("--max-best-of", o.max_best_of,
                 "most sequences a TGI request's best_of may sample (each counts as a request; at most --max-concurrent-requests)")
      ->check(mamba::cli::positive_int())->capture_default_str();
  app.add_option("--max-batch-size", o.max_batch_size, "sequences per decode step (0 = number of state slots)")->check(mamba::cli::non_negative_int())->capture_default_str();
  app.add_option("--max-batch-prefill-tokens", o.max_batch_prefill_tokens,
                 "prompt tokens prefilled per scheduler iteration (long prompts go in pieces)")->check(mamba::cli::positive_int())->capture_default_str();
  app.add_option("--max-input-tokens", o.max_input_tokens, "longest prompt in tokens")->check(mamba::cli::positive_int())->capture_default_str();
  app.add_option("--max-total-tokens", o.max_total_tokens, "prompt + max_new_tokens limit")
      ->check(mamba::cli::decimal_int_in(2, std::numeric_limits<int>::max(), " (one prompt token and one generated)", "INT >= 2"))->capture_default_str();
  app.add_option("--state-memory", state_memory, "memory for preallocated sequence states (e.g. 2GiB, 512MiB)")->capture_default_str();
  app.add_option("--prefix-cache-memory", prefix_cache_memory,
                 "memory for the states of prompt prefixes kept for later prompts that begin with them (0 = none)")
      ->capture_default_str();
  app.add_option("--threads", threads, "compute threads (0 = all hardware threads, at most 1024)")
      ->check(mamba::cli::thread_count())  // at parse time, worded as mamba-cli's
      ->capture_default_str();
  app.add_option("--precision", precision, mamba::cli::kPrecisionHelp)
      ->transform(mamba::cli::precision_tier())
      ->capture_default_str();
  app.add_option("--http-threads", o.http_threads, "HTTP worker threads (0 = max-concurrent-requests + 32, at most 4096)")->capture_default_str();
  app.add_option("--api-key", o.api_key, "require 'Authorization: Bearer KEY' or 'x-api-key: KEY' (all routes but /health)");
  std::vector<std::string> cors_flags;  // split at commas below
  app.add_option("--cors-allow-origin", cors_flags,
                 "origin whose web pages may call the API from a browser (CORS), as scheme://host[:port]; repeat the "
                 "flag or separate by commas; * = any origin (default: none, no CORS headers)");
  app.add_option("--model-id", o.model_id, "model name reported by /info and /v1/models (default: the Hugging Face repo id as given to -m, else the model directory name)");
  app.add_option("--shutdown-grace", grace, "seconds in-flight requests get to finish on SIGTERM/SIGINT (0 to 86400)")->capture_default_str();
  mamba::cli::strict_numbers(app);  // "010" is ten, "" and "0x10" are errors (CLI11 alone: 8, 0, 16)
  // Every flag but -m (read from MAMBA_MODEL below) from MAMBA_<FLAG> when not given (docs/SERVER.md).
  mamba::tools::read_options_from_env(app, "MAMBA_", {"--model"});
  const std::vector<std::string> from_env = mamba::tools::options_from_env(app, argc, argv);
  // After a flag's error: which values came from the environment (a container's setting is easy to
  // miss), then the help hint.
  const std::string hint = mamba::tools::env_note(from_env) + kHelpHint;
  // Startup errors look like mamba-cli's: one "error: ..." line on stderr, exit 2.
  app.failure_message([&hint](const CLI::App*, const CLI::Error& e) { return "error: " + std::string(e.what()) + "\n" + hint; });
  // An unknown option is named before CLI11 parses, as by mamba-cli, with what llama.cpp's flags
  // (-ngl, -fa, -np, -c, ...) mean here: CLI11 read -hf as -h (the help, exit 0) and -ngl 99 as
  // two stray arguments.
  if (const std::string bad = mamba::tools::unknown_option(app, argc, argv, 1); !bad.empty()) {
    const std::string note = mamba::tools::unknown_option_note(app, bad, mamba::tools::LlamaHintFor::kServer);
    std::fprintf(stderr, "error: unknown option '%s'%s\n%s", bad.c_str(), note.empty() ? "" : fmt::format(" ({})", note).c_str(),
                 kHelpHint);
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // --help exits 0
  }
  // An empty --api-key would silently turn authentication off (e.g. --api-key "$UNSET_VAR"); so
  // would an empty MAMBA_API_KEY, which CLI11 reads as unset.
  if (app.count("--api-key") > 0 && o.api_key.empty()) {
    std::fprintf(stderr, "error: --api-key is empty (omit the flag to serve without authentication)\n%s", hint.c_str());
    return 2;
  }
  if (const char* key = std::getenv("MAMBA_API_KEY"); key != nullptr && *key == '\0' && app.count("--api-key") == 0) {
    std::fprintf(stderr, "error: MAMBA_API_KEY is set but empty (unset it to serve without authentication)\n%s", hint.c_str());
    return 2;
  }
  // A key no client can send: HTTP header values lose their leading and trailing whitespace, and
  // carry no control characters (a key read from a file keeps its final newline: $(cat key) drops
  // it, a Kubernetes secret or an env file may not).
  if (const std::string& k = o.api_key; !k.empty()) {
    const auto ws = [](char c) { return c == ' ' || c == '\t'; };
    const bool control = has_control_char(k);
    if (control || ws(k.front()) || ws(k.back())) {
      std::fprintf(stderr,
                   "error: --api-key %s: no client could send it (HTTP trims a header value's spaces and carries no control "
                   "characters; a key read from a file may keep its final newline)\n%s",
                   control ? "has a control character (a newline, tab or other byte below 0x20)" : "starts or ends with whitespace",
                   hint.c_str());
      return 2;
    }
  }
  // --cors-allow-origin "http://a, http://b": entries split at commas, spaces around them dropped
  // (an empty entry is refused by validate_server_options, as any other that is no origin).
  for (const std::string& flag : cors_flags) {
    for (std::size_t start = 0;;) {
      const std::size_t comma = flag.find(',', start);
      std::string entry = flag.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      entry.erase(0, entry.find_first_not_of(" \t"));
      entry.erase(entry.find_last_not_of(" \t") + 1);
      o.cors_allow_origins.push_back(std::move(entry));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  if (app.count("--model-id") > 0 && o.model_id.empty()) {
    std::fprintf(stderr, "error: --model-id is empty\n%s", hint.c_str());
    return 2;
  }
  if (has_control_char(o.model_id)) {
    std::fprintf(stderr, "error: --model-id has a control character (a newline, tab or other byte below 0x20): it names the model in answers and logs\n%s",
                 hint.c_str());
    return 2;
  }
  // Logs go to stderr; stdout carries only the "listening on" line (for scripts).
  spdlog::set_default_logger(spdlog::stderr_color_mt("mamba-server"));
  // SPDLOG_LEVEL (spdlog's own variable: trace, debug, info, warn, err, critical, off) sets the log
  // level, e.g. SPDLOG_LEVEL=warn drops the per-request lines.
  spdlog::cfg::load_env_levels();
  o.drain_grace_seconds = grace;
  // --max-total-tokens alone: the default --max-input-tokens follows it (total − 1), as TGI's launcher.
  if (app.count("--max-total-tokens") > 0 && app.count("--max-input-tokens") == 0 && o.max_input_tokens >= o.max_total_tokens)
    o.max_input_tokens = o.max_total_tokens - 1;
  if (mamba::Status v = mamba::validate_server_options(o); !v.ok()) {  // a flag's value (or two flags together)
    std::fprintf(stderr, "error: %s\n%s", v.message().c_str(), hint.c_str());
    return 2;
  }

  auto mem = mamba::parse_byte_size(state_memory);
  if (!mem.ok()) {
    std::fprintf(stderr, "error: --state-memory: %s\n%s", mem.error().message.c_str(), hint.c_str());
    return 2;
  }
  o.state_memory_bytes = mem.value();
  auto cache_mem = mamba::parse_byte_size(prefix_cache_memory);
  if (!cache_mem.ok()) {
    std::fprintf(stderr, "error: --prefix-cache-memory: %s\n%s", cache_mem.error().message.c_str(), hint.c_str());
    return 2;
  }
  o.prefix_cache_bytes = cache_mem.value();

  // What names the model in /info and /v1/models: -m as given, else $MAMBA_MODEL as set (a repo id
  // stays a repo id, not its snapshot directory), else the embedded model's directory.
  const char* model_env = std::getenv("MAMBA_MODEL");
  std::string id_ref = model_ref.empty() && model_env != nullptr ? std::string(model_env) : model_ref;
  const bool model_from_env = model_ref.empty() && model_env != nullptr && *model_env != '\0';
  if (model_ref.empty()) {  // as mamba-cli: $MAMBA_MODEL (an error naming it when it does not resolve), else the embedded model
    auto def = mamba::resolve_default_model();
    if (!def.ok()) {
      std::fprintf(stderr, "error: %s\n", def.error().message.c_str());
      return 2;
    }
    model_ref = *def;
  }
  auto dir = mamba::resolve_model_path(model_ref);
  if (!dir.ok()) {
    std::fprintf(stderr, "error: %s\n", dir.error().message.c_str());
    return 2;
  }
  if (app.count("--model-id") == 0) {
    // A Hugging Face repo id names the model as given (TGI and vLLM report it so), not by its
    // snapshot directory (a commit hash); a directory by its name.
    std::error_code ec;
    // weakly_canonical: "DIR/", "." and "DIR/." name DIR (filename() of "DIR/" is empty).
    if (id_ref.empty()) id_ref = model_ref;
    o.model_id = std::filesystem::is_directory(id_ref, ec)
                     ? std::filesystem::weakly_canonical(std::filesystem::path(dir.value()), ec).filename().string()
                     : id_ref;
    if (o.model_id.empty()) o.model_id = "mamba";
  }

  // A directory that is no checkpoint is named as such first (its config.json, as the load would),
  // rather than for the tokenizer.json it lacks too (the load itself comes after the cheap checks).
  if (auto config = mamba::ModelConfig::from_file((std::filesystem::path(dir.value()) / "config.json").string()); !config.ok()) {
    std::fprintf(stderr, "error: %s\n%s", config.error().message.c_str(), mamba::tools::env_note(from_env).c_str());
    return 2;
  }
  // The server reads prompts as text: a checkpoint without tokenizer.json (and no --tokenizer) is
  // refused before the (slower) model load, saying where one comes from.
  auto found_tokenizer = mamba::model_tokenizer_file(dir.value(), tokenizer_ref);
  if (!found_tokenizer.ok()) {
    if (!tokenizer_ref.empty())
      std::fprintf(stderr, "error: --tokenizer: %s\n%s", found_tokenizer.error().message.c_str(), mamba::tools::env_note(from_env).c_str());
    else
      std::fprintf(stderr, "error: %s\n", found_tokenizer.error().message.c_str());
    return 2;
  }
  if (!*found_tokenizer) {
    std::fprintf(stderr,
                 "error: %s has no tokenizer.json, which the server needs to read prompts (state-spaces checkpoints "
                 "ship without one: they use GPT-NeoX-20B's; give it with --tokenizer FILE|DIR|EleutherAI/gpt-neox-20b)\n",
                 dir.value().c_str());
    return 2;
  }
  const std::string tokenizer_file = **found_tokenizer;

  // SIGTERM, SIGINT and SIGHUP (a closed terminal) are taken by one thread's sigwait; they are
  // blocked before any other thread starts so none inherits them. During start-up (the model load
  // and the state slots: seconds to minutes) one exits at once, as TGI's launcher and vLLM do; once
  // the server listens, the first one drains it and a second one exits at once.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  install_sigbus_note();
  // (Both outlive main's early returns: the thread stays in sigwait until the process ends.)
  static std::atomic<int> signal_phase{kStartingUp};
  static std::promise<int> drain_signal;
  std::thread([sigs]() mutable {
    for (;;) {
      int sig = 0;
      if (sigwait(&sigs, &sig) != 0) continue;
      int phase = kServing;
      if (signal_phase.compare_exchange_strong(phase, kDraining)) {
        drain_signal.set_value(sig);
        continue;
      }
      spdlog::warn("received {} {}: exiting at once", signal_name(sig), phase == kStartingUp ? "during start-up" : "while draining");
      spdlog::default_logger()->flush();
      std::_Exit(128 + sig);
    }
  }).detach();

  // A listen address that cannot be bound now (a taken port, a host that does not resolve) is
  // reported before the model load, which takes minutes for large checkpoints; the server binds
  // for real after it (and still names the reason if another process took the port meanwhile).
  if (!from_env.empty()) spdlog::info("from the environment: {}", mamba::tools::env_list(from_env));
  if (const auto typos = mamba::tools::env_near_misses(app, "MAMBA_", {"MAMBA_MODEL", "MAMBA_CPU_TARGET", "MAMBA_WEIGHT_PREFETCH", "MAMBA_BATCH_TILE", "MAMBA_TEST_POOL_CPUS"});
      !typos.empty())
    spdlog::warn("set in the environment but not read: {}", mamba::tools::env_list(typos));
  const std::string env_note = mamba::tools::env_note(from_env);  // after the errors below: where a value came from
  if (auto why = mamba::server::listen_address_unavailable(o.host, o.port)) {
    std::fprintf(stderr, "error: cannot bind %s:%s: %s\n%s", o.host.c_str(),
                 o.port == 0 ? "<any port>" : std::to_string(o.port).c_str(), why->c_str(), env_note.c_str());
    return 2;
  }

  // Which SIMD path computes, and why; a bad MAMBA_CPU_TARGET / MAMBA_WEIGHT_PREFETCH / MAMBA_BATCH_TILE warns here,
  // not at the first request.
  spdlog::info("cpu: {}", mamba::ops::cpu::cpu_dispatch_description());
  mamba::tools::warn_if_more_threads_than_cpus(threads, "--threads");  // allowed, but slower (as mamba-cli's -t)
  mamba::LoadOptions lo;
  lo.threads = threads;
  lo.precision = mamba::parse_precision(precision).value();  // CLI checked the value
  spdlog::info("model: {}{}", dir.value(), model_from_env ? " (from MAMBA_MODEL)" : "");
  const std::string loading_model = "loading the model " + dir.value();
  auto ckpt = mamba::tools::with_out_of_memory_context(loading_model, [&] { return mamba::Checkpoint::open(dir.value()); });
  if (!ckpt.ok()) {
    std::fprintf(stderr, "error: %s\n%s", ckpt.error().message.c_str(), env_note.c_str());
    return 2;
  }
  // auto's memory check counts the state slots Server::create allocates after the load (the same
  // count: --state-memory's worth, at most --max-concurrent-requests) and the prefix cache's budget
  // (allocated as prompts are prefilled; under steady use it fills).
  const std::int64_t slots_bytes =
      mamba::server::slots_bytes_for_budget(o.state_memory_bytes, ckpt->config().state_bytes(), o.max_concurrent_requests);
  lo.reserve_bytes = slots_bytes + o.prefix_cache_bytes;
  auto model = mamba::tools::with_out_of_memory_context(loading_model, [&] { return mamba::Model::from_checkpoint(std::move(*ckpt), lo); });
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n%s", model.error().message.c_str(), env_note.c_str());
    return 2;
  }
  spdlog::info("precision: {}{}; compute threads: {}", mamba::precision_name((*model)->precision()),
               lo.precision == mamba::Precision::kAuto
                   ? fmt::format(" (auto: {}; counted {:.0f} MiB of state slots, {:.0f} MiB of prefix cache)", (*model)->precision_reason(),
                                 static_cast<double>(slots_bytes) / (1 << 20), static_cast<double>(o.prefix_cache_bytes) / (1 << 20))
                   : std::string(),
               mamba::ops::num_threads());
  auto tok = mamba::tools::load_tokenizer(tokenizer_file);
  if (!tok.ok()) {
    std::fprintf(stderr, "error: %s\n", tok.error().message.c_str());
    return 2;
  }
  // With --tokenizer, the EOS fallback reads that tokenizer's directory's tokenizer_config.json.
  const std::string tokenizer_dir =
      tokenizer_ref.empty() ? std::string() : std::filesystem::path(tokenizer_file).parent_path().string();
  auto eos = mamba::model_eos_ids(*model.value(), &tok.value(), tokenizer_dir);
  if (!eos.ok()) {
    std::fprintf(stderr, "error: %s\n", eos.error().message.c_str());
    return 2;
  }
  // The chat template (docs/SERVER.md §Chat prompt format): --chat-template, else the tokenizer's
  // tokenizer_config.json's, else the fixed format. One the flag names must work (exit 2); the
  // tokenizer's own that this server cannot render is warned about and the fixed format used.
  const std::string tokenizer_files = std::filesystem::path(tokenizer_file).parent_path().string();
  auto tc = mamba::io::read_tokenizer_chat_template(tokenizer_files);
  if (!tc.ok()) {
    std::fprintf(stderr, "error: %s\n", tc.error().message.c_str());
    return 2;
  }
  const mamba::io::TokenizerChatTemplate* tokenizer_template = tc->has_value() ? &**tc : nullptr;
  if (tokenizer_template != nullptr) o.chat_special_tokens = tokenizer_template->special_tokens;
  if (!chat_template_flag.empty()) {
    // a name of the tokenizer's list of templates (transformers' apply_chat_template(chat_template=NAME)),
    // unless a file has that name
    const std::string* named = nullptr;
    if (tokenizer_template != nullptr && !std::filesystem::exists(chat_template_flag))
      if (const auto it = tokenizer_template->named_templates.find(chat_template_flag); it != tokenizer_template->named_templates.end())
        named = &it->second;
    if (named != nullptr) {
      o.chat_template = *named;
      o.chat_template_origin = fmt::format("--chat-template {} ({}'s template of that name)", chat_template_flag, tokenizer_template->path);
    } else {
      auto t = mamba::tools::read_chat_template_flag(chat_template_flag);
      if (!t.ok()) {
        std::fprintf(stderr, "error: %s\n", t.error().message.c_str());
        return 2;
      }
      o.chat_template = std::move(t->source);
      o.chat_template_origin = std::move(t->origin);
    }
  } else if (tokenizer_template != nullptr && !tokenizer_template->source.empty()) {
    o.chat_template = tokenizer_template->source;
    o.chat_template_origin = tokenizer_template->path;
  } else if (tokenizer_template != nullptr && !tokenizer_template->named_templates.empty()) {
    std::vector<std::string> names;
    for (const auto& [name, text] : tokenizer_template->named_templates) names.push_back(name);
    spdlog::warn("{}: chat_template lists templates named {} but none \"default\" (transformers asks for a name then): "
                 "/v1/chat/completions uses the fixed \"User: …\\n\\nAssistant:\" format; pick one with --chat-template NAME",
                 tokenizer_template->path, fmt::join(names, ", "));
  }
  if (!o.chat_template.empty()) {
    auto f = mamba::server::ChatFormat::from_template(o.chat_template, o.chat_template_origin, o.chat_special_tokens);
    if (!f.ok() && !chat_template_flag.empty()) {
      std::fprintf(stderr, "error: %s\n", f.error().message.c_str());  // (the message names the flag)
      return 2;
    }
    if (!f.ok()) {
      spdlog::warn("{} (this server renders a subset of Jinja2; docs/SERVER.md §Chat prompt format): /v1/chat/completions uses the "
                   "fixed \"User: …\\n\\nAssistant:\" format instead; give a template it can render with --chat-template",
                   f.error().message);
      o.chat_template.clear();
    } else {
      spdlog::info("chat template: {} ({} bytes)", o.chat_template_origin, o.chat_template.size());
    }
  }
  auto server = mamba::Server::create(std::move(model).value(), std::make_unique<mamba::Tokenizer>(std::move(tok).value()),
                                      std::move(eos).value(), o);
  if (!server.ok()) {
    std::fprintf(stderr, "error: %s\n", server.error().message.c_str());
    return 2;
  }
  mamba::Status st = server.value()->start();
  if (!st.ok()) {
    std::fprintf(stderr, "error: %s\n%s", st.message().c_str(), env_note.c_str());
    return 2;
  }
  signal_phase.store(kServing);
  // Machine-readable line for scripts that start the server on port 0.
  std::printf("mamba-server listening on %s\n", mamba::server::listen_url(o.host, server.value()->port()).c_str());
  std::fflush(stdout);

  const int sig = drain_signal.get_future().get();
  // A second signal while draining (Ctrl-C again) exits without waiting for the grace period.
  spdlog::info("received {}, draining (a second SIGINT/SIGTERM exits at once)", signal_name(sig));
  server.value()->shutdown();
  // Requests had the grace period; a connection still open 2 s after the listener closed is a
  // client holding it open (trickling its request, or not reading its answer, whose write waits up
  // to the 30 s write timeout): exit rather than wait for it.
  if (!server.value()->wait_for(std::chrono::seconds(2))) {
    spdlog::warn("connections still open 2 s after the drain ended (a client sending its request slowly, or not reading "
                 "its answer): exiting");
    spdlog::default_logger()->flush();
    std::_Exit(0);
  }
  spdlog::info("stopped");
  return 0;
}
