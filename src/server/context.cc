#include "server/context.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "server/bounded_http_server.h"
#include "server/json_fields.h"

namespace mamba::server {

std::string random_instance_tag() {
  std::random_device rd;
  return fmt::format("{:08x}", static_cast<std::uint32_t>(rd()));
}

void send_error(const httplib::Request& req, httplib::Response& res, const ApiError& err, Metrics& metrics) {
  // A refusal of the request by the server's own checks: counted (429 as overloaded, other 4xx as
  // rejected) and logged. An admitted request's failure or cancellation (generation_error) was
  // counted by the scheduler and logged when its sequence ended (log_request).
  if (!err.admitted) {
    if (err.status == 429) {
      metrics.requests_overloaded++;
    } else if (err.status < 500) {
      metrics.requests_rejected++;
    }
    log_refusal(req, err.status_for(req.path), err.type, err.message);
  }
  // A full queue: a client may try again in a second (the OpenAI SDKs wait as Retry-After says).
  if (err.status == 429) res.set_header("Retry-After", "1");
  res.status = err.status_for(req.path);
  res.set_content(err.body_for(req.path), "application/json");
}

namespace {
constexpr std::size_t kTrimBytes = std::size_t{1} << 20;  ///< answers / bodies that large are followed by a trim

/// malloc_trim(0) on a thread of its own a second after a large answer was made (by then it has
/// usually been sent and its buffers freed), one at a time: the trim walks every malloc arena under
/// its lock (hundreds of ms after a burst of large answers, stalling other threads' malloc
/// meanwhile), so it runs neither on the request path nor once per answer.
void trim_heap_soon() {
#ifdef __GLIBC__
  static std::atomic<bool> pending{false};
  if (pending.exchange(true)) return;  // the pending trim covers this answer too
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    pending.store(false);
    ::malloc_trim(0);
  }).detach();
#endif
}
}  // namespace

void set_json_body(httplib::Response& res, std::string body) {
  const bool large = body.size() >= kTrimBytes;
  res.body = std::move(body);
  res.set_header("Content-Type", "application/json");
  if (large) trim_heap_soon();
}

BodyBudget::Lease BodyBudget::acquire(std::size_t body_bytes) {
  if (body_bytes < kSmall) return {};
  const std::size_t bytes = std::min(body_bytes, capacity_);
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return used_ + bytes <= capacity_; });
  used_ += bytes;
  return Lease(this, bytes);
}

std::size_t BodyBudget::in_use() const {
  std::lock_guard lk(mu_);
  return used_;
}

void BodyBudget::Lease::release() {
  if (!owner_) return;
  {
    std::lock_guard lk(owner_->mu_);
    owner_->used_ -= bytes_;
  }
  owner_->cv_.notify_all();
  owner_ = nullptr;
  // The DOM and the tokenizer's vectors of a large body are freed by now, but stay in this thread's
  // malloc arena: each of up to 8 × cores arenas would keep its own ~300 MB (24 clients' 8 MiB
  // bodies, handled two at a time, still left 4.6 GB). Trimmed here, the memory goes back at once.
#ifdef __GLIBC__
  if (bytes_ >= kTrimBytes) ::malloc_trim(0);
#endif
}

void drop_body_dom(nlohmann::json& body) { body = nlohmann::json(); }

