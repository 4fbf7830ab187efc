// Server: wires the HTTP layer (cpp-httplib) to the scheduler. Handler threads parse, validate,
// tokenize and stream; only the scheduler thread touches the model.
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "mamba/server.h"
#include "server/bounded_http_server.h"
#include "server/chunked_body.h"
#include "server/client_connection.h"
#include "server/context.h"
#include "server/cors.h"
#include "server/header_values.h"
#include "server/json_fields.h"
#include "server/listen_address.h"
#include "server/routes.h"
#include "server/slot_pool.h"

namespace mamba {

using server::ApiError;
using server::ServerContext;
using server::is_decimal;
using server::lower_ascii;
using server::trim_ows;

/// A request's head (request line and header lines) at most: 64 KiB, as generous as nginx's and
/// node's (8–32 KiB, 16 KiB) limits are and more; a longer one gets 431 (BoundedHttpServer).
constexpr std::size_t kMaxHeadBytes = std::size_t{64} << 10;
/// The time a request's head (request line and headers) may take from its first byte: as the read
/// timeout, but for the whole head (a client trickling it held a worker 10 s per byte).
constexpr std::chrono::milliseconds kHeadTimeout{10000};

/// Connections that may wait for their client at once without a thread (ConnectionParking): an
/// idle one holds its socket and 4 KiB, one with a head begun up to 64 KiB more; one more is closed.
constexpr std::size_t kMaxParkedConnections = 8192;

/// Raises the soft limit on open descriptors to the hard one (at most 65536; systemd's default soft
/// limit is 1024), so that parked connections are not refused by the process's limit first, and
/// warns when the limit leaves room for fewer connections than may wait at once.
void raise_open_file_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  const rlim_t want = std::min<rlim_t>(lim.rlim_max, 65536);
  if (lim.rlim_cur < want) {
    const rlim_t was = lim.rlim_cur;
    lim.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &lim) == 0) spdlog::debug("open file limit raised from {} to {}", was, want);
    else lim.rlim_cur = was;
  }
  if (lim.rlim_cur < kMaxParkedConnections + 64)
    spdlog::warn("open-file limit {} (ulimit -n): about {} client connections fit at once, beyond which new ones wait "
                 "in the listen backlog; raise the hard limit for more (up to {} may wait for their client)",
                 lim.rlim_cur, lim.rlim_cur > 64 ? lim.rlim_cur - 64 : 0, kMaxParkedConnections);
}

struct Server::Impl {
  ServerContext ctx;
  server::BoundedHttpServer http{kMaxHeadBytes, kHeadTimeout};
  std::thread listen_thread;
  int port = 0;
  std::mutex mu;
  std::condition_variable stopped_cv;  // listen_thread's end (listen_after_bind returned)
  int listen_fd = -1;                  // the socket cpp-httplib listens on (set by its socket-options hook)
  bool stopped = false;
  bool shut = false;
  bool started = false;
};

namespace {

// HTTP worker threads as resolved from the options (0 = max_concurrent_requests + 32).
std::int64_t http_thread_count(const ServerOptions& o) {
  return o.http_threads > 0 ? o.http_threads : std::int64_t{o.max_concurrent_requests} + 32;
}

}  // namespace

Status validate_server_options(const ServerOptions& opts) {
  if (opts.port < 0 || opts.port > 65535) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("--port must be 0 (any free port) to 65535, got {}", opts.port));
  }
  if (opts.prefix_cache_bytes < 0)
    return make_error(ErrorCode::kInvalidArgument, fmt::format("--prefix-cache-memory must be >= 0, got {}", opts.prefix_cache_bytes));
  if (opts.max_best_of < 1)
    return make_error(ErrorCode::kInvalidArgument, fmt::format("--max-best-of must be >= 1, got {}", opts.max_best_of));
  if (opts.max_concurrent_requests < 1) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("--max-concurrent-requests must be >= 1, got {}", opts.max_concurrent_requests));
  }
  if (opts.max_batch_prefill_tokens < 1) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("--max-batch-prefill-tokens must be >= 1, got {}", opts.max_batch_prefill_tokens));
  }
  if (opts.max_input_tokens < 1 || opts.max_total_tokens <= opts.max_input_tokens) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("need 1 <= --max-input-tokens < --max-total-tokens, got --max-input-tokens {} and "
                                  "--max-total-tokens {}", opts.max_input_tokens, opts.max_total_tokens));
  }
  if (opts.http_threads < 0 || opts.http_threads > kMaxHttpThreads) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("--http-threads must be 0 (max-concurrent-requests + 32) to {}, got {}", kMaxHttpThreads, opts.http_threads));
  }
  if (http_thread_count(opts) > kMaxHttpThreads) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("--max-concurrent-requests {} needs {} HTTP threads (+32), above the limit {}: lower it or set --http-threads",
                                  opts.max_concurrent_requests, http_thread_count(opts), kMaxHttpThreads));
  }
  if (!std::isfinite(opts.drain_grace_seconds) || opts.drain_grace_seconds < 0 || opts.drain_grace_seconds > kMaxDrainGraceSeconds) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("--shutdown-grace must be a number of seconds from 0 to {:.0f}, got {}",
                                                               kMaxDrainGraceSeconds, opts.drain_grace_seconds));
  }
  return server::validate_cors_origins(opts.cors_allow_origins);
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  shutdown();
  wait();
}

