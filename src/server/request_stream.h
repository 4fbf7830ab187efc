// RequestStream: the channel between the scheduler thread (producer) and the HTTP handler thread
// of one request (consumer): generated token events, then exactly one end (finish or error).
// The consumer may cancel at any time (client gone); the scheduler drops the sequence at its next
// iteration.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "mamba/generate.h"
#include "mamba/status.h"

namespace mamba::server {

/// Why a request was cancelled (the first cancel() names it).
enum class CancelReason : std::uint8_t {
  kNone,
  kClientGone,        ///< the client closed its connection (or its sending side), or a write to it failed at once
  kClientNotReading,  ///< a write to the client waited out the server's write timeout (it stopped reading)
  kShutdown,          ///< the server's shutdown grace period ended
  kAnswerEnded,       ///< another choice of the same request (OpenAI's `n`) failed, so the answer ended
};
/// "client_gone", "client_not_reading", "shutdown", "answer_ended" ("" for kNone).
const char* cancel_reason_name(CancelReason r);

/// Timings and counts of one finished request (milliseconds of wall time).
struct SequenceStats {
  double queue_ms = 0;    ///< submit → its first prefill piece (waiting for a slot, then for prefill budget)
  double prefill_ms = 0;  ///< inside Model::prefill for this prompt
  double decode_ms = 0;   ///< first token → last token
  double total_ms = 0;    ///< submit → end
  int prompt_tokens = 0;
  int cached_tokens = 0;  ///< of prompt_tokens, those whose State came from the prefix cache (not prefilled)
  int generated_tokens = 0;
  std::uint64_t seed = 0;
  FinishReason finish = FinishReason::kNone;
  CancelReason cancelled_by = CancelReason::kNone;  ///< with finish kCancelled: why
  std::vector<float> prompt_logprobs;  ///< [prompt_tokens − 1] when requested: token i given < i
  /// [prompt_tokens − 1] when SequenceRequest::prompt_top_logprobs (with prompt_logprobs and
  /// top_logprobs > 0): the top_logprobs likeliest ids at each of those positions (top_logprobs()
  /// order), for OpenAI's echo + logprobs.
  std::vector<std::vector<std::pair<std::int32_t, float>>> prompt_top_logprobs;
};

/// Wakes one consumer that reads several streams at once (the `n` choices of an OpenAI request):
/// every stream attached to it bumps its count on each push, prompt, finish and fail, so the
/// consumer polls the streams (RequestStream::take with a zero timeout) and then waits here for
/// the count to move past what it read before polling — no event is missed, none is waited for.
class StreamSignal {
 public:
  /// The count now; read it BEFORE polling the streams.
  std::uint64_t count() const;
  /// Waits until the count differs from `seen`, or `timeout`. Returns whether it moved.
  bool wait(std::uint64_t seen, std::chrono::milliseconds timeout);
  void notify();

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t count_ = 0;
};

class RequestStream {
 public:
  /// The prompt's logprobs (SequenceStats' prompt_logprobs / prompt_top_logprobs), published
  /// when its prefill ends so a stream can send them before the first token.
  struct PromptScores {
    std::vector<float> logprobs;
    std::vector<std::vector<std::pair<std::int32_t, float>>> top;
  };
  /// What the consumer takes in one call: the prompt's scores (once), new tokens, and whether the
  /// stream has ended.
  struct Update {
    std::optional<PromptScores> prompt;  ///< once, in the first Update after publish_prompt()
    std::vector<TokenEvent> tokens;
    bool done = false;
    std::optional<Error> error;  ///< set when the sequence failed (done is true too)
  };

