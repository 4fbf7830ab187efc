// Timed prefill and decode (see forward_timing.h).
#include "cpu/forward_timing.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "mamba/thread_limit.h"
#include "ops/ops.h"

namespace mamba::bench {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<std::int32_t> random_ids(const Model& model, int n, unsigned seed) {
  std::mt19937 rng(seed);
  const auto hi = static_cast<std::int32_t>(std::min<std::int64_t>(model.logits_width(), 8192) - 1);
  std::uniform_int_distribution<std::int32_t> id(0, hi);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
  for (auto& t : ids) t = id(rng);
  return ids;
}

/// Greedy pick as the engine's sampler makes it (ops::argmax).
std::int32_t argmax(const float* row, std::int64_t n) { return static_cast<std::int32_t>(ops::argmax(row, n)); }

/// cpu_time.h's cpu_share on the ops threads.
std::optional<double> cpu_share(double cpu_seconds, double wall_seconds) {
  return mamba::bench::cpu_share(cpu_seconds, wall_seconds, ops::num_threads());
}

}  // namespace

Result<PrefillTiming> time_prefill(Model& model, int tokens, int runs) {
  const std::vector<std::int32_t> prompt = random_ids(model, tokens, 1234);
  std::vector<float> logits(static_cast<std::size_t>(model.logits_width()));
  // Untimed warm-up at the full length: the first prompt this long grows the scratch buffers (page
  // faults that a serving process pays once, not per request).
  {
    State warm = model.new_state();
    MAMBA_RETURN_IF_ERROR(model.prefill(prompt, warm, LogitsMode::kLast, logits.data()));
  }
  // Best of `runs`, as decode: a run that other processes slowed says nothing about this code.
  PrefillTiming r;
  for (int run = 0; run < std::max(runs, 1); ++run) {
    State state = model.new_state();
    ops::profile_reset();
    ops::profile_enable(true);
    const double cpu0 = process_cpu_seconds();
    const auto t0 = Clock::now();
    const Status st = model.prefill(prompt, state, LogitsMode::kLast, logits.data());
    const double seconds = since(t0);
    const double cpu = process_cpu_seconds() - cpu0;
    ops::profile_enable(false);
    MAMBA_RETURN_IF_ERROR(st);
    if (run > 0 && seconds >= r.seconds) continue;
    r.seconds = seconds;
    r.cpu_share = cpu_share(cpu, seconds);
    r.profile = ops::profile_read();
  }
  r.tokens_per_s = tokens / r.seconds;
  return r;
}

Result<DecodeTiming> time_decode(Model& model, int batch, int steps) {
  const std::int64_t V = model.logits_width();
  const std::vector<std::int32_t> prompt = random_ids(model, 16, 99);
  std::vector<float> logits(static_cast<std::size_t>(V * batch));
  std::vector<State> states;
  states.push_back(model.new_state());
  MAMBA_RETURN_IF_ERROR(model.prefill(prompt, states[0], LogitsMode::kLast, logits.data()));
  for (int b = 1; b < batch; ++b) states.push_back(states[0].clone());
  std::vector<State*> ptrs;
  for (auto& s : states) ptrs.push_back(&s);
  std::vector<std::int32_t> toks(static_cast<std::size_t>(batch), argmax(logits.data(), V));
  MAMBA_RETURN_IF_ERROR(model.step(toks, ptrs, logits.data()));  // untimed: grows scratch buffers
  // Best of kDecodeRuns runs, like the bandwidth ceiling (best of 5): on a shared machine a run
  // that other processes slowed says nothing about this code.
  DecodeTiming r;
  // The cpu share over all the runs together: one run of a short row (32 b=1 steps of a 130m
  // model: 0.05–0.12 s) is too short for the process CPU clock, three often are not.
  double all_cpu = 0, all_seconds = 0;
  for (int run = 0; run < kDecodeRuns; ++run) {
    ops::profile_reset();
    ops::profile_enable(true);
    const double cpu0 = process_cpu_seconds();
    const auto t0 = Clock::now();
    Status st;
    for (int s = 0; s < steps && st.ok(); ++s) {
      for (int b = 0; b < batch; ++b) toks[static_cast<std::size_t>(b)] = argmax(logits.data() + b * V, V);
      st = model.step(toks, ptrs, logits.data());
    }
    const double seconds = since(t0);
    ops::profile_enable(false);
    MAMBA_RETURN_IF_ERROR(st);
    all_cpu += process_cpu_seconds() - cpu0;
    all_seconds += seconds;
    if (run > 0 && seconds >= r.seconds) continue;
    r.seconds = seconds;
    r.profile = ops::profile_read();
  }
  r.cpu_share = cpu_share(all_cpu, all_seconds);
  r.tokens_per_s = static_cast<double>(steps) * batch / r.seconds;
  return r;
}

}  // namespace mamba::bench
