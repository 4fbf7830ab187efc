#include "server/scheduler.h"

#include <algorithm>
#include <exception>
#include <new>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "ops/ops.h"

namespace mamba::server {

using Clock = std::chrono::steady_clock;

namespace {
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
std::int64_t ns_since(Clock::time_point a) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - a).count();
}
// Largest prompt piece (rows of logits) when every prompt position's logits are needed.
constexpr std::int64_t kMaxAllLogitsFloats = std::int64_t{32} << 20;
// How often an iteration with every running sequence paused looks again for a consumer that
// caught up (RequestStream::take cannot wake the scheduler: it knows no scheduler).
constexpr auto kPausedPoll = std::chrono::milliseconds(5);
}  // namespace

struct Scheduler::Sequence {
  SequenceRequest req;
  std::shared_ptr<RequestStream> stream;
  std::optional<SequenceGenerator> gen;
  int slot = -1;
  std::size_t consumed = 0;         // prompt tokens prefilled so far (or restored from the prefix cache)
  std::size_t cached = 0;           // of those, restored from the prefix cache
  bool cache_looked = false;        // the prefix cache was asked (once, before its first piece)
  std::size_t branch_at = 0;        // a prefix to keep where the prompt parts from a kept one (0: none)
  bool has_pending = false;         // a sampled token not yet fed to the model
  std::int32_t pending = 0;
  bool done = false;                // finished; removed at the end of the phase
  std::optional<Error> error;
  std::optional<TokenEvent> last_event;  // the final token, delivered with the end of the stream
  Clock::time_point t_submit, t_admit, t_first;
  std::optional<Clock::time_point> t_prefill;  // its first prefill piece began
  std::optional<Clock::time_point> paused_since;  // left out of decode steps for its backlog since
  Clock::duration paused_total{};                 // time paused before paused_since
  double prefill_ms = 0;
  std::vector<float> prompt_logprobs;
  std::vector<std::vector<std::pair<std::int32_t, float>>> prompt_top_logprobs;
};

Scheduler::Scheduler(Model& model, const Tokenizer* tok, std::vector<std::int32_t> eos_ids,
                     const SchedulerOptions& opts, Metrics& metrics)
    : model_(model),
      tok_(tok),
      eos_ids_(std::move(eos_ids)),
      opts_(opts),
      metrics_(metrics),
      pool_(model, std::max(1, opts.slots)),
      prefix_cache_(model, opts.prefix_cache_bytes) {
  if (opts_.max_batch_size <= 0 || opts_.max_batch_size > pool_.size()) opts_.max_batch_size = pool_.size();
  granule_ = static_cast<int>(model_.config().prompt_granule());
  // A prompt piece is at least one granule (pieces end at chunk boundaries): a smaller budget is
  // raised to one, so every iteration may prefill that much in all, whoever's pieces they are.
  opts_.max_batch_prefill_tokens = std::max(opts_.max_batch_prefill_tokens, granule_);
  vocab_limit_ = vocab_limit(tok_, model_);
  metrics_.slots_total = pool_.size();
  metrics_.state_bytes_per_slot = pool_.state(0).nbytes();
}

Scheduler::~Scheduler() { stop(std::chrono::milliseconds(0)); }

void Scheduler::start() { thread_ = std::thread([this] { run(); }); }

std::shared_ptr<RequestStream> Scheduler::submit(SequenceRequest req) {
  std::vector<SequenceRequest> one;
  one.push_back(std::move(req));
  auto streams = submit_all(std::move(one));
  return streams.empty() ? nullptr : std::move(streams[0]);
}

std::vector<std::shared_ptr<RequestStream>> Scheduler::submit_all(std::vector<SequenceRequest> reqs) {
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<std::shared_ptr<RequestStream>> streams;
  const auto now = Clock::now();
  for (SequenceRequest& r : reqs) {
    auto seq = std::make_unique<Sequence>();
    seq->req = std::move(r);
    seq->stream = std::make_shared<RequestStream>();
    seq->t_submit = now;
    streams.push_back(seq->stream);
    seqs.push_back(std::move(seq));
  }
  {
    std::lock_guard lk(mu_);
    if (stopping_ || in_flight_ + static_cast<int>(seqs.size()) > opts_.max_in_flight) return {};
    in_flight_ += static_cast<int>(seqs.size());
    for (auto& seq : seqs) waiting_.push_back(std::move(seq));
    metrics_.queue_size = static_cast<std::int64_t>(waiting_.size());
  }
  cv_.notify_all();
  return streams;
}

