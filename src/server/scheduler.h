// Scheduler: continuous batching over a fixed pool of state slots.
//
// One thread owns the Model. Each iteration:
//   1. drops cancelled sequences (their slot is reused at once) and admits queued requests into
//      free slots (FIFO);
//   2. one batched decode step (Model::step) over up to max_batch_size sequences that have a
//      sampled-but-unfed token (round robin when more are running), then samples each row;
//      Sequences whose client stopped reading are paused (SchedulerOptions::max_stream_backlog).
//   3. prefills waiting prompts within max_batch_prefill_tokens (from the longest prefix the
//      PrefixCache holds, when it holds one: the State of an earlier prompt's first tokens). A prompt that does not fit is
//      prefilled in pieces across iterations; every piece but the last is a multiple of the
//      model's chunk granularity (Mamba-2: chunk_size), so chunk boundaries stay at absolute
//      positions and the result is bitwise the unsplit prefill (model.h). A prompt piece is never
//      smaller than one granule, so a budget below chunk_size still makes progress.
// Batch invariance is the Model's per-row guarantee; the scheduler never changes per-row math.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <span>
#include <vector>

#include "mamba/generate.h"
#include "mamba/model.h"
#include "mamba/tokenizer.h"
#include "server/metrics.h"
#include "server/prefix_cache.h"
#include "server/request_stream.h"
#include "server/slot_pool.h"

namespace mamba::server {

struct SchedulerOptions {
  int slots = 1;                        ///< state slots (preallocated)
  int max_in_flight = 128;              ///< running + queued; submit beyond → overloaded
  int max_batch_size = 0;               ///< sequences per decode step; 0 = slots
  int max_batch_prefill_tokens = 512;   ///< prompt tokens per iteration
  /// A sequence whose stream holds this many token events its consumer has not taken
  /// (RequestStream::backlog: its client stopped reading, so the HTTP thread is blocked in a
  /// write) is left out of the decode steps until the consumer takes them: a stalled client costs
  /// its slot, not compute, until the write timeout ends it. Outputs do not change (a row's math
  /// does not depend on its batch). ≤ 0: never paused.
  int max_stream_backlog = 64;
  /// A stream is paused for at most this long in all; after that it is decoded to its end whatever
  /// its backlog (the events wait in memory, as before pausing existed). So a client that reads a
  /// few bytes now and then cannot hold a slot for hours (a 100 000-token stream read at 0.5 KB/s).
  std::chrono::milliseconds max_stream_pause{30'000};
  /// Bytes of prompt-prefix States kept for later prompts that begin with the same tokens
  /// (PrefixCache); 0: none kept.
  std::int64_t prefix_cache_bytes = 0;
};

/// A validated generation request (ids already tokenized and truncated).
struct SequenceRequest {
  std::vector<std::int32_t> prompt;  ///< ≥ 1 id, each < the vocabulary (min(tokenizer size, logits width))
  GenerateOptions opts;
  /// With opts.prompt_logprobs and opts.top_logprobs > 0: also keep each prompt position's
  /// top_logprobs likeliest ids (SequenceStats::prompt_top_logprobs; OpenAI's echo + logprobs).
  bool prompt_top_logprobs = false;
  /// With opts.prompt_logprobs: publish the prompt's scores on the stream when its prefill ends
  /// (RequestStream::publish_prompt), for a streamed echo; they then move there, and the final
  /// stats' prompt_logprobs / prompt_top_logprobs stay empty.
  bool publish_prompt_scores = false;
  /// Nonzero: the choices of one request (OpenAI's `n`), which share this id, the prompt and every
  /// option but the seed. The first of them admitted prefills the prompt; the others admitted
  /// beside it wait, then take a copy of its state (State::copy_from) and of the prompt's last
  /// logits row (and prompt logprobs) instead of prefilling it again. The results are bitwise those
  /// of their own prefill (any split of a prompt gives the same state and logits). A choice admitted
  /// after that prefill, or after its leader failed, prefills its own.
  std::uint64_t prompt_group = 0;
};

class Scheduler {
 public:
  /// `tok` may be null (ids only). `metrics` must outlive the scheduler.
  Scheduler(Model& model, const Tokenizer* tok, std::vector<std::int32_t> eos_ids,
            const SchedulerOptions& opts, Metrics& metrics);
  ~Scheduler();  ///< stop(0) if still running

