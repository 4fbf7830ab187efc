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

}  // namespace mamba::bench