void Scheduler::stop(std::chrono::milliseconds grace) {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return;
  const auto deadline = Clock::now() + grace;
  {
    std::unique_lock lk(mu_);
    while (in_flight_ > 0 && Clock::now() < deadline) cv_.wait_until(lk, std::min(deadline, Clock::now() + std::chrono::milliseconds(50)));
    if (in_flight_ > 0) {
      spdlog::warn("shutdown: grace period over, cancelling {} in-flight request(s)", in_flight_);
      cancel_all_ = true;
    }
  }
  cv_.notify_all();
  thread_.join();
}

void Scheduler::run() {
  for (;;) {
    if (!admit_and_drop()) break;
    bool decoded = false, prefilled = false;
    try {
      decoded = decode_step();
      prefilled = prefill_pieces();
    } catch (const std::bad_alloc&) {
      // A buffer that could not grow outside the model (which reports its own as an error: kIo,
      // that request alone): the logits rows of a step or a piece, a batch's lists. Which
      // sequences it left part-way is not known, so every running one fails with it; the server
      // goes on with the queue (it used to end the process: "error: out of memory", exit 2).
      fail_running(make_error(ErrorCode::kIo, "out of memory in the scheduler (the logits buffer of a decode step or a prompt "
                                              "piece could not grow): this request and those running beside it failed"));
      decoded = true;
    }
    if (decoded || prefilled)
      metrics_.iterations++;
    else
      wait_while_paused();
  }
}

void Scheduler::wait_while_paused() {
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, kPausedPoll, [&] { return cancel_all_ || (!waiting_.empty() && pool_.has_free()); });
}

bool Scheduler::admit_and_drop() {
  std::vector<std::unique_ptr<Sequence>> dropped;  // cancelled while queued
  {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return !waiting_.empty() || !running_.empty() || stopping_; });
    if (stopping_ && waiting_.empty() && running_.empty()) return false;
    if (cancel_all_) {
      for (auto& s : waiting_) s->stream->cancel(CancelReason::kShutdown);
      for (auto& s : running_) s->stream->cancel(CancelReason::kShutdown);
    }
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if ((*it)->stream->cancelled()) {
        dropped.push_back(std::move(*it));
        it = waiting_.erase(it);
        --in_flight_;
      } else {
        ++it;
      }
    }
    while (!waiting_.empty() && pool_.has_free()) {
      running_.push_back(std::move(waiting_.front()));
      waiting_.pop_front();
      Sequence& s = *running_.back();
      s.slot = pool_.acquire();
      s.t_admit = Clock::now();
      s.gen.emplace(tok_, vocab_limit_, s.req.opts, s.req.opts.eos_ids.empty() ? eos_ids_ : s.req.opts.eos_ids);
      s.req.opts.stop = {};  // the generator's matcher has them (up to 8 MiB a request)
      s.gen->observe_prompt(s.req.prompt);
    }
    metrics_.queue_size = static_cast<std::int64_t>(waiting_.size());
  }
  if (!dropped.empty()) cv_.notify_all();
  for (auto& s : dropped) {
    SequenceStats st;
    st.finish = FinishReason::kCancelled;
    st.cancelled_by = s->stream->cancel_reason();
    st.prompt_tokens = static_cast<int>(s->req.prompt.size());
    st.queue_ms = st.total_ms = ms_between(s->t_submit, Clock::now());
    s->stream->finish(std::move(st));
    metrics_.requests_cancelled++;
  }
  // running sequences whose client went away leave now
  bool any = false;
  for (auto& s : running_) {
    if (s->stream->cancelled()) {
      s->done = true;
      any = true;
    }
  }
  if (any) {
    for (std::size_t i = running_.size(); i-- > 0;) {
      if (running_[i]->done) finish_sequence(i, std::nullopt);
    }
  }
  metrics_.slots_in_use = pool_.in_use();
  metrics_.running = static_cast<std::int64_t>(running_.size());
  return true;
}

