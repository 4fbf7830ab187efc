// Timed prefill and decode of a loaded model, with the per-op split of prefill (ops/profile.h).
#pragma once

#include <optional>

#include <array>
#include <cstdint>

#include "cpu/cpu_time.h"
#include "mamba/model.h"
#include "mamba/status.h"
#include "ops/profile.h"

namespace mamba::bench {

/// cpu_share: cpu_time.h's cpu_share over the measurement (ops threads; none below
/// kCpuShareMinSeconds): below ~0.9 other processes took the cores and the figure understates this
/// machine.
struct Timed {
  double tokens_per_s = 0;
  double seconds = 0;
  std::optional<double> cpu_share;
};

struct PrefillTiming : Timed {
  ops::OpProfile profile;  ///< per-op seconds inside the prefill (ops::profile_enable around it)
};

/// Timed runs of time_prefill; the fastest counts.
inline constexpr int kPrefillRuns = 3;

/// Prefills of `tokens` seeded-random valid ids into a fresh state (last logits only) after one
/// untimed prefill of the same prompt (it grows the scratch buffers, as a server's first request
/// does); the fastest of `runs` (≥ 1). Threads: as set by ops::set_num_threads.
Result<PrefillTiming> time_prefill(Model& model, int tokens, int runs = kPrefillRuns);

struct DecodeTiming : Timed {
  ops::OpProfile profile;  ///< per-op seconds over the timed steps (ops::profile_enable around them)
};

/// Timed runs of time_decode; the fastest counts.
inline constexpr int kDecodeRuns = 3;

/// `steps` decode steps of `batch` sequences (each starts from the same 16-token prefill and feeds
/// back its greedy token), after one untimed step; the fastest of kDecodeRuns such runs (the states
/// run on). tokens_per_s counts every sequence's token; profile is the fastest run's, cpu_share all the runs' together.
Result<DecodeTiming> time_decode(Model& model, int batch, int steps);

}  // namespace mamba::bench