  void start();
  /// Queues a request. nullptr when max_in_flight requests are already in the server (→ 429)
  /// or the scheduler is draining.
  std::shared_ptr<RequestStream> submit(SequenceRequest req);
  /// Queues every request or none (the choices of one OpenAI request): one stream per request, in
  /// order; empty when fewer than reqs.size() places are left under max_in_flight, or the
  /// scheduler is draining.
  std::vector<std::shared_ptr<RequestStream>> submit_all(std::vector<SequenceRequest> reqs);
  /// Stops admitting, lets running and queued requests finish for up to `grace`, cancels the
  /// rest, joins the thread. Idempotent.
  void stop(std::chrono::milliseconds grace);
  /// Chunk granularity used to split prompts (Mamba-2 chunk_size, else 1).
  int granularity() const { return granule_; }
  /// Prompt tokens prefilled per iteration: SchedulerOptions::max_batch_prefill_tokens raised to at
  /// least granularity() (and ≥ 1).
  int prefill_budget() const { return opts_.max_batch_prefill_tokens; }
  int slots() const { return pool_.size(); }

 private:
  struct Sequence;
  void run();
  bool admit_and_drop();  ///< returns false when the loop should exit
  /// Returns whether it ran a step (false: no sequence was ready, or all that were are paused).
  bool decode_step();
  /// Returns whether it prefilled any prompt piece.
  bool prefill_pieces();
  /// Whether running_[idx], a choice of a prompt group that has not begun its prompt, waits for
  /// another choice of its group that prefills it (SequenceRequest::prompt_group).
  bool waits_for_group(std::size_t idx) const;
  /// After `leader`'s last prompt piece, before it samples from `row` (its prompt's last logits):
  /// the waiting choices of its group take its state, prompt logprobs and a copy of `row`, and
  /// sample their first token.
  void share_prompt(Sequence& leader, std::span<const float> row);
  /// An iteration found nothing to do (every running sequence paused): waits up to kPausedPoll for
  /// a reason to go on (a consumer catching up is seen at the next iteration; a new request that
  /// can take a free slot or the end of the grace period wakes it at once).
  void wait_while_paused();
  void finish_sequence(std::size_t idx, const std::optional<Error>& err);
  void emit(Sequence& s, TokenEvent ev);
  /// Emits a sampled token event, or marks `s` done with the error.
  void emit_or_fail(Sequence& s, Result<TokenEvent> ev);
  /// Samples the next token of `s` from its logits row and emits it; a failure marks `s` done.
  void sample_and_emit(Sequence& s, std::span<float> row);
  /// Removes every sequence marked done (frees its slot, tells its client).
  void reap_done();
  /// Marks every running sequence that is not done as failed with `err`, then reap_done().
  void fail_running(const Error& err);

  Model& model_;
  const Tokenizer* tok_;
  std::vector<std::int32_t> eos_ids_;
  SchedulerOptions opts_;
  Metrics& metrics_;
  SlotPool pool_;
  PrefixCache prefix_cache_;
  int granule_ = 1;
  std::int64_t vocab_limit_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Sequence>> waiting_;  // guarded by mu_
  int in_flight_ = 0;                               // guarded by mu_
  bool stopping_ = false;                           // guarded by mu_: no new submits
  bool cancel_all_ = false;                         // guarded by mu_: grace expired
  std::thread thread_;

  // scheduler-thread only
  std::vector<std::unique_ptr<Sequence>> running_;
  std::size_t decode_cursor_ = 0;
  std::size_t prefill_cursor_ = 0;  // prefill_pieces starts at this running_ index (round robin)
  std::vector<float> step_logits_, prefill_logits_, lsm_scratch_;
  std::vector<float> shared_row_;  ///< share_prompt's copy of the logits row a choice samples from
};

}  // namespace mamba::server