void Scheduler::emit(Sequence& s, TokenEvent ev) {
  if (s.gen->generated_ids().size() == 1) s.t_first = Clock::now();
  metrics_.generated_tokens++;
  if (s.gen->finished()) {
    ev.text_delta += s.gen->flush();
    s.done = true;
    s.last_event = std::move(ev);
  } else {
    s.has_pending = true;
    s.pending = ev.id;
    s.stream->push(std::move(ev));
  }
}

bool Scheduler::decode_step() {
  std::vector<std::size_t> ready;
  std::int64_t paused = 0;
  const auto backlog_limit = static_cast<std::size_t>(std::max(0, opts_.max_stream_backlog));
  const auto now = Clock::now();
  for (std::size_t i = 0; i < running_.size(); ++i) {
    Sequence& s = *running_[i];
    if (!s.has_pending || s.done) continue;
    const Clock::duration paused_for = s.paused_total + (s.paused_since ? now - *s.paused_since : Clock::duration{});
    if (backlog_limit > 0 && s.stream->backlog() >= backlog_limit && paused_for < opts_.max_stream_pause) {
      ++paused;
      if (!s.paused_since) s.paused_since = now;
      continue;
    }
    if (s.paused_since) {
      s.paused_total = paused_for;
      s.paused_since.reset();
    }
    ready.push_back(i);
  }
  metrics_.streams_paused = paused;
  if (ready.empty()) return false;
  const std::size_t n = ready.size();
  const std::size_t batch = std::min<std::size_t>(n, static_cast<std::size_t>(opts_.max_batch_size));
  std::vector<std::size_t> rows;
  rows.reserve(batch);
  const std::size_t start = batch < n ? decode_cursor_ % n : 0;
  for (std::size_t k = 0; k < batch; ++k) rows.push_back(ready[(start + k) % n]);
  decode_cursor_ = start + batch;
  std::sort(rows.begin(), rows.end());

  std::vector<std::int32_t> tokens(batch);
  std::vector<State*> states(batch);
  for (std::size_t b = 0; b < batch; ++b) {
    Sequence& s = *running_[rows[b]];
    tokens[b] = s.pending;
    states[b] = &pool_.state(s.slot);
  }
  const std::int64_t width = model_.logits_width();
  step_logits_.resize(batch * static_cast<std::size_t>(width));
  const auto t0 = Clock::now();
  Status st = model_.step(tokens, states, step_logits_.data());
  metrics_.decode_ns += ns_since(t0);
  metrics_.decode_steps++;
  metrics_.decode_batch_sum += static_cast<std::int64_t>(batch);
  // A non-finite logit fails only the rows that have one: Model::step wrote every row's logits, and
  // each row's are bitwise independent of its batch mates, so the others go on (one request's NaN
  // used to end every request of its step). Any other error fails the whole step. A failed row is
  // marked done (no row of `ready` was), which the sampling and emitting below skip.
  if (!st.ok()) {
    // bad_at[b]: the first non-finite logit of row b, or −1. Per row only when some row does hold
    // one (else the error is not about rows: every row fails with it).
    std::vector<std::int64_t> bad_at(batch, -1);
    bool per_row = false;
    if (st.error().code == ErrorCode::kNumerical)
      for (std::size_t b = 0; b < batch; ++b) {
        bad_at[b] = ops::find_non_finite(step_logits_.data() + b * static_cast<std::size_t>(width), width);
        per_row = per_row || bad_at[b] >= 0;
      }
    for (std::size_t b = 0; b < batch; ++b) {
      const float* row = step_logits_.data() + b * static_cast<std::size_t>(width);
      const std::int64_t bad = bad_at[b];
      if (per_row && bad < 0) continue;
      Sequence& s = *running_[rows[b]];
      s.has_pending = false;
      s.done = true;
      s.error = per_row ? make_error(ErrorCode::kNumerical,
                                     fmt::format("non-finite logit {} at id {} (weights or activations overflowed)", row[bad], bad))
                        : st.error();
    }
  }
  // Each row's log-softmax, sampling and detokenising (~50 µs greedy, ~200 µs sampled over a 50K
  // vocabulary: 8 rows took a quarter of a q8 mamba-130m step) on the compute threads, which are
  // idle here; every sequence has its own sampler and RNG, so the tokens are those of a serial
  // loop. Then the events go out in row order on this thread.
  // A task catches its own exceptions (one escaping would reach Scheduler::run: a std::bad_alloc
  // would fail every running request, anything else end the process): one such as std::bad_alloc
  // from the detokenizer fails that request alone.
  std::vector<std::optional<Result<TokenEvent>>> events(batch);
  ops::parallel_tasks(static_cast<std::int64_t>(batch), [&](std::int64_t b) {
    Sequence& s = *running_[rows[static_cast<std::size_t>(b)]];
    if (s.done) return;
    std::optional<Result<TokenEvent>>& ev = events[static_cast<std::size_t>(b)];
    try {
      ev.emplace(s.gen->next(
          std::span<float>(step_logits_.data() + static_cast<std::size_t>(b * width), static_cast<std::size_t>(width))));
    } catch (const std::bad_alloc&) {
      ev.emplace(make_error(ErrorCode::kIo, "out of memory while sampling the next token"));
    } catch (const std::exception& e) {
      ev.emplace(make_error(ErrorCode::kInternal, fmt::format("sampling the next token failed: {}", e.what())));
    }
  });
  for (std::size_t b = 0; b < batch; ++b) {
    Sequence& s = *running_[rows[b]];
    if (s.done) continue;
    s.has_pending = false;
    emit_or_fail(s, std::move(*events[b]));
  }
  reap_done();
  return true;
}

