// Metrics: counters, gauges and latency histograms of the server, rendered in the Prometheus text format (/metrics).
//
// Written by the scheduler thread and HTTP threads (atomics), read by /metrics.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace mamba::server {

/// A Prometheus histogram of durations in seconds over fixed buckets (kBounds, the same for every
/// histogram here: 1 ms to 5 min). observe() from any thread (atomics; no lock); render() writes
/// the cumulative _bucket{le="…"} lines, _sum and _count (= the +Inf bucket, from the same loads,
/// so a scrape that races an observation stays consistent within itself except for _sum).
class DurationHistogram {
 public:
  static constexpr double kBounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                       1.0,   2.5,    5.0,   10.0, 30.0,  60.0, 120.0, 300.0};
  static constexpr std::size_t kBuckets = sizeof(kBounds) / sizeof(kBounds[0]);
  /// Counts `seconds` in the first bucket whose bound it does not exceed (+Inf past the last); a
  /// negative or NaN value counts as 0 s.
  void observe(double seconds);
  /// Observations so far (the +Inf bucket's cumulative count).
  std::int64_t count() const;
  /// Appends "# HELP name help", "# TYPE name histogram" and the samples to `out`.
  void render(std::string& out, const char* name, const char* help) const;

 private:
  std::atomic<std::int64_t> counts_[kBuckets + 1]{};  ///< per bucket, not cumulative; [kBuckets]: +Inf
  std::atomic<std::int64_t> sum_ns_{0};
};

struct Metrics {
  // requests by outcome
  std::atomic<std::int64_t> requests_received{0};
  std::atomic<std::int64_t> requests_ok{0};          ///< finished: length / eos / stop
  std::atomic<std::int64_t> requests_cancelled{0};   ///< client gone or shutdown
  std::atomic<std::int64_t> requests_failed{0};      ///< model / sampling error
  /// Requests refused by the server's own checks before scheduling (4xx: validation, auth, size),
  /// on any route; not 404/405, not 429 (overloaded), not 424 (a failed generation: failed).
  std::atomic<std::int64_t> requests_rejected{0};
  std::atomic<std::int64_t> requests_overloaded{0};  ///< 429
  // tokens
  std::atomic<std::int64_t> prompt_tokens{0};
  std::atomic<std::int64_t> generated_tokens{0};
  // scheduler
  std::atomic<std::int64_t> iterations{0};
  std::atomic<std::int64_t> decode_steps{0};         ///< Model::step calls
  std::atomic<std::int64_t> decode_batch_sum{0};     ///< Σ batch size over decode steps
  std::atomic<std::int64_t> prefill_calls{0};
  std::atomic<std::int64_t> prefill_tokens{0};
  std::atomic<std::int64_t> prefix_cache_hits{0};    ///< prompts that began from a cached prefix State
  std::atomic<std::int64_t> prefix_cache_tokens{0};  ///< prompt tokens those hits did not prefill
  std::atomic<std::int64_t> prefix_cache_entries{0};
  std::atomic<std::int64_t> prefix_cache_bytes{0};
  std::atomic<std::int64_t> decode_ns{0};            ///< time inside Model::step
  std::atomic<std::int64_t> prefill_ns{0};           ///< time inside Model::prefill
  // gauges
  std::atomic<std::int64_t> slots_total{0};
  std::atomic<std::int64_t> slots_in_use{0};
  std::atomic<std::int64_t> queue_size{0};           ///< admitted to the server, waiting for a slot
  std::atomic<std::int64_t> running{0};              ///< sequences holding a slot
  /// running sequences left out of the last decode step because their stream's client stopped
  /// reading (SchedulerOptions::max_stream_backlog)
  std::atomic<std::int64_t> streams_paused{0};
  std::atomic<std::int64_t> state_bytes_per_slot{0};
  /// connections waiting for their client without an HTTP worker (BoundedHttpServer), and the
  /// bytes of request bodies read ahead into their buffers: set by /metrics as it renders
  std::atomic<std::int64_t> http_connections_parked{0};
  std::atomic<std::int64_t> http_read_ahead_bytes{0};
  // latencies of the generation requests that finished normally (length / eos / stop), as
  // TGI's and vLLM's histograms: from admission to the queue, in seconds
  DurationHistogram request_duration;      ///< to the last token
  DurationHistogram queue_duration;        ///< to the start of its prefill
  DurationHistogram time_to_first_token;   ///< to the first generated token (requests with one)
  DurationHistogram time_per_output_token; ///< (last − first token time) / (tokens − 1), with ≥ 2 tokens

  /// Prometheus text exposition format 0.0.4 (# HELP / # TYPE lines, `mamba_` prefix).
  /// Includes mamba_decode_batch_size_mean = decode_batch_sum / decode_steps (0 before any step).
  std::string render() const;
};

}  // namespace mamba::server