Result<std::unique_ptr<Server>> Server::create(std::unique_ptr<Model> model, std::unique_ptr<Tokenizer> tokenizer,
                                               std::vector<std::int32_t> eos_ids, const ServerOptions& opts) {
  if (!model) return make_error(ErrorCode::kInvalidArgument, "Server::create: model is null");
  if (!tokenizer) return make_error(ErrorCode::kInvalidArgument, "Server::create: the server needs a tokenizer (tokenizer.json next to the model)");
  MAMBA_RETURN_IF_ERROR(validate_server_options(opts));
  const std::int64_t state_bytes = model->config().state_bytes();
  const int slots = server::slots_for_budget(opts.state_memory_bytes, state_bytes, opts.max_concurrent_requests);
  if (slots < 1) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("--state-memory {} bytes is below one sequence state ({} bytes)", opts.state_memory_bytes, state_bytes));
  }
  // The chat template, parsed and tried once before the state slots are allocated.
  server::ChatFormat chat_format;
  if (!opts.chat_template.empty()) {
    auto f = server::ChatFormat::from_template(opts.chat_template, opts.chat_template_origin, opts.chat_special_tokens);
    if (!f.ok()) return f.error();
    chat_format = std::move(f).value();
    // The tokenizer's eos_token also ends generation, as in vLLM: templates close each turn with it
    // (ChatML's <|im_end|>), which generation_config.json / config.json may not name (they often
    // keep the base model's <|endoftext|>).
    if (const auto it = opts.chat_special_tokens.find("eos_token"); it != opts.chat_special_tokens.end())
      if (const auto id = tokenizer->token_to_id(it->second);
          id && *id < model->logits_width() && std::find(eos_ids.begin(), eos_ids.end(), *id) == eos_ids.end()) {
        eos_ids.push_back(*id);
        spdlog::info("the tokenizer's eos_token {:?} (id {}) also ends generation (chat template)", it->second, *id);
      }
  }
  auto impl = std::make_unique<Impl>();
  ServerContext& ctx = impl->ctx;
  ctx.opts = opts;
  ctx.chat_format = std::move(chat_format);
  ctx.cors = server::CorsPolicy(opts.cors_allow_origins);
  ctx.model = std::move(model);
  ctx.tok = std::move(tokenizer);
  ctx.eos_ids = std::move(eos_ids);
  ctx.limits.max_input_tokens = opts.max_input_tokens;
  ctx.limits.max_total_tokens = opts.max_total_tokens;
  ctx.limits.max_choices = opts.max_concurrent_requests;
  ctx.limits.max_best_of = std::min(opts.max_best_of, opts.max_concurrent_requests);
  ctx.limits.max_best_of_flag = opts.max_best_of <= opts.max_concurrent_requests ? "--max-best-of" : "--max-concurrent-requests";
  ctx.created_unix = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  server::SchedulerOptions so;
  so.slots = slots;
  so.max_in_flight = opts.max_concurrent_requests;
  so.max_batch_size = opts.max_batch_size;
  so.max_batch_prefill_tokens = opts.max_batch_prefill_tokens;
  so.prefix_cache_bytes = opts.prefix_cache_bytes;
  // Every slot's state is allocated and zeroed now (seconds for thousands of slots on a VM): said
  // before it, and an allocation that does not fit is named with the flags that size it.
  const double pool_mib = static_cast<double>(state_bytes) * slots / (1 << 20);
  spdlog::info("allocating {} state slot{} ({:.0f} MiB)", slots, slots == 1 ? "" : "s", pool_mib);
  try {
    ctx.scheduler = std::make_unique<server::Scheduler>(*ctx.model, ctx.tok.get(), ctx.eos_ids, so, ctx.metrics);
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::kIo, fmt::format("out of memory allocating {} state slot{} ({:.0f} MiB): lower --state-memory or "
                                                  "--max-concurrent-requests",
                                                  slots, slots == 1 ? "" : "s", pool_mib));
  }
  spdlog::info("state slots: {} (state {:.2f} MiB per sequence, budget {:.0f} MiB, max concurrent requests {}), "
               "decode batch <= {}, prefill budget {} tokens per iteration, prompt pieces cut at multiples of {} token(s)",
               slots, static_cast<double>(state_bytes) / (1 << 20), static_cast<double>(opts.state_memory_bytes) / (1 << 20),
               opts.max_concurrent_requests, opts.max_batch_size > 0 ? std::min(opts.max_batch_size, slots) : slots,
               ctx.scheduler->prefill_budget(), ctx.scheduler->granularity());
  if (opts.prefix_cache_bytes >= state_bytes && state_bytes > 0) {
    spdlog::info("prefix cache: up to {} prompt-prefix states ({:.0f} MiB, --prefix-cache-memory), kept as prompts are prefilled",
                 opts.prefix_cache_bytes / state_bytes, static_cast<double>(opts.prefix_cache_bytes) / (1 << 20));
    // allocated as prompts come, so a budget past the machine's memory would end in the OOM killer
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    if (const double ram = pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
        ram > 0 && static_cast<double>(opts.prefix_cache_bytes) + pool_mib * (1 << 20) > ram)
      spdlog::warn("--prefix-cache-memory {:.0f} MiB and the state slots' {:.0f} MiB exceed this machine's {:.0f} MiB of memory: the "
                   "cache grows as prompts come, until the system runs out; give a smaller --prefix-cache-memory",
                   static_cast<double>(opts.prefix_cache_bytes) / (1 << 20), pool_mib, ram / (1 << 20));
  } else if (opts.prefix_cache_bytes > 0) {
    spdlog::warn("prefix cache off: --prefix-cache-memory {} bytes is below one sequence state ({} bytes); give at least that, or 0",
                 opts.prefix_cache_bytes, state_bytes);
  }
  if (opts.max_best_of > opts.max_concurrent_requests)
    spdlog::warn("--max-best-of {} is more than --max-concurrent-requests {}: best_of is held to {} (each sequence counts as a request)",
                 opts.max_best_of, opts.max_concurrent_requests, opts.max_concurrent_requests);
  if (const std::string why = tokenizer_vocab_mismatch(*ctx.tok, *ctx.model); !why.empty()) spdlog::warn("{}", why);  // such prompts get a 422
  if (opts.max_batch_prefill_tokens < ctx.scheduler->granularity())
    spdlog::warn("--max-batch-prefill-tokens {} is below the model's chunk_size {} (prompt pieces stay aligned to it): "
                 "each prefill iteration still takes at least {} tokens",
                 opts.max_batch_prefill_tokens, ctx.scheduler->granularity(), ctx.scheduler->granularity());
  // /info reports the budget the scheduler keeps (at least one prompt granule), not the flag's value.
  ctx.opts.max_batch_prefill_tokens = ctx.scheduler->prefill_budget();
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

