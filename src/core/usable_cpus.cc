// usable_cpus(): the CPUs this process may run on (include/mamba/thread_limit.h).
#include <sched.h>

#include <algorithm>
#include <thread>

#include "mamba/thread_limit.h"

namespace mamba {

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace mamba
