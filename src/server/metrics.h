// Metrics: counters and gauges of the server, rendered in the Prometheus text format (/metrics).
//
// Written by the scheduler thread and HTTP threads (atomics), read by /metrics.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace mamba::server {

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

  /// Prometheus text exposition format 0.0.4 (# HELP / # TYPE lines, `mamba_` prefix).
  /// Includes mamba_decode_batch_size_mean = decode_batch_sum / decode_steps (0 before any step).
  std::string render() const;
};

}  // namespace mamba::server