namespace {

/// The token of an "Authorization: Bearer TOKEN" value; the scheme name is case-insensitive
/// (RFC 7235 §2.1), spaces around the token are dropped. "" when the value is not of that form.
std::string bearer_token(const std::string& value) {
  constexpr std::string_view kScheme = "bearer";
  if (value.size() <= kScheme.size() || value[kScheme.size()] != ' ') return {};
  for (std::size_t i = 0; i < kScheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(value[i])) != kScheme[i]) return {};
  const std::size_t b = value.find_first_not_of(' ', kScheme.size());
  const std::size_t e = value.find_last_not_of(' ');
  return b == std::string::npos ? std::string() : value.substr(b, e - b + 1);
}

/// A client's header or request-line text as an error message shows it (shown_text): at most 60
/// bytes of it (a header may be 8 KiB long).
std::string shown(const std::string& s) { return server::shown_text(s, 60); }

/// Whether cpp-httplib may find body bytes after this request's headers that a route refused in
/// pre_route (before reading them) leaves unread: a Transfer-Encoding, a non-zero Content-Length,
/// or a POST without Content-Length.
bool may_have_unread_body(const httplib::Request& req) {
  const std::string cl = req.get_header_value("Content-Length");
  return req.has_header("Transfer-Encoding") || (!cl.empty() && cl != "0") || (req.method == "POST" && cl.empty());
}

/// Makes the answer in `res` one that ends the connection after it is written (the lingering way:
/// BoundedHttpServer::close_after_answer): cpp-httplib 0.11 would read an unread body, or the rest
/// of a head it could not parse, as further requests on the same connection.
void close_after_answer(httplib::Response& res, bool body_may_follow = false) {
  res.set_header("Connection", "close");
  server::BoundedHttpServer::close_after_answer(body_may_follow);
}

/// Drops the byte ranges cpp-httplib parsed from a `Range` header, so that every answer is whole:
/// cpp-httplib 0.11 would otherwise cut any answer to them (206 for a GET /info or a POST
/// /generate, a JSON body cut mid-object, an error's body too). RFC 9110 §14.2 lets a server ignore
/// Range (and makes it do so for methods other than GET); TGI's and vLLM's servers ignore it. The
/// hooks are handed the request as const, but it is cpp-httplib's own non-const object, alive for
/// the whole exchange, and ranges are read only when the answer is written, after every hook.
void ignore_ranges(const httplib::Request& req) { const_cast<httplib::Request&>(req).ranges.clear(); }

/// Whether the request's Connection header(s) hold `token` (lower case) among their
/// comma-separated, case-insensitive options (RFC 9110 §7.6.1).
bool has_connection_token(const httplib::Request& req, std::string_view token) {
  for (std::size_t i = 0, n = req.get_header_value_count("Connection"); i < n; ++i) {
    const std::string v = lower_ascii(req.get_header_value("Connection", i));
    for (std::size_t at = 0; at <= v.size();) {
      std::size_t end = v.find(',', at);
      if (end == std::string::npos) end = v.size();
      std::string_view item(v.data() + at, end - at);
      while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
      while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
      if (item == token) return true;
      at = end + 1;
    }
  }
  return false;
}

/// For a browser's CORS preflight while CORS is off (it reaches the router's 405 / 404): which flag
/// it needs, with the page's origin ready to copy; "" for any other request.
std::string cors_preflight_hint(const ServerContext& ctx, const httplib::Request& req) {
  if (ctx.cors.enabled() || req.method != "OPTIONS" || req.get_header_value_count("Origin") != 1 ||
      !req.has_header("Access-Control-Request-Method"))
    return "";
  const std::string origin = req.get_header_value("Origin");
  return fmt::format("; this is a browser's CORS preflight: start the server with --cors-allow-origin {} to let that page "
                     "call the API", server::is_cors_origin(origin) ? origin : std::string("ORIGIN"));
}

/// The 404's message for a path no route has: the path, and for an OpenAI client's path without its
/// /v1 (a base URL that lacks it: llama.cpp also serves /chat/completions) where the routes are.
std::string no_route_message(const ServerContext& ctx, const httplib::Request& req) {
  const bool v1_missing = server::is_openai_path(req.path) && !req.path.starts_with("/v1");
  return fmt::format("no route for {} {}{}{}", req.method, req.path,
                     v1_missing ? fmt::format("; the OpenAI routes are under /v1 (/v1{}): an OpenAI client's base URL ends in /v1",
                                              req.path)
                                : std::string(),
                     cors_preflight_hint(ctx, req));
}

/// The request's transfer codings (every Transfer-Encoding header, joined by ", " as RFC 9110 §5.3
/// reads several), in lower case, without the spaces around them.
std::string transfer_coding(const httplib::Request& req) {
  std::string all;
  for (std::size_t i = 0, n = req.get_header_value_count("Transfer-Encoding"); i < n; ++i) {
    if (i > 0) all += ", ";
    all += req.get_header_value("Transfer-Encoding", i);
  }
  return std::string(trim_ows(lower_ascii(std::move(all))));
}

