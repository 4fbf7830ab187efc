#include "server/metrics.h"

#include <cmath>

#include <fmt/format.h>

namespace mamba::server {
namespace {

void emit(std::string& out, const char* name, const char* type, const char* help, double value) {
  fmt::format_to(std::back_inserter(out), "# HELP {0} {1}\n# TYPE {0} {2}\n{0} {3}\n", name, help, type, value);
}

}  // namespace

void DurationHistogram::observe(double seconds) {
  if (!(seconds > 0.0)) seconds = 0.0;  // negative or NaN
  std::size_t b = 0;
  while (b < kBuckets && seconds > kBounds[b]) ++b;
  counts_[b].fetch_add(1, std::memory_order_relaxed);
  const double ns = seconds * 1e9;
  sum_ns_.fetch_add(ns < 9e18 ? std::llround(ns) : std::int64_t{9000000000000000000}, std::memory_order_relaxed);
}

std::int64_t DurationHistogram::count() const {
  std::int64_t n = 0;
  for (const auto& c : counts_) n += c.load(std::memory_order_relaxed);
  return n;
}

void DurationHistogram::render(std::string& out, const char* name, const char* help) const {
  fmt::format_to(std::back_inserter(out), "# HELP {0} {1}\n# TYPE {0} histogram\n", name, help);
  std::int64_t cumulative = 0;
  for (std::size_t b = 0; b <= kBuckets; ++b) {
    cumulative += counts_[b].load(std::memory_order_relaxed);
    if (b < kBuckets) fmt::format_to(std::back_inserter(out), "{}_bucket{{le=\"{}\"}} {}\n", name, kBounds[b], cumulative);
    else fmt::format_to(std::back_inserter(out), "{}_bucket{{le=\"+Inf\"}} {}\n", name, cumulative);
  }
  fmt::format_to(std::back_inserter(out), "{}_sum {}\n{}_count {}\n", name, static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) * 1e-9,
                 name, cumulative);
}

std::string Metrics::render() const {
  std::string out;
  auto c = [&](const char* name, const char* help, const std::atomic<std::int64_t>& v) {
    emit(out, name, "counter", help, static_cast<double>(v.load()));
  };
  auto g = [&](const char* name, const char* help, const std::atomic<std::int64_t>& v) {
    emit(out, name, "gauge", help, static_cast<double>(v.load()));
  };
  c("mamba_requests_received_total", "Generation requests admitted to the queue, each of a request's n choices counting as one (not those refused: invalid, overloaded, draining).", requests_received);
  out += "# HELP mamba_requests_total Requests by outcome: ok, cancelled, failed (generation requests); "
         "rejected (refused by the server's request checks: validation, auth, size, on any route; not 404/405); "
         "overloaded (429).\n# TYPE mamba_requests_total counter\n";
  fmt::format_to(std::back_inserter(out), "mamba_requests_total{{outcome=\"ok\"}} {}\n", requests_ok.load());
  fmt::format_to(std::back_inserter(out), "mamba_requests_total{{outcome=\"cancelled\"}} {}\n", requests_cancelled.load());
  fmt::format_to(std::back_inserter(out), "mamba_requests_total{{outcome=\"failed\"}} {}\n", requests_failed.load());
  fmt::format_to(std::back_inserter(out), "mamba_requests_total{{outcome=\"rejected\"}} {}\n", requests_rejected.load());
  fmt::format_to(std::back_inserter(out), "mamba_requests_total{{outcome=\"overloaded\"}} {}\n", requests_overloaded.load());
  c("mamba_prompt_tokens_total", "Prompt tokens of finished requests (added when a request ends).", prompt_tokens);
  c("mamba_generated_tokens_total", "Tokens generated.", generated_tokens);
  c("mamba_scheduler_iterations_total", "Scheduler iterations that did work.", iterations);
  c("mamba_decode_steps_total", "Batched decode steps (Model::step calls).", decode_steps);
  c("mamba_decode_sequence_steps_total", "Sequences advanced by decode steps (the sum of their batch sizes).", decode_batch_sum);
  const std::int64_t steps = decode_steps.load();
  emit(out, "mamba_decode_batch_size_mean", "gauge", "Mean sequences per decode step since start.",
       steps > 0 ? static_cast<double>(decode_batch_sum.load()) / static_cast<double>(steps) : 0.0);
  c("mamba_prefill_calls_total", "Model::prefill calls (prompt pieces).", prefill_calls);
  c("mamba_prefill_tokens_total", "Prompt tokens prefilled.", prefill_tokens);
  c("mamba_prefix_cache_hits_total", "Prompts that began from a cached prefix state (--prefix-cache-memory).", prefix_cache_hits);
  c("mamba_prefix_cache_hit_tokens_total", "Prompt tokens taken from cached prefix states instead of prefilled.", prefix_cache_tokens);
  g("mamba_prefix_cache_entries", "Prompt-prefix states kept.", prefix_cache_entries);
  g("mamba_prefix_cache_bytes", "Bytes of the prompt-prefix states kept.", prefix_cache_bytes);
  emit(out, "mamba_decode_seconds_total", "counter", "Time inside batched decode steps.",
       static_cast<double>(decode_ns.load()) * 1e-9);
  emit(out, "mamba_prefill_seconds_total", "counter", "Time inside prefill.",
       static_cast<double>(prefill_ns.load()) * 1e-9);
  g("mamba_slots_total", "Preallocated state slots.", slots_total);
  g("mamba_slots_in_use", "State slots held by running sequences.", slots_in_use);
  g("mamba_queue_size", "Requests waiting for a state slot.", queue_size);
  g("mamba_running_sequences", "Sequences being prefilled or decoded.", running);
  g("mamba_streams_paused", "Running streams not decoded because their client stopped reading.", streams_paused);
  g("mamba_state_bytes_per_slot", "Bytes of one sequence's state (fp32).", state_bytes_per_slot);
  g("mamba_http_connections_parked",
    "Client connections waiting for their client without an HTTP worker (idle keep-alive, a request head or body arriving, a lingering close).",
    http_connections_parked);
  g("mamba_http_read_ahead_bytes", "Bytes of request bodies read ahead into connection buffers, not yet read by a worker (128 MiB at most).",
    http_read_ahead_bytes);
  request_duration.render(out, "mamba_request_duration_seconds",
                          "Requests that finished normally: seconds from admission to the last token.");
  queue_duration.render(out, "mamba_request_queue_duration_seconds",
                        "Requests that finished normally: seconds from admission to the start of their prefill.");
  time_to_first_token.render(out, "mamba_time_to_first_token_seconds",
                             "Requests that finished normally with a generated token: seconds from admission to the first.");
  time_per_output_token.render(out, "mamba_time_per_output_token_seconds",
                               "Requests that finished normally with 2 or more tokens: their mean seconds between tokens.");
  return out;
}

}  // namespace mamba::server
