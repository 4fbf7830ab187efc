// Thread count of the CPU backend's parallel regions (thread_pool.h); the default is OpenMP's
// omp_get_max_threads() (all CPUs this process may use, or OMP_NUM_THREADS), at most kMaxThreads
// like an explicit --threads (OMP_NUM_THREADS=70000 ran 70000-thread regions).
#include <omp.h>

#include <algorithm>

#include "mamba/thread_limit.h"

#include "ops/cpu/parallel.h"
#include "ops/ops.h"

namespace mamba::ops {

namespace {
int g_threads = 0;
}

void set_num_threads(int n) { g_threads = n > 0 ? n : 0; }

int num_threads() { return g_threads > 0 ? g_threads : std::clamp(omp_get_max_threads(), 1, kMaxThreads); }

}  // namespace mamba::ops
