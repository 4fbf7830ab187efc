// Thread count of the CPU backend's OpenMP regions.
#include <omp.h>

#include "ops/cpu/parallel.h"
#include "ops/ops.h"

namespace mamba::ops {

namespace {
int g_threads = 0;
}

void set_num_threads(int n) { g_threads = n > 0 ? n : 0; }

int num_threads() { return g_threads > 0 ? g_threads : omp_get_max_threads(); }

}  // namespace mamba::ops