/// Reads the chunked body of `req` (a POST pre_route accepted with "Transfer-Encoding: chunked")
/// from its connection through ChunkedBodyDecoder, at most `max_body_bytes` of data, into req.body;
/// the request then reads as one sent with "Content-Length: 0" and no Transfer-Encoding, so that
/// cpp-httplib reads nothing more (the hooks are handed the request as const, but it is
/// cpp-httplib's own non-const object, alive for the whole exchange: see ignore_ranges). The error
/// when the body is over the limit (413), malformed (400), or ends before its last chunk (400:
/// the client closed the connection, or sent nothing for the read timeout); nullopt when read.
std::optional<ApiError> read_chunked_body(const httplib::Request& req, std::size_t max_body_bytes) {
  server::ChunkedBodyDecoder decoder(max_body_bytes);
  std::string body;
  std::vector<char> buf(16384);
  while (decoder.state() == server::ChunkedBodyDecoder::State::kMore) {
    const long n = server::BoundedHttpServer::read_body(buf.data(), std::min(buf.size(), decoder.next_read_size()));
    if (n <= 0) {
      const bool closed = server::ClientConnection(server::BoundedHttpServer::current_socket()).closed();
      return ApiError::malformed(fmt::format("the chunked request body ended {} after {} bytes of data: {}",
                                             decoder.in_trailer() ? "in its trailer section (after its last chunk, before the empty "
                                                                    "line that ends it)"
                                                                  : "before its last chunk (a 0-size chunk and an empty line)",
                                             decoder.body_bytes(),
                                             closed ? "the client closed the connection" : "the client sent nothing for 10 s"));
    }
    decoder.feed(std::string_view(buf.data(), static_cast<std::size_t>(n)), body);
  }
  switch (decoder.state()) {
    case server::ChunkedBodyDecoder::State::kTooLarge: return ApiError{413, "payload_too_large", decoder.error()};
    case server::ChunkedBodyDecoder::State::kMalformed:
      return ApiError::malformed(fmt::format("malformed chunked request body: {}", decoder.error()));
    default: break;
  }
  auto& r = const_cast<httplib::Request&>(req);
  r.body = std::move(body);
  r.headers.erase("Transfer-Encoding");
  r.headers.emplace("Content-Length", "0");
  return std::nullopt;
}

