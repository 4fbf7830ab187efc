#include "common/thread_warning.h"

#include <cstdlib>
#include <string_view>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "mamba/thread_limit.h"

namespace mamba::tools {

void warn_if_more_threads_than_cpus(int threads, const std::string& option) {
  const int cpus = usable_cpus();
  const std::string_view flag = std::string_view(option).substr(0, option.find('/'));
  if (threads == 0) {  // all: the CPUs, or OMP_NUM_THREADS's first entry when set (as the model reads it)
    // Above kMaxThreads the model load refuses it with its own error: no warning first.
    // A value that is no thread count ("abc", "0", "-1"): libgomp's own warning names the variable
    // but not what runs instead.
    if (const char* env = std::getenv("OMP_NUM_THREADS"); env != nullptr && omp_num_threads_setting() <= 0) {
      spdlog::warn("OMP_NUM_THREADS={:?} is not a thread count (1 to {}): ignored, {} compute thread{} (all the CPUs this "
                   "process may run on; or give {} N)", env, kMaxThreads, cpus, cpus == 1 ? "" : "s", flag);
      return;
    }
    if (const long long n = omp_num_threads_setting(); n > cpus && n <= kMaxThreads)
      spdlog::warn("OMP_NUM_THREADS={} gives {} compute threads, more than the {} hardware thread{} this process may run on: the "
                   "extra threads only take turns on them, which slows compute down (unset it, or give {} {})",
                   std::getenv("OMP_NUM_THREADS"), n, cpus, cpus == 1 ? "" : "s", flag, cpus);
    return;
  }
  if (threads > cpus)
    spdlog::warn("{} {} is more than the {} hardware thread{} this process may run on: the extra threads only take "
                 "turns on them, which slows compute down ({})",
                 option, threads, cpus, cpus == 1 ? "" : "s",
                 omp_num_threads_setting() > 0 ? fmt::format("give {} {}; leaving it out, or {} 0, would take OMP_NUM_THREADS={}", flag,
                                                             cpus, flag, std::getenv("OMP_NUM_THREADS"))
                                               : fmt::format("leave {} out, or {} 0, to use all {}", flag, flag, cpus));
}

}  // namespace mamba::tools
