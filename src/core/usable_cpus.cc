// usable_cpus(): the CPUs this process may run on; omp_num_threads_setting() (include/mamba/thread_limit.h).
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "mamba/thread_limit.h"

namespace mamba {

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

long long omp_num_threads_setting() {
  const char* env = std::getenv("OMP_NUM_THREADS");
  if (env == nullptr) return 0;
  char* end = nullptr;
  const long long n = std::strtoll(env, &end, 10);
  return end == env ? 0 : n;
}

}  // namespace mamba