std::optional<ApiError> prepare_prompt(const ServerContext& ctx, const std::string& text,
                                       bool add_special_tokens, const std::vector<std::int32_t>& ids,
                                       std::int64_t truncate, int& max_new_tokens, bool max_given,
                                       const PromptFields& fields, std::vector<std::int32_t>& out) {
  if (!ids.empty()) {
    out = ids;
  } else {
    auto enc = ctx.tok->encode(text, add_special_tokens);
    if (!enc.ok()) return ApiError::validation(fmt::format("prompt could not be tokenized: {}", enc.error().message));
    out = std::move(enc).value();
  }
  if (out.empty()) return ApiError::validation("the prompt is empty after tokenization");
  const std::int64_t vocab = vocab_limit(ctx.tok.get(), *ctx.model);
  for (std::int32_t id : out) {
    if (id < 0 || id >= vocab) {
      return ApiError::validation(fmt::format("{} token id {} is outside the vocabulary [0, {})", fields.prompt, id, vocab));
    }
  }
  if (truncate > 0 && static_cast<std::int64_t>(out.size()) > truncate) {
    out.erase(out.begin(), out.end() - truncate);
  }
  const auto n = static_cast<std::int64_t>(out.size());
  if (n > ctx.limits.max_input_tokens) {
    ApiError e = ApiError::validation(fmt::format("{} must have at most {} tokens (--max-input-tokens, the server's maximum context "
                                                  "length for a prompt). Given: {}", fields.prompt, ctx.limits.max_input_tokens, n));
    e.openai_code = "context_length_exceeded";
    return e;
  }
  if (!max_given && n + max_new_tokens > ctx.limits.max_total_tokens && n < ctx.limits.max_total_tokens)
    max_new_tokens = static_cast<int>(ctx.limits.max_total_tokens - n);  // the default, shrunk to fit
  if (n + max_new_tokens > ctx.limits.max_total_tokens) {
    ApiError e = ApiError::validation(fmt::format("{} tokens + {} must be <= {} (--max-total-tokens, the server's maximum context "
                                                  "length). Given: {} {} tokens and {} {}",
                                                  fields.prompt, fields.max_tokens, ctx.limits.max_total_tokens, n, fields.prompt,
                                                  max_new_tokens, fields.max_tokens));
    e.openai_code = "context_length_exceeded";
    return e;
  }
  return std::nullopt;
}

std::optional<ApiError> submit(ServerContext& ctx, SequenceRequest req, std::shared_ptr<RequestStream>& out) {
  std::vector<SequenceRequest> one;
  one.push_back(std::move(req));
  std::vector<std::shared_ptr<RequestStream>> streams;
  if (auto e = submit_all(ctx, std::move(one), streams)) return e;
  out = std::move(streams[0]);
  return std::nullopt;
}

std::optional<ApiError> submit_all(ServerContext& ctx, std::vector<SequenceRequest> reqs,
                                   std::vector<std::shared_ptr<RequestStream>>& out) {
  if (ctx.draining.load()) return ApiError{503, "unavailable", "the server is shutting down"};
  const std::size_t count = reqs.size();
  out = ctx.scheduler->submit_all(std::move(reqs));
  if (out.empty()) {
    if (ctx.draining.load()) return ApiError{503, "unavailable", "the server is shutting down"};
    const int n = ctx.opts.max_concurrent_requests;
    return ApiError{429, "overloaded",
                    count == 1 ? fmt::format("Model is overloaded: {} request{} already in flight (--max-concurrent-requests)", n,
                                             n == 1 ? " is" : "s are")
                               : fmt::format("Model is overloaded: fewer than {} places are left of the {} that "
                                             "--max-concurrent-requests allows (each of the request's sequences — OpenAI's n choices, TGI's best_of — takes one)",
                                             count, n)};
  }
  ctx.metrics.requests_received += static_cast<std::int64_t>(count);
  return std::nullopt;
}

Collected collect(RequestStream& stream, const std::function<bool()>& client_gone) {
  RequestStream* const one[] = {&stream};
  return std::move(collect_all(one, client_gone)[0]);
}

std::vector<Collected> collect_all(std::span<RequestStream* const> streams, const std::function<bool()>& client_gone) {
  std::vector<Collected> c(streams.size());
  StreamReader reader({streams.begin(), streams.end()});
  constexpr auto kPoll = std::chrono::milliseconds(250);
  auto next_check = std::chrono::steady_clock::now() + kPoll;
  bool client_left = false;
  while (reader.open() > 0) {
    if (client_gone && !client_left && std::chrono::steady_clock::now() >= next_check) {
      if (client_gone()) {  // as a stream whose client left: the scheduler drops the sequences
        client_left = true;
        reader.cancel_open(CancelReason::kClientGone);
      }
      next_check = std::chrono::steady_clock::now() + kPoll;
    }
    std::size_t i = 0;
    RequestStream::Update u;
    if (!reader.next(i, u, kPoll)) continue;
    for (auto& t : u.tokens) {
      c[i].text += t.text_delta;
      c[i].tokens.push_back(std::move(t));
    }
    if (!u.done) continue;
    c[i].error = u.error;
    c[i].stats = streams[i]->stats();
    if (c[i].error || c[i].stats.finish == FinishReason::kCancelled) reader.cancel_open(CancelReason::kAnswerEnded);
  }
  for (Collected& x : c) x.client_left = client_left;
  return c;
}

