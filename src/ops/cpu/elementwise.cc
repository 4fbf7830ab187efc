// CPU element-wise ops: dt softplus/clamp and silu gate (vector exp/log1p, kernels.h).
#include <algorithm>

#include "ops/cpu/kernels.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/thread_pool.h"
#include "ops/ops.h"
#include "ops/profile.h"

namespace mamba::ops {

void softplus_clamp(float* dt, std::int64_t lddt, std::int64_t M, std::int64_t n, const float* bias, float lo,
                    float hi) {
  const ProfileScope profile(OpKind::kElementwise);
  const cpu::Kernels& k = cpu::cpu_kernels();
  cpu::parallel_for(M, M * n * 16 >= cpu::kParallelMinWork, [&](std::int64_t m0, std::int64_t m1) {
    for (std::int64_t m = m0; m < m1; ++m) k.softplus_clamp_row(dt + m * lddt, bias, n, lo, hi);
  });
}

void silu_mul(const float* z, std::int64_t ldz, const float* x, std::int64_t ldx, std::int64_t M, std::int64_t n,
              float* out, std::int64_t ldo) {
  const ProfileScope profile(OpKind::kElementwise);
  const cpu::Kernels& k = cpu::cpu_kernels();
  cpu::parallel_for(M, M * n * 8 >= cpu::kParallelMinWork, [&](std::int64_t m0, std::int64_t m1) {
    for (std::int64_t m = m0; m < m1; ++m) k.silu_mul_row(z + m * ldz, x + m * ldx, out + m * ldo, n);
  });
}

}  // namespace mamba::ops
