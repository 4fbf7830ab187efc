// Process CPU time, for benches on shared machines (CPU time ÷ wall time × threads shows how much of
// the cores the process really had).
#pragma once

#include <ctime>

namespace mamba::bench {

/// CPU seconds used by the whole process so far (all threads, user + system).
inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
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