ApiError generation_error(const Collected& c) {
  ApiError e = c.error ? ApiError{424, "generation", c.error->message}
               : c.client_left
                   ? ApiError{400, "cancelled",
                              "the request was cancelled: the client closed its connection, or its sending side, before the "
                              "answer (a half-close counts as leaving: keep the connection open until the answer, or stream)"}
                   : ApiError{503, "unavailable", "the request was cancelled (server shutting down)"};
  e.admitted = true;
  return e;
}

std::optional<ApiError> answer_error(std::span<const Collected> cs) {
  for (const bool want_error : {true, false})
    for (const Collected& c : cs)
      if (want_error ? bool(c.error) : c.stats.finish == FinishReason::kCancelled) return generation_error(c);
  return std::nullopt;
}

void log_refusal(const httplib::Request& req, int status, const std::string& type, const std::string& message) {
  auto word = [](const std::string& s) {
    if (s.empty()) return std::string("-");
    const bool plain = std::all_of(s.begin(), s.end(), [](char c) { return c > ' ' && c < 0x7f && c != '"'; });
    return plain ? s : fmt::format("{:?}", s);
  };
  // A head cpp-httplib could not parse leaves remote_addr empty: the socket still names the client.
  const std::string client = req.remote_addr.empty() ? BoundedHttpServer::current_peer_address() : req.remote_addr;
  const std::string rid = client_request_id(req);  // visible ASCII, no spaces: one word
  spdlog::info("refused {} {} client={}{} status={} error_type={} error={:?}", word(shown_text(req.method, 16)),
               word(shown_text(req.path, 200)), word(client), rid.empty() ? "" : " x_request_id=" + rid, status, type, message);
}

void log_request(std::uint64_t id, const char* route, const std::string& client, const std::string& client_request_id,
                 const SequenceStats& st, const std::optional<Error>& err) {
  // The client's id is visible ASCII without spaces (is_echoable_request_id): one word of the line.
  spdlog::info("req={} route={} client={}{} prompt_tokens={} generated_tokens={} queue_ms={:.1f} prefill_ms={:.1f} decode_ms={:.1f} total_ms={:.1f} finish={}{}{}",
               id, route, client.empty() ? "-" : client,
               is_echoable_request_id(client_request_id) ? " x_request_id=" + client_request_id : std::string(),
               st.prompt_tokens, st.generated_tokens, st.queue_ms, st.prefill_ms, st.decode_ms, st.total_ms,
               err ? "error" : finish_reason_name(st.finish),
               err                                          ? fmt::format(" error={:?}", err->message)  // escaped, as log_refusal's
               : st.cancelled_by != CancelReason::kNone ? fmt::format(" cancelled_by={}", cancel_reason_name(st.cancelled_by))
                                                          : std::string(),
               st.cached_tokens > 0 ? fmt::format(" cached_tokens={}", st.cached_tokens) : std::string());
}

