// Thread count of the CPU backend's parallel regions (thread_pool.h); the default is OpenMP's
// omp_get_max_threads() (all CPUs this process may use, or OMP_NUM_THREADS), at most kMaxThreads
// like an explicit --threads (OMP_NUM_THREADS=70000 ran 70000-thread regions).
#include <omp.h>

#include <algorithm>
#include <atomic>

#include "mamba/thread_limit.h"

#include "ops/cpu/parallel.h"
#include "ops/ops.h"

namespace mamba::ops {

namespace {
std::atomic<int> g_threads{0};  // process-wide; a Model::load on one thread may set it while another computes
}

void set_num_threads(int n) { g_threads.store(n > 0 ? n : 0, std::memory_order_relaxed); }

int num_threads() {
  const int n = g_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : std::clamp(omp_get_max_threads(), 1, kMaxThreads);
}

}  // namespace mamba::ops
