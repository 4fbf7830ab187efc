// Process CPU time, for benches on shared machines (CPU time ÷ wall time × threads shows how much of
// the cores the process really had).
#pragma once

#include <algorithm>
#include <ctime>
#include <optional>

#include "mamba/thread_limit.h"

namespace mamba::bench {

/// CPU seconds used by the whole process so far (all threads, user + system).
inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// Wall time below which a cpu_share is not given by default: the process CPU clock of threads
/// running on other cores is brought up to date only every scheduler tick (1–4 ms), so short rows
/// read 50–180%.
inline constexpr double kCpuShareMinSeconds = 0.25;

/// Wall time from which a GEMM measurement's cpu_share is given (bench_cpu's --gemm-seconds is 0.2
/// by default; the CPU clock's tick-wise updates then shift it by a few %).
inline constexpr double kGemmShareMinSeconds = 0.15;

/// CPU seconds ÷ (wall seconds × min(threads, usable CPUs)) of a measurement, or none when it ran
/// less than min_wall seconds (too short to tell). Below ~0.9 other processes took the cores and the
/// figure understates this machine. More threads than CPUs cannot get more than the CPUs' time: that
/// is oversubscription, not other processes.
inline std::optional<double> cpu_share(double cpu_seconds, double wall_seconds, int threads,
                                       double min_wall = kCpuShareMinSeconds) {
  if (wall_seconds < min_wall) return std::nullopt;
  return cpu_seconds / (wall_seconds * std::max(1, std::min(threads, usable_cpus())));
}

/// Core clock in GHz as this thread sees it now: a chain of dependent 1-cycle integer adds (one per
/// cycle on every x86-64 core) timed over ~0.1 s. On shared or power-capped machines the clock moves
/// between runs; printing it lets a reader compare runs (compute-bound figures scale with it).
inline double core_clock_ghz() {
  constexpr long kAdds = 200'000'000;
  timespec t0{}, t1{};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long v = 0;
  for (long i = 0; i < kAdds; ++i) __asm__ volatile("add $1, %0" : "+r"(v));
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const double s = static_cast<double>(t1.tv_sec - t0.tv_sec) + 1e-9 * static_cast<double>(t1.tv_nsec - t0.tv_nsec);
  return static_cast<double>(v) / s / 1e9;
}

}  // namespace mamba::bench