bool is_echoable_request_id(std::string_view id) {
  return !id.empty() && id.size() <= kMaxRequestIdBytes &&
         std::all_of(id.begin(), id.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

std::string client_request_id(const httplib::Request& req) {
  if (req.get_header_value_count("x-request-id") != 1) return "";
  std::string id = req.get_header_value("x-request-id");
  return is_echoable_request_id(id) ? id : std::string();
}

bool is_generation_path(std::string_view path) {
  return path == "/v1/completions" || path == "/v1/chat/completions" || path == "/generate" || path == "/generate_stream" ||
         path == "/";
}

void set_request_id_header(const httplib::Request& req, httplib::Response& res, const std::string& own) {
  if (res.has_header("x-request-id")) return;
  const std::string client = client_request_id(req);
  const std::string& id = client.empty() ? own : client;
  if (!id.empty()) res.set_header("x-request-id", id);
}

std::string token_text(const ServerContext& ctx, std::int32_t id) {
  auto r = ctx.tok->token_text(id);
  return r.ok() ? std::move(r).value() : std::string();
}

std::string token_bytes(const ServerContext& ctx, std::int32_t id) {
  auto r = ctx.tok->token_bytes(id);
  return r.ok() ? std::move(r).value() : std::string();
}

std::string sse_data(const std::string& payload) { return "data: " + payload + "\n\n"; }

void set_sse_response(const httplib::Request& req, httplib::Response& res, std::vector<std::shared_ptr<RequestStream>> streams,
                      SseHandlers h) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  // Each request is logged once, with its final stats, when its sequence ends (on the scheduler's
  // thread): also while the pump below is stuck writing to a client that stopped reading (its
  // socket write waits up to the write timeout: a shutdown that ended such streams exited before
  // their line was logged), and for a client that left (at the scheduler's next step, which under
  // load can be seconds away). (h.on_close captures no stream: the stream holds it.)
  if (h.on_close)
    for (auto& s : streams) s->on_end(h.on_close);
  auto cancel_all = [streams](CancelReason why) {
    for (auto& s : streams) s->cancel(why);
  };
  httplib::ContentProviderWithoutLength pump = [streams, cancel_all, h](std::size_t /*offset*/, httplib::DataSink& sink) -> bool {
    // A failed write ends the answer: the client left (the write fails at once), or it stopped
    // reading (the write waited out the server's 30 s write timeout; any wait of a second or more
    // counts as that).
    auto last_write = std::chrono::steady_clock::now();
    auto write = [&](const std::string& s) {
      if (s.empty()) return true;
      const auto t0 = std::chrono::steady_clock::now();
      if (sink.write(s.data(), s.size())) {
        last_write = std::chrono::steady_clock::now();
        return true;
      }
      cancel_all(std::chrono::steady_clock::now() - t0 >= std::chrono::seconds(1) ? CancelReason::kClientNotReading
                                                                                  : CancelReason::kClientGone);
      return false;
    };
    std::vector<RequestStream*> raw;
    for (const auto& s : streams) raw.push_back(s.get());
    StreamReader reader(std::move(raw));
    std::vector<SequenceStats> stats(streams.size());
    for (;;) {
      // SSE comment as heartbeat after a second without a byte written: lets a vanished client be
      // noticed while the request is queued, and while tokens come but their text is held back (a
      // stop string may be starting: OpenAI's routes then write nothing, and a client that left
      // kept its sequence generating to max_tokens).
      if (std::chrono::steady_clock::now() - last_write > std::chrono::seconds(1) && !write(": ping\n\n")) return false;
      std::size_t i = 0;
      RequestStream::Update u;
      if (!reader.next(i, u, std::chrono::milliseconds(250))) continue;
      if (u.prompt && h.on_prompt && !write(h.on_prompt(i, *u.prompt))) return false;
      const bool ok_end = u.done && !u.error && streams[i]->stats().finish != FinishReason::kCancelled;
      if ((!u.tokens.empty() || ok_end) && !write(h.on_tokens(i, u.tokens, ok_end, streams[i]->stats()))) return false;
      if (u.done && !ok_end) {  // the answer ends with this choice's error; the other choices are dropped
        reader.cancel_open(CancelReason::kAnswerEnded);
        Collected c;
        c.error = u.error;
        (void)write(h.on_error(generation_error(c)));
        if (h.on_end) (void)write(h.on_end());
        sink.done();
        return true;
      }
      if (u.done) stats[i] = streams[i]->stats();
      if (reader.open() == 0) {
        if (h.on_all_done && !write(h.on_all_done(stats))) return false;
        if (h.on_end) (void)write(h.on_end());
        sink.done();
        return true;
      }
    }
  };
  auto release = [cancel_all](bool /*success*/) {
    // Connection closed (normally or not): make sure the sequences leave the scheduler (on_end
    // above logs each with the counts it reached when the scheduler drops it).
    cancel_all(CancelReason::kClientGone);
  };
  if (req.version == "HTTP/1.0") {
    res.set_header("Connection", "close");
    BoundedHttpServer::close_after_answer();  // the end of the connection ends the answer
    res.set_content_provider("text/event-stream", std::move(pump), std::move(release));
  } else {
    res.set_chunked_content_provider("text/event-stream", std::move(pump), std::move(release));
  }
}

}  // namespace mamba::server