/// What runs before every route (before the body is read): the API key, 405 for a known path asked
/// with another method, the body's framing (Content-Length not a number, several that disagree, or
/// beside Transfer-Encoding; a Transfer-Encoding, a POST without Content-Length, a GET / HEAD with a
/// body) and multipart bodies. True when it answered the request (res is then set).
bool pre_route(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  // Message framing (RFC 7230 §3.3.3), first (a malformed head is a 400 whoever sends it, API key
  // or not): several Content-Length headers that disagree, or one beside Transfer-Encoding, are
  // refused; behind a proxy that picks the other length they would let a second request hide in
  // the body (request smuggling). cpp-httplib would take the first.
  if (req.get_header_value_count("Content-Length") > 1) {
    const std::string first = req.get_header_value("Content-Length");
    for (std::size_t i = 1; i < req.get_header_value_count("Content-Length"); ++i)
      if (req.get_header_value("Content-Length", i) != first) {
        server::send_error(req, res, ApiError{400, "malformed_request", "conflicting Content-Length headers"}, ctx.metrics);
        close_after_answer(res);  // a malformed head ends the connection (as nginx's 400s)
        return true;
      }
  }
  // Two Host headers (RFC 9112 §3.2: a 400): behind a proxy that reads the other, a request for one
  // host served as another's.
  if (req.get_header_value_count("Host") > 1) {
    server::send_error(req, res, ApiError{400, "malformed_request", "more than one Host header"}, ctx.metrics);
    close_after_answer(res);  // a malformed head ends the connection (as nginx's 400s)
    return true;
  }
  if (req.has_header("Content-Length") && req.has_header("Transfer-Encoding")) {
    server::send_error(req, res, ApiError{400, "malformed_request", "both Content-Length and Transfer-Encoding headers"}, ctx.metrics);
    close_after_answer(res);  // a malformed head ends the connection (as nginx's 400s)
    return true;
  }
  // A browser's preflight comes without credentials: answered before the API key is asked for.
  if (ApiError refused; ctx.cors.answer_preflight(ctx.routes, req, res, &refused)) {
    if (res.status == 403) server::log_refusal(req, refused.status, refused.type, refused.message);  // an origin not allowed
    return true;
  }
  if (!ctx.opts.api_key.empty() && req.path != "/health" && req.path != "/ping") {  // the probes' routes
    if (bearer_token(req.get_header_value("Authorization")) != ctx.opts.api_key &&
        req.get_header_value("x-api-key") != ctx.opts.api_key) {
      // OpenAI's code for it is invalid_api_key.
      server::send_error(req, res, ApiError{401, "authentication", "missing or invalid API key (Authorization: Bearer KEY)", "invalid_api_key"},
                         ctx.metrics);
      res.set_header("WWW-Authenticate", "Bearer");  // RFC 7235 §3.1: a 401 names the scheme it wants
      return true;
    }
  }
  // cpp-httplib answers 404 for a known path asked with another method: make it 405 + Allow
  if (std::string allow = ctx.routes.disallowed(req.method, req.path); !allow.empty()) {
    // not counted as a rejected request (as a 404 is not): no request was parsed
    res.status = 405;
    res.set_header("Allow", allow);
    res.set_content(ApiError{405, "method_not_allowed",
                             fmt::format("method {} not allowed on {} (allowed: {}){}", req.method, req.path, allow,
                                         cors_preflight_hint(ctx, req))}
                        .body_for(req.path),
                    "application/json");
    return true;
  }
  // A body's framing: Content-Length, or "Transfer-Encoding: chunked" (read by read_chunked_body
  // once every check here has passed: cpp-httplib 0.11 would read it without bound). Any other
  // transfer coding is a 501 (RFC 9112 §6.1); such a request's answer ends the connection
  // (set_pre_routing_handler), its body unread.
  if (req.has_header("Transfer-Encoding")) {
    const std::string te = transfer_coding(req);
    std::optional<ApiError> refused;
    if (te != "chunked")
      refused = ApiError{501, "not_implemented",
                 fmt::format("Transfer-Encoding '{}' is not supported (send the body as is, with a Content-Length header, "
                             "or chunked alone)", shown(te))};
    else if (req.version == "HTTP/1.0")  // RFC 9112 §6.1: faulty framing; 1.0 has no chunks
      refused = ApiError::malformed("Transfer-Encoding in an HTTP/1.0 request (HTTP/1.0 has no chunked bodies)");
    else if (req.method == "GET" || req.method == "HEAD")
      refused = ApiError::malformed(fmt::format("a {} request has no body (Transfer-Encoding: chunked)", req.method));
    else if (req.method != "POST")
      refused = ApiError::malformed(fmt::format("this server reads request bodies of POSTs only (a chunked {} body was sent)", shown(req.method)));
    if (refused) {
      server::send_error(req, res, *refused, ctx.metrics);
      return true;
    }
  }
  // cpp-httplib reads no body for GET / HEAD: one sent anyway would be read as the next request.
  if ((req.method == "GET" || req.method == "HEAD") && !req.get_header_value("Content-Length").empty() &&
      req.get_header_value("Content-Length") != "0") {
    server::send_error(req, res,
                       ApiError{400, "malformed_request",
                                fmt::format("a {} request has no body (Content-Length: {})", req.method,
                                            req.get_header_value("Content-Length"))},
                       ctx.metrics);
    return true;
  }
  // A request of another method without Content-Length or Transfer-Encoding has no body (RFC 9112
  // §6.3), but cpp-httplib 0.11 reads a PUT's or PATCH's until the connection ends, without bound
  // (200 MB sent to an unknown path grew the server by 217 MB before its 404): it reads as one
  // with "Content-Length: 0" (the hooks' request is cpp-httplib's own: see ignore_ranges).
  if (req.method != "POST" && !req.has_header("Content-Length") && !req.has_header("Transfer-Encoding"))
    const_cast<httplib::Request&>(req).headers.emplace("Content-Length", "0");
  if (req.method == "POST" && !req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) {
    server::send_error(req, res,
                       ApiError{411, "length_required",
                                "a POST needs its JSON body with a Content-Length header (the body's size in bytes), or sent "
                                "chunked (Transfer-Encoding: chunked); neither was given"},
                       ctx.metrics);
    return true;
  }
  // cpp-httplib 0.11 decodes a gzip / deflate / br body with the body limit checked on its encoded
  // bytes only: 2 MB of gzip held 2 GB of JSON and took the server to 6.8 GB of memory. So bodies
  // come as they are (no HTTP API client compresses its requests; vLLM's and TGI's servers decode
  // none either), refused before they are read.
  if (req.method == "POST" && req.has_header("Content-Encoding")) {
    if (lower_ascii(req.get_header_value("Content-Encoding")) != "identity") {
      server::send_error(req, res,
                         ApiError{415, "unsupported_media_type",
                                  fmt::format("Content-Encoding '{}' is not accepted: send the JSON body uncompressed "
                                              "(at most {} bytes)", shown(req.get_header_value("Content-Encoding")),
                                              ctx.opts.max_body_bytes)},
                         ctx.metrics);
      return true;
    }
  }
  // cpp-httplib parses multipart bodies into form fields and leaves req.body empty.
  if (req.method == "POST" && req.is_multipart_form_data()) {
    server::send_error(req, res, ApiError{415, "unsupported_media_type", "multipart/form-data bodies are not supported: send the JSON object itself as the body (Content-Type: application/json)"}, ctx.metrics);
    return true;
  }
  // cpp-httplib reads a non-numeric Content-Length ("abc") as 0 and an empty body.
  if (const std::string cl = req.get_header_value("Content-Length"); !cl.empty() && !is_decimal(cl)) {
    server::send_error(req, res, ApiError{400, "malformed_request", fmt::format("invalid Content-Length header '{}'", cl)}, ctx.metrics);
    return true;
  }
  return false;
}


/// The answer to a request cpp-httplib 0.11 refused itself, before any route: 414 a request line
/// over its limit, 416 a Range header it cannot parse, 400 a request line or header it cannot
/// parse, or a body that could not be read. It stops filling `req` at the fault, which tells them
/// apart: the client's address is set only once the request line and headers were taken.
ApiError httplib_refusal(const httplib::Request& req, int status) {
  if (req.method == "CONNECT")
    return ApiError::malformed("CONNECT is not supported: this server is not a proxy");
  if (status == 414)
    return {414, "uri_too_long",
            fmt::format("the request line (method, URL and HTTP version) is longer than {} bytes: send long values in "
                        "the JSON body", CPPHTTPLIB_REQUEST_URI_MAX_LENGTH)};
  if (status == 416)
    return {416, "range_not_satisfiable",
            fmt::format("invalid Range header '{}' (bytes=FIRST-LAST; these answers need none)", shown(req.get_header_value("Range")))};
  if (!req.remote_addr.empty())  // the request line and headers were taken: reading the body failed
    return ApiError::malformed(fmt::format("the request body ended before its Content-Length ({} bytes) was read: the client "
                                           "closed the connection or sent nothing for 10 s", shown(req.get_header_value("Content-Length"))));
  static const std::set<std::string, std::less<>> kMethods{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "PRI"};
  if (req.method.empty() || req.target.empty())
    return ApiError::malformed("malformed request line: expected METHOD /path HTTP/1.1");
  if (!kMethods.contains(req.method))
    return ApiError::malformed(fmt::format("malformed request line: unknown method '{}'", shown(req.method)));
  if (req.version != "HTTP/1.1" && req.version != "HTTP/1.0")
    return ApiError::malformed(req.version.empty() ? std::string("malformed request line: expected METHOD /path HTTP/1.1")
                                                   : fmt::format("HTTP version '{}' is not supported (HTTP/1.1 or HTTP/1.0)", shown(req.version)));
  if (std::count(req.target.begin(), req.target.end(), '?') > 1)
    return ApiError::malformed(fmt::format("malformed URL '{}': more than one '?'", shown(req.target)));
  return ApiError::malformed(fmt::format("malformed request: a header line longer than {} bytes, or a request line of more "
                                         "than three parts (METHOD /path HTTP/1.1)", CPPHTTPLIB_HEADER_MAX_LENGTH));
}

}  // namespace