  // ---- consumer (HTTP thread) ----
  /// Waits up to `timeout` for tokens or the end; moves them out. Returns false on timeout with
  /// nothing new.
  bool take(Update& out, std::chrono::milliseconds timeout);
  /// Runs `fn(stats, error)` once, when the stream has ended: at once on this thread if it has,
  /// else on the producer's thread right after finish() / fail() (so a consumer that leaves early —
  /// its client gone — still learns the counts the sequence reached, however long the scheduler
  /// takes to drop it). One callback per stream; `fn` must not call back into the stream.
  void on_end(std::function<void(const SequenceStats&, const std::optional<Error>&)> fn);
  /// From now on every event also notifies `signal` (shared by the streams one consumer reads).
  /// Events before the call only wake take(): the consumer polls once after attaching.
  void attach(std::shared_ptr<StreamSignal> signal);
  /// Asks the scheduler to drop the sequence (idempotent; the first call's reason is kept).
  void cancel(CancelReason why) {
    auto none = static_cast<std::uint8_t>(CancelReason::kNone);
    reason_.compare_exchange_strong(none, static_cast<std::uint8_t>(why));
    cancelled_.store(true);
  }
  bool cancelled() const { return cancelled_.load(); }
  /// The first cancel()'s reason (kNone before any).
  CancelReason cancel_reason() const { return static_cast<CancelReason>(reason_.load()); }
  /// Token events pushed and not yet taken: how far the consumer lags. A stream consumer blocked
  /// in a write (its client stopped reading) lets it grow; the scheduler pauses the sequence at
  /// SchedulerOptions::max_stream_backlog, and the next take() (the client reads again) empties it.
  std::size_t backlog() const { return backlog_.load(std::memory_order_relaxed); }
  /// Valid after an Update with done = true.
  const SequenceStats& stats() const { return stats_; }

  // ---- producer (scheduler thread) ----
  /// Appends one token event for the consumer (delivered in push order). Only before finish() / fail().
  void push(TokenEvent ev);
  /// Publishes the prompt's scores (at most once, before the first push()).
  void publish_prompt(PromptScores scores);
  /// Ends the stream; `last` (the final token, when the sequence finished normally) is delivered
  /// in the same Update as done = true, so consumers know which token is the last one.
  void finish(SequenceStats stats, std::optional<TokenEvent> last = std::nullopt);
  /// Ends the stream with an error, delivered after the events already pushed. At most one of
  /// finish() / fail() per stream.
  void fail(Error err, SequenceStats stats);

 private:
  /// fn(stats_, error_) when set (after done_, outside the lock).
  void run_on_end(std::function<void(const SequenceStats&, const std::optional<Error>&)> fn);
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<TokenEvent> pending_;
  std::optional<PromptScores> pending_prompt_;
  bool done_ = false;
  std::optional<Error> error_;
  SequenceStats stats_;
  std::function<void(const SequenceStats&, const std::optional<Error>&)> on_end_;
  std::shared_ptr<StreamSignal> signal_;  ///< attach()'s, under mu_
  /// Wakes take() and the attached signal (after an event, outside the lock).
  void wake(const std::shared_ptr<StreamSignal>& signal);
  std::atomic<bool> cancelled_{false};
  std::atomic<std::uint8_t> reason_{static_cast<std::uint8_t>(CancelReason::kNone)};
  std::atomic<std::size_t> backlog_{0};  ///< pending_.size(), readable without the lock
};

/// Reads several streams from one consumer thread (the choices of one request): next() gives the
/// next update of any stream not yet ended, taking them in turn, and waits on their shared
/// StreamSignal when none has one. Non-owning: the streams must outlive the reader.
class StreamReader {
 public:
  explicit StreamReader(std::vector<RequestStream*> streams);
  /// The next update of an open stream, its index in `which`; waits up to `timeout` for one and
  /// returns false when none came. An update with done = true closes its stream (not read again).
  bool next(std::size_t& which, RequestStream::Update& out, std::chrono::milliseconds timeout);
  /// Streams not yet ended.
  std::size_t open() const { return open_; }
  /// cancel(why) on every open stream.
  void cancel_open(CancelReason why);

 private:
  bool poll(std::size_t& which, RequestStream::Update& out);
  std::vector<RequestStream*> streams_;
  std::vector<bool> ended_;
  std::size_t open_;
  std::size_t cursor_ = 0;  ///< where the next poll starts (round robin)
  std::shared_ptr<StreamSignal> signal_ = std::make_shared<StreamSignal>();
};

}  // namespace mamba::server
