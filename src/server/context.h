// ServerContext: what every route handler shares (model, tokenizer, scheduler, metrics, options),
// plus the steps common to TGI and OpenAI routes: prompt tokenization with the length limits,
// blocking collection of a finished generation, error answers and the one-line request log.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "mamba/generate.h"
#include "mamba/model.h"
#include "mamba/server.h"
#include "mamba/tokenizer.h"
#include "server/api_error.h"
#include "server/chat_format.h"
#include "server/cors.h"
#include "server/metrics.h"
#include "server/request_stream.h"
#include "server/route_table.h"
#include "server/scheduler.h"
#include "server/bounded_http_server.h"
#include "server/tgi_request.h"

namespace mamba::server {

/// Bounds the bytes of request bodies being parsed, validated and tokenized at once. A parsed body
/// (its JSON DOM, then the tokenizer's working set) is up to ~35× its text, and each HTTP thread
/// handles a request: 24 clients sending 8 MiB bodies at once took a server to 5.4 GB, and
/// --http-threads of them would take tens of GB. A body of kSmall bytes or more waits until its
/// size fits beside the others being handled (one over the whole budget waits until none is); a
/// smaller one never waits. The work is CPU-bound, so waiting costs no throughput. Releasing a lease
/// of 1 MiB or more runs malloc_trim.
class BodyBudget {
 public:
  static constexpr std::size_t kSmall = std::size_t{64} << 10;
  static constexpr std::size_t kBytes = std::size_t{16} << 20;  ///< two bodies at the 8 MiB limit

  /// Holds part of the budget until release() or destruction.
  class Lease {
   public:
    Lease() = default;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Lease(Lease&& o) noexcept : owner_(std::exchange(o.owner_, nullptr)), bytes_(o.bytes_) {}
    ~Lease() { release(); }
    void release();

   private:
    friend class BodyBudget;
    Lease(BodyBudget* owner, std::size_t bytes) : owner_(owner), bytes_(bytes) {}
    BodyBudget* owner_ = nullptr;
    std::size_t bytes_ = 0;
  };