void Scheduler::emit_or_fail(Sequence& s, Result<TokenEvent> ev) {
  if (!ev.ok()) {
    s.done = true;
    s.error = ev.error();
    return;
  }
  emit(s, std::move(ev).value());
}

void Scheduler::sample_and_emit(Sequence& s, std::span<float> row) { emit_or_fail(s, s.gen->next(row)); }

void Scheduler::fail_running(const Error& err) {
  for (auto& s : running_)
    if (!s->done) {
      s->done = true;
      s->error = err;
    }
  reap_done();
}

void Scheduler::reap_done() {
  for (std::size_t i = running_.size(); i-- > 0;) {
    if (running_[i]->done) finish_sequence(i, running_[i]->error);
  }
}

bool Scheduler::prefill_pieces() {
  const std::int64_t budget = opts_.max_batch_prefill_tokens;
  const std::int64_t g = granule_;
  const std::int64_t width = model_.logits_width();
  std::int64_t used = 0;
  // Round robin over the prompts still prefilling: each iteration starts after the one the last
  // iteration served first, so a short prompt behind a long one waits one iteration, not until
  // the long one is done (a 2-token request behind a 65,536-token prompt waited 6.7 s).
  const std::size_t count = running_.size();
  std::optional<std::size_t> first_served;
  for (std::size_t k = 0; k < count; ++k) {
    const std::size_t idx = (prefill_cursor_ + k) % count;
    Sequence& s = *running_[idx];
    const auto size = static_cast<std::int64_t>(s.req.prompt.size());
    if (s.done || static_cast<std::int64_t>(s.consumed) >= size) continue;
    if (s.consumed == 0 && s.req.prompt_group != 0 && waits_for_group(idx)) continue;
    const bool want_all = s.req.opts.prompt_logprobs;
    if (!s.cache_looked) {  // its prompt's longest cached prefix, unless every position's logprobs are wanted
      s.cache_looked = true;
      if (prefix_cache_.enabled() && s.consumed == 0) {
        const PrefixCache::Found found = prefix_cache_.lookup(s.req.prompt, pool_.state(s.slot), !want_all);
        s.cached = s.consumed = found.restored;
        if (s.cached > 0) {
          metrics_.prefix_cache_hits++;
          metrics_.prefix_cache_tokens += static_cast<std::int64_t>(s.cached);
        }
        // The tokens it shares with a kept prefix that is not its own (a system prompt before
        // another user's text): kept too, at their last whole granule, for the next such prompt.
        s.branch_at = found.shared / static_cast<std::size_t>(g) * static_cast<std::size_t>(g);
      }
    }
    const auto consumed = static_cast<std::int64_t>(s.consumed);  // (the cached prefix counted)
    const std::int64_t remaining = size - consumed;
    std::int64_t left = budget - used;
    if (want_all) {
      std::int64_t cap = std::max<std::int64_t>(g, (kMaxAllLogitsFloats / width) / g * g);
      left = std::min(left, cap);
    }
    std::int64_t n = 0;
    if (remaining <= left) {
      n = remaining;
    } else {
      n = (left / g) * g;
      if (n == 0) {
        if (used > 0) continue;  // budget spent this iteration; others may still fit
        n = std::min(remaining, g);  // a budget below one granule still makes progress
      }
    }
    // The prefix cache keeps the State after the prompt's last whole granule short of its end
    // (at least one token is left to prefill for its logits), and where it parts from a kept
    // prefix: a piece ends at each (both whole granules, so pieces stay aligned).
    const std::int64_t save_at = prefix_cache_.enabled() ? (size - 1) / g * g : 0;
    const auto branch_at = static_cast<std::int64_t>(s.branch_at);
    for (const std::int64_t at : {branch_at, save_at})
      if (at > consumed && consumed + n > at) n = at - consumed;
    const bool last = consumed + n == size;
    const LogitsMode mode = want_all ? LogitsMode::kAll : (last ? LogitsMode::kLast : LogitsMode::kNone);
    const std::int64_t rows = mode == LogitsMode::kAll ? n : 1;
    if (prefill_logits_.size() < static_cast<std::size_t>(rows * width)) {
      prefill_logits_.resize(static_cast<std::size_t>(rows * width));
    }
    std::span<const std::int32_t> piece(s.req.prompt.data() + consumed, static_cast<std::size_t>(n));
    const auto t0 = Clock::now();
    if (!s.t_prefill) s.t_prefill = t0;
    if (!first_served) first_served = idx;
    Status st = model_.prefill(piece, pool_.state(s.slot), mode, prefill_logits_.data());
    const std::int64_t ns = ns_since(t0);
    metrics_.prefill_ns += ns;
    metrics_.prefill_calls++;
    metrics_.prefill_tokens += n;
    s.prefill_ms += static_cast<double>(ns) * 1e-6;
    used += n;
    s.consumed += static_cast<std::size_t>(n);
    if (!st.ok()) {
      s.done = true;
      s.error = st.error();
      continue;
    }
    if (const auto at = static_cast<std::int64_t>(s.consumed); at > 0 && (at == save_at || at == branch_at)) {
      prefix_cache_.insert(std::span<const std::int32_t>(s.req.prompt.data(), static_cast<std::size_t>(at)), pool_.state(s.slot));
      metrics_.prefix_cache_entries = static_cast<std::int64_t>(prefix_cache_.size());
      metrics_.prefix_cache_bytes = prefix_cache_.bytes();
    }
    if (want_all) {
      lsm_scratch_.resize(static_cast<std::size_t>(vocab_limit_));
      for (std::int64_t r = 0; r < n; ++r) {
        const std::int64_t pos = consumed + r + 1;
        if (pos >= size) break;
        std::span<const float> row(prefill_logits_.data() + r * width, static_cast<std::size_t>(width));
        Status ls = log_softmax(row, vocab_limit_, lsm_scratch_);
        if (!ls.ok()) {
          s.done = true;
          s.error = ls.error();
          break;
        }
        const std::int32_t id = s.req.prompt[static_cast<std::size_t>(pos)];
        s.prompt_logprobs.push_back(id < vocab_limit_ ? lsm_scratch_[static_cast<std::size_t>(id)]
                                                      : -std::numeric_limits<float>::infinity());
        if (s.req.prompt_top_logprobs && s.req.opts.top_logprobs > 0)
          s.prompt_top_logprobs.push_back(top_logprobs(lsm_scratch_, s.req.opts.top_logprobs));
      }
      if (s.done) continue;
    }
    const std::int64_t last_row = mode == LogitsMode::kAll ? n - 1 : 0;
    if (last && s.req.prompt_group != 0)
      share_prompt(s, std::span<const float>(prefill_logits_.data() + last_row * width, static_cast<std::size_t>(width)));
    if (last && s.req.publish_prompt_scores)  // handed over, not copied: the stream sends them, not its stats
      s.stream->publish_prompt({std::move(s.prompt_logprobs), std::move(s.prompt_top_logprobs)});
    if (last && s.gen->finished()) {  // max_tokens 0 (echo: the prompt scored, nothing generated)
      s.done = true;
    } else if (last) {
      sample_and_emit(s, std::span<float>(prefill_logits_.data() + last_row * width, static_cast<std::size_t>(width)));
    }
  }
  if (first_served) prefill_cursor_ = *first_served + 1;
  reap_done();
  return first_served.has_value();
}