Status Server::start() {
  Impl& im = *impl_;
  ServerContext& ctx = im.ctx;
  httplib::Server& http = im.http;
  const auto threads = static_cast<int>(http_thread_count(ctx.opts));  // <= kMaxHttpThreads (create)
  http.set_keep_alive_max_count(100);
  // An idle keep-alive connection ends after 5 s, as uvicorn's (vLLM's) default: clients' pools
  // (urllib3, httpx, undici) reuse idle connections for a few seconds; at 2 s a request sent on one
  // idle for 2–5 s could meet a closed socket.
  http.set_keep_alive_timeout(5);
  // A client silent for 10 s mid-request is dropped. cpp-httplib 0.11 also waits this long to
  // discard the body it refuses with 413 (a declared length over the 8 MiB body limit).
  http.set_read_timeout(10, 0);
  http.set_write_timeout(30, 0);
  http.set_payload_max_length(ctx.opts.max_body_bytes);
  http.set_socket_options([&im](socket_t sock) {
    server::listen_socket_options(sock);
    im.listen_fd = sock;  // the last candidate is the one bound (cpp-httplib closes the others)
  });
  // "Expect: 100-continue" (curl for large or uploaded bodies): refuse at once what pre_route or
  // the size limit would refuse, instead of inviting the body with "100 Continue" (RFC 7231 §5.1.1).
  http.set_expect_100_continue_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    ignore_ranges(req);
    bool refused = pre_route(ctx, req, res);
    const std::string cl = req.get_header_value("Content-Length");
    std::uint64_t length = 0;
    const bool has_length = is_decimal(cl, &length);
    if (!refused && req.method == "POST" && ctx.routes.post_handler(req.path) == nullptr) {
      // an unknown path: its 404 now, not after the body it would not read
      res.status = 404;
      res.set_content(ApiError{404, "not_found", no_route_message(ctx, req)}.body_for(req.path), "application/json");
      refused = true;
    }
    if (!refused && has_length && length > static_cast<std::uint64_t>(ctx.opts.max_body_bytes)) {
      server::send_error(req, res,
                         ApiError{413, "payload_too_large",
                                  fmt::format("request body exceeds {} bytes (Content-Length: {})", ctx.opts.max_body_bytes,
                                              cl)},
                         ctx.metrics);
      refused = true;
    }
    if (!refused) return 100;
    close_after_answer(res, true);  // the client may send the body anyway: it must not become a request
    return res.status;
  });
  http.set_pre_routing_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    ignore_ranges(req);
    if (!pre_route(ctx, req, res)) {
      if (!req.has_header("Transfer-Encoding")) return httplib::Server::HandlerResponse::Unhandled;
      // chunked, accepted by pre_route: read here (not in the 100-continue handler, before the
      // client sends it)
      const std::optional<ApiError> refused = read_chunked_body(req, ctx.opts.max_body_bytes);
      if (!refused) return httplib::Server::HandlerResponse::Unhandled;
      server::send_error(req, res, *refused, ctx.metrics);
    }
    if (may_have_unread_body(req)) close_after_answer(res, true);  // refused before its body was (wholly) read
    return httplib::Server::HandlerResponse::Handled;
  });
  // cpp-httplib 0.11 offers "Keep-Alive: timeout=2, max=100" on every answer unless the request
  // itself said "Connection: close": an answer that ends the connection (close_after_answer's, a
  // request line or header it could not parse) must not also offer to keep it.
  // Every answer (routed or not) passes here. The connection is kept or ended as the request's
  // Connection header asks, read as RFC 9110 §7.6.1 says (case-insensitive tokens of a list:
  // "Close", "TE, close"; HTTP/1.0 keeps it only for "keep-alive"), where cpp-httplib 0.11 matches
  // the whole value case-sensitively; an answer that ends it (close_after_answer's, one during the
  // drain) says "Connection: close" once and offers no Keep-Alive. cpp-httplib's
  // "Accept-Ranges: bytes" on HEAD answers goes: Range headers are ignored.
  http.set_post_routing_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    res.headers.erase("Accept-Ranges");
    ctx.cors.add_headers(req, res);
    // A generation route's answer without an id of ours (refused before the request got one: 401,
    // 413, a validation error, 429) still echoes the client's valid x-request-id.
    if (server::is_generation_path(req.path)) server::set_request_id_header(req, res);
    // cpp-httplib compresses a text or JSON answer (not an event stream) for a client that accepts
    // gzip / br: a cache must key it by Accept-Encoding too (RFC 9110 §12.5.5).
    if (const std::string type = res.get_header_value("Content-Type");
        type == "application/json" || (type.rfind("text/", 0) == 0 && type.rfind("text/event-stream", 0) != 0))
      server::add_vary(res, "Accept-Encoding");
    const bool http10 = req.version == "HTTP/1.0";
    const bool keep = !has_connection_token(req, "close") && (!http10 || has_connection_token(req, "keep-alive")) &&
                      res.get_header_value("Connection") != "close" && !ctx.draining.load();
    server::BoundedHttpServer::set_keep_alive(keep);
    res.headers.erase("Connection");
    if (keep) {
      if (http10) res.set_header("Connection", "keep-alive");  // an HTTP/1.0 client closes unless told
    } else {
      res.set_header("Connection", "close");
      res.headers.erase("Keep-Alive");
    }
  });
  http.set_error_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    ignore_ranges(req);  // a 416's half-parsed ranges, or an answer refused before routing
    if (!res.body.empty()) return;  // an answer of ours (pre_route's)
    if (res.status == 413 || res.status == 400) {
      // cpp-httplib 0.11 caps application/x-www-form-urlencoded bodies (curl -d's default type) at
      // 8 KiB before routing: a JSON body within our own limit is served as any other.
      const httplib::Server::Handler* h = ctx.routes.post_handler(req.path);
      if (res.status == 413 && req.method == "POST" && !req.body.empty() && req.body.size() <= ctx.opts.max_body_bytes &&
          req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0) {
        if (h == nullptr) {  // an unknown path: its 404, as for any other body
          res.status = 404;
          res.set_content(ApiError{404, "not_found", no_route_message(ctx, req)}.body_for(req.path), "application/json");
          return;
        }
        res.status = 200;
        if (!pre_route(ctx, req, res)) (*h)(req, res);
        return;
      }
      // A Content-Length that is not a decimal number ("-5", or one past 2⁶⁴ that cpp-httplib reads
      // as a huge length) is refused before routing as 413: name the header instead.
      if (const std::string cl = req.get_header_value("Content-Length"); !cl.empty() && !is_decimal(cl)) {
        server::send_error(req, res, ApiError{400, "malformed_request", fmt::format("invalid Content-Length header '{}'", cl)}, ctx.metrics);
        return;
      }
    }
    ApiError e;
    e.status = res.status;
    bool body_unread = false;  // a body that ended early: what the client sends later is its rest
    switch (res.status) {
      case 414:
      case 416:
      case 400:
        if (const auto fault = server::BoundedHttpServer::head_fault(); fault != server::HeadFault::kNone &&
                                                                          fault != server::HeadFault::kLineTooLong) {
          if (fault == server::HeadFault::kTooLong) {
            res.status = 431;  // RFC 6585 §5
            e = {431, "request_header_fields_too_large",
                 fmt::format("the request's head (request line and headers) is longer than {} bytes", kMaxHeadBytes)};
          } else if (fault == server::HeadFault::kMalformedLine) {
            e = ApiError::malformed(fmt::format("malformed request: {}", server::BoundedHttpServer::head_fault_detail()));
          } else {
            e = ApiError::malformed(fmt::format("incomplete request: the headers did not end (no empty line after them) within "
                                                "{} s of the request's first byte, or the client closed the connection",
                                                kHeadTimeout.count() / 1000));
          }
          close_after_answer(res);
          break;
        }
        e = httplib_refusal(req, res.status);
        // A request line or header cpp-httplib could not take leaves the rest of the request unread:
        // the connection ends after the answer.
        if (req.remote_addr.empty()) close_after_answer(res);
        else body_unread = res.status == 400;
        break;
      case 404:
        e.type = "not_found";
        // The OpenAI SDK's models.retrieve(id) of an id this server does not serve.
        if (constexpr std::string_view kModels = "/v1/models/";
            (req.method == "GET" || req.method == "HEAD") && req.path.starts_with(kModels))
          e.message = fmt::format("no model '{}' here: this server serves '{}' (GET /v1/models)", req.path.substr(kModels.size()),
                                  ctx.opts.model_id);
        else
          e.message = no_route_message(ctx, req);
        break;
      case 405: e.type = "method_not_allowed"; e.message = fmt::format("method {} not allowed on {}", req.method, req.path); break;
      case 413: e.type = "payload_too_large"; e.message = fmt::format("request body exceeds {} bytes", ctx.opts.max_body_bytes); break;
      // None other is known to reach here (a handler's exception is the exception handler's 500).
      default:
        e.type = res.status >= 500 ? "internal" : "malformed_request";
        e.message = fmt::format("HTTP {}", res.status);
        break;
    }
    // A body over the limit and a malformed request are refusals of a request (counted as
    // rejected, as the 100-continue path's 413); 404 and 405 are not.
    // A 413 (the body may not have come whole) or a 416 (refused before the body was read): what
    // the client sends after the answer must not be read as a next request.
    if ((res.status == 413 || res.status == 416) && may_have_unread_body(req)) body_unread = true;
    if (res.status != 404 && res.status != 405) {
      server::send_error(req, res, e, ctx.metrics);
      // The body's missing bytes may still come (a client silent for the read timeout): they must
      // not be read as the next request (cpp-httplib 0.11 keeps the connection otherwise).
      if (body_unread) close_after_answer(res, true);
      return;
    }
    res.set_content(e.body_for(req.path), "application/json");
  });
  http.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
    }
    spdlog::error("internal error on {} {}: {}", req.method, req.path, what);
    res.status = 500;
    res.set_content(ApiError{500, "internal", fmt::format("internal error: {}", what)}.body_for(req.path), "application/json");
  });
  ctx.http = &im.http;
  server::register_tgi_routes(http, ctx);
  server::register_openai_routes(http, ctx);
  server::register_tokenize_routes(http, ctx);

  int port = ctx.opts.port;
  if (port == 0) {
    port = http.bind_to_any_port(ctx.opts.host.c_str());
    if (port < 0) {
      return make_error(ErrorCode::kIo, fmt::format("cannot bind {}:<any port>: {}", ctx.opts.host, server::bind_failure_reason(ctx.opts.host, 0)));
    }
  } else if (!http.bind_to_port(ctx.opts.host.c_str(), port)) {
    return make_error(ErrorCode::kIo, fmt::format("cannot bind {}:{}: {}", ctx.opts.host, port, server::bind_failure_reason(ctx.opts.host, port)));
  }
  im.port = port;
  // cpp-httplib 0.11 listens with a backlog of 5: a burst of new connections overflowed it and
  // waited for the client's SYN retransmit (~1 s). Listening again on the bound socket sets the
  // system's maximum (net.core.somaxconn) instead.
  if (im.listen_fd >= 0) ::listen(im.listen_fd, SOMAXCONN);
  // The HTTP threads start here, so that a refusal is an error before "listening on" (cpp-httplib's
  // own pool would start them inside listen() and terminate the process); listen() takes ownership.
  // Connections waiting for their client (idle between requests, or trickling a head) wait without
  // a thread (ConnectionParking); the workers serve requests only.
  raise_open_file_limit();
  if (Status st = im.http.start_workers(static_cast<std::size_t>(threads), kMaxParkedConnections); !st.ok()) return st.error();
  ctx.scheduler->start();
  im.listen_thread = std::thread([&im] {
    im.http.listen_after_bind();  // returns when stop() was called and every connection has ended
    std::lock_guard lk(im.mu);
    im.stopped = true;
    im.stopped_cv.notify_all();
  });
  {
    std::lock_guard lk(im.mu);
    im.started = true;
  }
  spdlog::info("listening on {} (model '{}', {} HTTP threads{})", server::listen_url(ctx.opts.host, port), ctx.opts.model_id, threads,
               ctx.opts.api_key.empty() ? "" : "; API key required");
  // Each request in the server holds a worker while it is read, generated and answered (a stream
  // whose client stopped reading, up to the 30 s write timeout): with no more workers than
  // requests, /health and /metrics can find none free and wait.
  if (threads <= ctx.opts.max_concurrent_requests)
    spdlog::warn("--http-threads {} is not above --max-concurrent-requests {}: {} request{} being generated or streamed (or "
                 "whose clients stopped reading) hold every HTTP worker, and /health and /metrics then wait for one (the "
                 "default, 0, gives {})", threads, ctx.opts.max_concurrent_requests, threads, threads == 1 ? "" : "s",
                 ctx.opts.max_concurrent_requests + 32);
  if (ctx.cors.enabled()) {
    const auto& origins = ctx.opts.cors_allow_origins;
    constexpr std::size_t kShown = 8;  // a list of thousands would make one line of 100 KB
    spdlog::info("CORS: browser pages from {}{} may call the API",
                 fmt::join(origins.begin(), origins.begin() + static_cast<std::ptrdiff_t>(std::min(origins.size(), kShown)), ", "),
                 origins.size() > kShown ? fmt::format(" and {} more origins", origins.size() - kShown) : "");
    if (std::find(origins.begin(), origins.end(), "null") != origins.end())
      spdlog::warn("--cors-allow-origin null: pages opened from file://, and sandboxed frames and data: pages of any site, all send "
                   "the Origin null: each of them may call the API");
  }
  return {};
}

