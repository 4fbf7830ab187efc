// The warning for a thread count above the CPUs there are (mamba-cli's -t, mamba-server's
// --threads): allowed (up to kMaxThreads), but the extra threads only take turns on the CPUs.
#pragma once

#include <string>

namespace mamba::tools {

/// A spdlog warning when `threads` is more than mamba::usable_cpus() (mamba/thread_limit.h), naming how many there are and the
/// option as `option` spells it ("-t/--threads" says "leave -t out, or -t 0": the spelling before
/// any '/'). `threads` 0 (all of them) warns only when OMP_NUM_THREADS (its first entry, which the
/// model then takes) is above the count, naming it. Nothing within the count.
void warn_if_more_threads_than_cpus(int threads, const std::string& option);

}  // namespace mamba::tools