  explicit BodyBudget(std::size_t bytes = kBytes) : capacity_(bytes) {}
  /// Waits until `body_bytes` fit (at once below kSmall).
  Lease acquire(std::size_t body_bytes);
  std::size_t in_use() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::size_t capacity_;
  std::size_t used_ = 0;
};

/// 8 random lower-case hex digits (std::random_device): ServerContext::instance.
std::string random_instance_tag();

struct ServerContext {
  ServerOptions opts;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
  std::vector<std::int32_t> eos_ids;
  Metrics metrics;
  std::unique_ptr<Scheduler> scheduler;
  RequestLimits limits;
  /// How chat `messages` become the prompt (opts.chat_template, or the fixed format).
  ChatFormat chat_format;
  std::atomic<bool> draining{false};
  std::atomic<std::uint64_t> next_request_id{1};
  std::atomic<std::uint64_t> next_prompt_group{1};  ///< SequenceRequest::prompt_group of a request with n > 1
  /// 8 random hex digits drawn at start: OpenAI ids are "cmpl-<instance>-<request id>", so they
  /// stay unique across restarts (clients and tracing tools key by them) and still name the log's
  /// req=N line.
  std::string instance = random_instance_tag();
  BodyBudget body_budget;  ///< request bodies being parsed and tokenized at once
  RouteTable routes;  ///< paths and their methods (405 for a known path with another method)
  CorsPolicy cors;    ///< opts.cors_allow_origins: browser pages allowed to call the API
  std::int64_t created_unix = 0;  ///< start time (seconds since epoch), for OpenAI "created"
  /// The HTTP server (not owned; set before listening), whose connection gauges /metrics reads.
  const BoundedHttpServer* http = nullptr;
};

/// Writes `err` as the JSON answer to `req` (TGI's or OpenAI's shape and status by its path:
/// ApiError::body_for, status_for). A refusal (not err.admitted) is counted — 429 as overloaded,
/// another 4xx as rejected — and logged (log_refusal); an admitted request's failure or
/// cancellation (generation_error) neither: the scheduler counted it, log_request logged it.
void send_error(const httplib::Request& req, httplib::Response& res, const ApiError& err, Metrics& metrics);

/// The log line of a refused request: `refused METHOD PATH client=ADDR [x_request_id=ID] status=N
/// error_type=T error="..."` (the method and path as they are when plain visible ASCII, else
/// escaped and quoted as the message always is, so a client's CR/LF cannot forge a line; "-" for
/// one not read; the client's `x-request-id` only when client_request_id takes it).
void log_refusal(const httplib::Request& req, int status, const std::string& type, const std::string& message);

/// Sets `body` (a finished JSON document, taken) as the answer. A large answer (details or logprobs
/// of tens of thousands of tokens: the DOM that made it ~10× its size) is followed, a second later
/// on another thread, by malloc_trim, so the memory freed by the handler's thread goes back to the
/// system instead of staying in that thread's malloc arena (8 such requests at once left a server
/// at 2.5 GB).
void set_json_body(httplib::Response& res, std::string body);

/// Frees a parsed request body once the request's fields are taken from it, before the generation
/// is waited for: the DOM is up to ~35× its text (an 8 MiB body of nested arrays in an ignored
/// field is ~270 MB), and a handler lives as long as its generation (12 such requests at once held
/// 3.4 GB). The handler's BodyBudget lease, released next, returns the memory to the system.
void drop_body_dom(nlohmann::json& body);

/// The request fields prepare_prompt's errors name: TGI's or OpenAI's.
struct PromptFields {
  const char* prompt;      ///< "`inputs`", "`prompt`", "`messages`"
  const char* max_tokens;  ///< "`max_new_tokens`", "`max_tokens`"
};
inline constexpr PromptFields kTgiFields{"`inputs`", "`max_new_tokens`"};

/// Tokenizes `text` (or takes `ids` when non-empty), with the tokenizer's post-processor specials
/// (a BOS, as HF `tokenizer(text)`) when `add_special_tokens`, applies `truncate` (keep the last N, 0 =
/// off), checks ids < vocab_limit (min(tokenizer size, vocab_size, logits width)), input ≤ max_input_tokens and input + max_new_tokens ≤
/// max_total_tokens. A max_new_tokens the client did not give (`max_given` false: the route's
/// default) is shrunk to what fits instead, as TGI does. Errors: 422 naming the limit and the
/// route's fields.
std::optional<ApiError> prepare_prompt(const ServerContext& ctx, const std::string& text,
                                       bool add_special_tokens, const std::vector<std::int32_t>& ids,
                                       std::int64_t truncate, int& max_new_tokens, bool max_given,
                                       const PromptFields& fields, std::vector<std::int32_t>& out);

/// Submits to the scheduler. Errors: 503 while draining, 429 when full.
std::optional<ApiError> submit(ServerContext& ctx, SequenceRequest req, std::shared_ptr<RequestStream>& out);
/// Submits every request or none (Scheduler::submit_all: the choices of one request); `out` gets
/// one stream per request. Errors as submit()'s: 429 when fewer places are left than requests.
std::optional<ApiError> submit_all(ServerContext& ctx, std::vector<SequenceRequest> reqs,
                                   std::vector<std::shared_ptr<RequestStream>>& out);

/// A finished generation, collected by a blocking (non-stream) handler.
struct Collected {
  std::vector<TokenEvent> tokens;
  std::string text;  ///< concatenated text_delta (= what a stream delivers)
  SequenceStats stats;
  std::optional<Error> error;
  bool client_left = false;  ///< cancelled because `client_gone` answered true (collect)
};
/// Waits for the end of `stream`. `client_gone` (when set) is asked about every 250 ms: once it
/// answers true the sequence is cancelled (counted as cancelled, its slot freed) and collection
/// goes on until the scheduler ends it.
Collected collect(RequestStream& stream, const std::function<bool()>& client_gone = {});
/// collect() of several streams at once (the `n` choices of one OpenAI request), each taken as its
/// events come (a stream left unread would be paused at its backlog: SchedulerOptions::
/// max_stream_backlog). One Collected per stream, in order. A stream that fails or is cancelled
/// cancels the others (CancelReason::kAnswerEnded); `client_gone` cancels them all.
std::vector<Collected> collect_all(std::span<RequestStream* const> streams, const std::function<bool()>& client_gone = {});

/// 424 generation error (model / numerical); 400 (`cancelled`) when cancelled because the client
/// left (it may still read: a half-closed socket); 503 when cancelled by shutdown.
ApiError generation_error(const Collected& c);
/// The error of an answer made of several sequences (OpenAI's `n` choices, TGI's best_of): that
/// of the first that failed (the others were cancelled for it), else of the first cancelled
/// (client gone, shutdown); nullopt when every one ended normally.
std::optional<ApiError> answer_error(std::span<const Collected> cs);

/// Logs one line: request id, route, client address, the client's `x-request-id`
/// (`client_request_id`, as client_request_id() returns it: when non-empty, ` x_request_id=ID`
/// after the address), prompt/generated tokens, queue/prefill/decode ms, finish.
void log_request(std::uint64_t id, const char* route, const std::string& client, const std::string& client_request_id,
                 const SequenceStats& st, const std::optional<Error>& err);

/// Longest `x-request-id` a client may send for it to be echoed (bytes).
inline constexpr std::size_t kMaxRequestIdBytes = 128;

/// Whether a client's `x-request-id` value is echoed back and logged as sent: 1 to
/// kMaxRequestIdBytes bytes, each visible ASCII (0x21–0x7E). A space, a control byte (a CR/LF
/// would break the answer's head or a log line), DEL, a non-ASCII byte or a longer value is not
/// (vLLM echoes any value; this server puts it in a header and a log line unescaped).
bool is_echoable_request_id(std::string_view id);

/// The request's `x-request-id` when it has exactly one and is_echoable_request_id; "" otherwise
/// (none, several, or a value refused: the server's own id is used then).
std::string client_request_id(const httplib::Request& req);

/// Whether `path` is a generation route's (POST /v1/completions, /v1/chat/completions, /generate,
/// /generate_stream, /): those answers carry `x-request-id`.
bool is_generation_path(std::string_view path);

/// Sets the answer's `x-request-id` (OpenAI's header: the OpenAI SDKs' `_request_id` /
/// `requestID`; vLLM's with --enable-request-id-headers) unless it has one: the client's own
/// (client_request_id) when it sent a valid one, else `own`, the server's id of the request (on
/// the OpenAI routes the body's `id`); none while `own` is empty (an answer refused before the
/// request got an id).
void set_request_id_header(const httplib::Request& req, httplib::Response& res, const std::string& own = "");

/// One id's text (Tokenizer::token_text, for details / logprobs); "" when the tokenizer refuses it.
std::string token_text(const ServerContext& ctx, std::int32_t id);
/// The raw bytes of one id (Tokenizer::token_bytes: part of a character stays its bytes; for
/// OpenAI's logprobs `bytes`); "" when the tokenizer refuses it.
std::string token_bytes(const ServerContext& ctx, std::int32_t id);

/// Sets a text/event-stream response that pumps `streams` (one per choice: OpenAI's `n`; TGI's
/// routes have one), their events written as they come: `on_tokens(choice, tokens, done)` returns
/// the SSE text for a batch of one choice's tokens (done: the batch ends that choice normally,
/// stats valid); `on_all_done(stats)`, once every choice ended normally, the text after them
/// (OpenAI's usage chunk); `on_error(error)` the text for a failed / cancelled end of any choice,
/// which ends the answer and cancels the other choices; `on_end()` the trailer (e.g. [DONE]).
/// A failed write (client gone) cancels every sequence. `on_close(stats, error)` runs once per
/// sequence, when it ends (on the scheduler's thread: it must not touch the stream).
struct SseHandlers {
  std::function<std::string(std::size_t choice, const std::vector<TokenEvent>&, bool done, const SequenceStats&)> on_tokens;
  /// The prompt's scores when the request published them (optional; before the choice's on_tokens).
  std::function<std::string(std::size_t choice, const RequestStream::PromptScores&)> on_prompt;
  /// Optional; stats in choice order.
  std::function<std::string(const std::vector<SequenceStats>&)> on_all_done;
  std::function<std::string(const ApiError&)> on_error;
  std::function<std::string()> on_end;
  std::function<void(const SequenceStats&, const std::optional<Error>&)> on_close;
};
/// The answer is chunked; to an HTTP/1.0 request (`req`), which knows no chunked encoding, it is
/// delimited by the end of the connection instead (as TGI's server answers one).
void set_sse_response(const httplib::Request& req, httplib::Response& res, std::vector<std::shared_ptr<RequestStream>> streams,
                      SseHandlers handlers);

/// "data: <json>\n\n"
std::string sse_data(const std::string& payload);

}  // namespace mamba::server
