// The largest CPU thread count a model accepts (LoadOptions::threads, `mamba-cli -t`).
//
// Far more threads than cores only slows compute down (30000 threads: 0.2 tokens/s) and, past
// what the OS lets one process create, crashed the OpenMP runtime the CPU backend first used; 1024
// is above any current machine's hardware threads (bench_cpu's --threads allows up to 4096).
#pragma once

#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "mamba/status.h"

namespace mamba {

/// Upper bound of a thread-count option (0 = all hardware threads is always allowed).
inline constexpr int kMaxThreads = 1024;

/// OK when 0 ≤ n ≤ kMaxThreads; else kInvalidArgument "OPTION = N: expected 0 (all hardware
/// threads) to 1024". `option` names the setting in the message (e.g. "-t/--threads").
inline Status check_thread_count(std::int64_t n, const std::string& option) {
  if (n >= 0 && n <= kMaxThreads) return {};
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("{} = {}: expected 0 (all hardware threads) to {}", option, n, kMaxThreads));
}

/// The CPUs this process may run on now: its affinity mask's count (sched_getaffinity; a `taskset`
/// or a container's cpuset lowers it), else std::thread::hardware_concurrency(); at least 1. What
/// 0 threads ("all hardware threads") means unless OMP_NUM_THREADS is set (LoadOptions::threads),
/// and the count above which more threads only take turns.
int usable_cpus();
/// OMP_NUM_THREADS's first entry as a number ("8" and "8,4" give 8): what "all hardware threads"
/// (0) means when it is set; 0 when it is unset or does not start with a number.
long long omp_num_threads_setting();

}  // namespace mamba