int Server::port() const { return impl_->port; }

void Server::shutdown() {
  Impl& im = *impl_;
  {
    std::lock_guard lk(im.mu);
    if (im.shut) return;
    im.shut = true;
    if (!im.started) return;  // never served (start() failed or was not called): nothing to drain
  }
  im.ctx.draining = true;
  spdlog::info("shutting down: draining in-flight requests (grace {:g} s)", im.ctx.opts.drain_grace_seconds);
  im.ctx.scheduler->stop(std::chrono::milliseconds(static_cast<std::int64_t>(im.ctx.opts.drain_grace_seconds * 1000)));
  // give streaming handlers a moment to write their last events before the sockets close
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  im.http.stop();
}

void Server::wait() {
  Impl& im = *impl_;
  if (im.listen_thread.joinable()) im.listen_thread.join();
}

bool Server::wait_for(std::chrono::milliseconds timeout) {
  Impl& im = *impl_;
  if (!im.listen_thread.joinable()) return true;
  std::unique_lock lk(im.mu);
  if (!im.stopped_cv.wait_for(lk, timeout, [&im] { return im.stopped; })) return false;
  lk.unlock();
  im.listen_thread.join();
  return true;
}

Result<std::int64_t> parse_byte_size(std::string_view text) {
  std::string s(text);
  // A plain decimal number (digits, at most one '.'): strtod alone also took "0x10", "1e9" and
  // "inf" (a --prefix-cache-memory of 0x10 turned the cache off unsaid).
  const std::size_t pos = s.find_first_not_of("0123456789.");
  const std::string number = s.substr(0, pos);
  if (number.empty() || number == "." || std::count(number.begin(), number.end(), '.') > 1)
    return make_error(ErrorCode::kInvalidArgument, fmt::format("invalid byte size '{}': expected e.g. 2GiB, 512MiB, 1000000", s));
  const double value = std::strtod(number.c_str(), nullptr);
  std::string unit = pos == std::string::npos ? std::string() : s.substr(pos);
  unit.erase(0, unit.find_first_not_of(' '));
  // Units in any case (512mib, 1gb, 2G), as the other flags' names are: K/M/G/T and KiB… are
  // powers of 1024, KB… powers of 1000.
  for (char& ch : unit) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  double mult = 0;
  static const std::pair<const char*, double> units[] = {
      {"", 1}, {"b", 1}, {"k", 1024.0}, {"kb", 1e3}, {"kib", 1024.0}, {"m", 1048576.0}, {"mb", 1e6}, {"mib", 1048576.0},
      {"g", 1073741824.0}, {"gb", 1e9}, {"gib", 1073741824.0}, {"t", 1099511627776.0}, {"tb", 1e12}, {"tib", 1099511627776.0}};
  for (const auto& [u, m] : units) {
    if (unit == u) mult = m;
  }
  const double bytes = value * mult;
  if (mult == 0 || !std::isfinite(bytes) || bytes < 0 || bytes > 9.0e18) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("invalid byte size '{}': expected e.g. 2GiB, 512MiB, 1000000", s));
  }
  return static_cast<std::int64_t>(bytes);
}

}  // namespace mamba