bool Scheduler::waits_for_group(std::size_t idx) const {
  const Sequence& s = *running_[idx];
  for (std::size_t j = 0; j < running_.size(); ++j) {
    const Sequence& o = *running_[j];
    if (j == idx || o.done || o.req.prompt_group != s.req.prompt_group || o.consumed >= o.req.prompt.size()) continue;
    // o prefills the prompt, or will: it began, or it was admitted first (running_ keeps admission order).
    if (o.consumed > 0 || j < idx) return true;
  }
  return false;
}

void Scheduler::share_prompt(Sequence& leader, std::span<const float> row) {
  for (auto& f : running_) {
    Sequence& s = *f;
    if (&s == &leader || s.done || s.consumed != 0 || s.req.prompt_group != leader.req.prompt_group ||
        s.req.prompt != leader.req.prompt || !pool_.state(s.slot).copy_from(pool_.state(leader.slot)))
      continue;
    s.consumed = leader.consumed;
    s.cached = leader.cached;  // its prompt came from the same cached prefix
    // Its log line shows the prefill it shares (queue_ms up to the leader's start, its prefill_ms).
    s.t_prefill = leader.t_prefill;
    s.prefill_ms = leader.prefill_ms;
    if (leader.req.opts.prompt_logprobs) {
      s.prompt_logprobs = leader.prompt_logprobs;
      s.prompt_top_logprobs = leader.prompt_top_logprobs;
    }
    if (s.req.publish_prompt_scores) s.stream->publish_prompt({std::move(s.prompt_logprobs), std::move(s.prompt_top_logprobs)});
    if (s.gen->finished()) {  // max_tokens 0 (echo)
      s.done = true;
      continue;
    }
    shared_row_.assign(row.begin(), row.end());  // sampling may change its row in place
    sample_and_emit(s, std::span<float>(shared_row_));
  }
}

