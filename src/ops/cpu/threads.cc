// Thread count of the CPU backend's parallel regions (thread_pool.h); the default is OpenMP's
// omp_get_max_threads() (all CPUs this process may use, or OMP_NUM_THREADS), at most kMaxThreads
// like an explicit --threads (OMP_NUM_THREADS=70000 ran 70000-thread regions); and parallel_tasks, those
// threads lent to independent tasks outside the ops.
#include <omp.h>

#include <algorithm>
#include <atomic>

#include "mamba/thread_limit.h"

#include "ops/cpu/parallel.h"
#include "ops/cpu/thread_pool.h"
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

void parallel_tasks(std::int64_t n, const std::function<void(std::int64_t)>& task) {
  const int nt = static_cast<int>(std::min<std::int64_t>(n, num_threads()));
  if (nt <= 1) {
    for (std::int64_t i = 0; i < n; ++i) task(i);
    return;
  }
  std::atomic<std::int64_t> next{0};  // the next unclaimed task
  cpu::parallel_region(nt, [&](int, int) {
    for (std::int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) task(i);
  });
}

}  // namespace mamba::ops
