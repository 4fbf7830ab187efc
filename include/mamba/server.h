// mamba-server: a TGI- and OpenAI-compatible HTTP server with continuous batching.
//
// One scheduler thread owns the Model. Each iteration it runs one batched decode step
// (Model::step) over up to max_batch_size running sequences (round robin), then prefills waiting
// prompts within the prefill-token budget (long prompts in pieces: Mamba-2 at multiples of
// chunk_size, so results are bitwise those of the unsplit prompt, as Model::prefill says). Per-sequence States live in a slot pool preallocated at
// start within `state_memory_bytes`. HTTP handler threads only parse, validate and stream.
// Endpoints, flags and formats are documented in docs/SERVER.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include <string_view>

#include "mamba/model.h"
#include "mamba/status.h"
#include "mamba/tokenizer.h"

namespace mamba {

/// Server settings (flags of `mamba-server`; defaults are the documented ones).
struct ServerOptions {
  std::string host = "127.0.0.1";           ///< address to bind: IPv4 or IPv6 literal ("::1", "::" = all IPv6 and, where the OS maps them, IPv4), "0.0.0.0" = all IPv4, or a host name resolved at start
  int port = 8080;                           ///< 0 = pick a free port (see Server::port())
  int max_concurrent_requests = 128;         ///< running + queued; beyond → 429 overloaded
  int max_best_of = 2;                       ///< TGI's `best_of` at most this (and max_concurrent_requests); TGI's default
  int max_batch_size = 0;                    ///< sequences per decode step; 0 = number of slots
  int max_batch_prefill_tokens = 512;        ///< prompt tokens prefilled per scheduler iteration
  int max_input_tokens = 65536;              ///< prompt tokens per request (after truncate)
  int max_total_tokens = 131072;             ///< prompt + max_new_tokens per request
  std::int64_t state_memory_bytes = std::int64_t{2} << 30;  ///< budget for preallocated States
  /// Budget for the States of prompt prefixes kept for later prompts that begin with the same
  /// tokens (allocated as they are kept, least recently used evicted); 0 = none kept.
  std::int64_t prefix_cache_bytes = std::int64_t{512} << 20;
  int http_threads = 0;                      ///< HTTP worker threads; 0 = max_concurrent_requests + 32
  std::string api_key;                       ///< non-empty: require `Authorization: Bearer KEY` or `x-api-key: KEY` (all routes but /health)
  std::string model_id = "mamba";           ///< name reported by /info and /v1/models
  double drain_grace_seconds = 30.0;         ///< on shutdown: in-flight requests get this long
  std::size_t max_body_bytes = std::size_t{8} << 20;  ///< larger request bodies → 413
  /// Origins whose web pages may call the API from a browser (CORS; `--cors-allow-origin`):
  /// "scheme://host[:port]" as browsers send them, "*" for any; empty (default) = no CORS headers.
  std::vector<std::string> cors_allow_origins;
  /// The chat template /v1/chat/completions renders `messages` with: an HF `chat_template` (Jinja2
  /// source; mamba-server takes it from --chat-template or the tokenizer's tokenizer_config.json).
  /// Empty (default): the fixed "User: …" format (docs/SERVER.md §Chat prompt format).
  std::string chat_template;
  /// Where chat_template came from ("<dir>/tokenizer_config.json", "--chat-template FILE"): named
  /// in its errors.
  std::string chat_template_origin = "chat_template";
  /// The special tokens the template sees as variables (tokenizer_config.json's bos_token,
  /// eos_token, pad_token, …: name → text), as apply_chat_template passes them.
  std::map<std::string, std::string> chat_special_tokens;
};

/// Most HTTP worker threads (`--http-threads`, or max_concurrent_requests + 32 when 0): each is
/// an OS thread; far more than this fails to start (or aborts) on common systems.
inline constexpr int kMaxHttpThreads = 4096;
/// Longest shutdown grace period in seconds (one day).
inline constexpr double kMaxDrainGraceSeconds = 86400.0;

/// Checks the options that need no model: port in [0, 65535], max_concurrent_requests ≥ 1,
/// max_best_of ≥ 1,
/// max_batch_prefill_tokens ≥ 1, 1 ≤ max_input_tokens < max_total_tokens, HTTP threads (as
/// resolved) in [1, kMaxHttpThreads], drain_grace_seconds finite in [0, kMaxDrainGraceSeconds],
/// every cors_allow_origins entry an origin or "*".
/// Errors: kInvalidArgument naming the flag, the value and what is expected.
Status validate_server_options(const ServerOptions& opts);

/// Parses a byte size such as "2GiB", "512MiB", "1.5GB", "100000" (bytes). Units: B, K/KB/KiB,
/// M/MB/MiB, G/GB/GiB, T/TB/TiB (KB = 1000, KiB = 1024; a bare K/M/G means KiB/MiB/GiB).
/// Errors: kInvalidArgument naming the text.
Result<std::int64_t> parse_byte_size(std::string_view text);


/// The HTTP server. Lifecycle: create → start (binds, spawns scheduler + HTTP threads) →
/// wait() blocks until shutdown() has drained everything. shutdown() is safe from any thread.
class Server {
 public:
  /// Takes ownership of `model` and `tokenizer` (required: text endpoints need it).
  /// `eos_ids`: EOS tokens (from generation_config.json / config.json); with a chat_template, the
  /// token chat_special_tokens names "eos_token" (when the tokenizer has it) ends generation too.
  /// Errors: kInvalidArgument for inconsistent options (validate_server_options, or a state
  /// budget below one state); a chat_template that does not parse or render (kFormat,
  /// kUnsupported, kInvalidArgument naming chat_template_origin and the template's line).
  static Result<std::unique_ptr<Server>> create(std::unique_ptr<Model> model,
                                                std::unique_ptr<Tokenizer> tokenizer,
                                                std::vector<std::int32_t> eos_ids,
                                                const ServerOptions& opts);
  ~Server();

  /// Binds host:port and starts serving in background threads. Errors: kIo (bind failed).
  Status start();
  /// Port actually bound: the chosen one after a successful start() (the free port picked for
  /// ServerOptions::port 0); 0 before start() or after it failed.
  int port() const;
  /// Stops accepting new requests (503), lets in-flight ones finish for up to
  /// drain_grace_seconds, cancels the rest, then stops the HTTP server. Idempotent.
  void shutdown();
  /// Blocks until the server has stopped (after shutdown()).
  void wait();
  /// wait() for at most `timeout`: false when connections are still open then (a client that keeps
  /// trickling a request, which cpp-httplib's worker serves until it is silent for the 10 s read
  /// timeout). The caller may then exit the process; the Server must not be destroyed while false.
  bool wait_for(std::chrono::milliseconds timeout);

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};


}  // namespace mamba