void Scheduler::finish_sequence(std::size_t idx, const std::optional<Error>& err) {
  std::unique_ptr<Sequence> s = std::move(running_[idx]);
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(idx));
  const auto now = Clock::now();
  SequenceStats st;
  st.queue_ms = ms_between(s->t_submit, s->t_prefill.value_or(s->t_admit));
  st.prefill_ms = s->prefill_ms;
  st.total_ms = ms_between(s->t_submit, now);
  st.prompt_tokens = static_cast<int>(s->req.prompt.size());
  st.cached_tokens = static_cast<int>(s->cached);
  st.generated_tokens = static_cast<int>(s->gen->generated_ids().size());
  st.decode_ms = st.generated_tokens > 0 ? ms_between(s->t_first, now) : 0.0;
  st.seed = s->gen->seed();
  st.prompt_logprobs = std::move(s->prompt_logprobs);
  st.prompt_top_logprobs = std::move(s->prompt_top_logprobs);
  metrics_.prompt_tokens += static_cast<std::int64_t>(s->consumed);
  // Free the slot and the in-flight count before the client hears of the end, so that a client
  // that reads /metrics or sends its next request right after sees the capacity back.
  pool_.release(s->slot);
  metrics_.slots_in_use = pool_.in_use();
  metrics_.running = static_cast<std::int64_t>(running_.size());
  if (running_.empty()) metrics_.streams_paused = 0;  // else the next decode step recounts
  {
    std::lock_guard lk(mu_);
    --in_flight_;
  }
  if (err) {
    st.finish = FinishReason::kError;
    metrics_.requests_failed++;
    s->stream->fail(*err, std::move(st));
  } else if (!s->gen->finished()) {
    st.finish = FinishReason::kCancelled;
    st.cancelled_by = s->stream->cancel_reason();
    metrics_.requests_cancelled++;
    s->stream->finish(std::move(st));
  } else {
    st.finish = s->gen->finish_reason();
    metrics_.requests_ok++;
    metrics_.request_duration.observe(st.total_ms * 1e-3);
    metrics_.queue_duration.observe(st.queue_ms * 1e-3);
    if (st.generated_tokens >= 1) metrics_.time_to_first_token.observe(ms_between(s->t_submit, s->t_first) * 1e-3);
    if (st.generated_tokens >= 2) metrics_.time_per_output_token.observe(st.decode_ms * 1e-3 / (st.generated_tokens - 1));
    s->stream->finish(std::move(st), std::move(s->last_event));
  }
  cv_.notify_all();
}

}  // namespace mamba::server
