// CPU element-wise ops: dt softplus/clamp, silu gate, residual add.
#include <algorithm>

#include "ops/cpu/parallel.h"
#include "ops/ops.h"
#include "ops/profile.h"

namespace mamba::ops {

void softplus_clamp(float* dt, std::int64_t lddt, std::int64_t M, std::int64_t n, const float* bias, float lo,
                    float hi) {
  const ProfileScope profile(OpKind::kElementwise);
  for (std::int64_t m = 0; m < M; ++m) {
    float* d = dt + m * lddt;
    for (std::int64_t i = 0; i < n; ++i) d[i] = std::clamp(softplus(d[i] + (bias ? bias[i] : 0.0f)), lo, hi);
  }
}

void silu_mul(const float* z, std::int64_t ldz, const float* x, std::int64_t ldx, std::int64_t M, std::int64_t n,
              float* out, std::int64_t ldo) {
  const ProfileScope profile(OpKind::kElementwise);
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t i = 0; i < n; ++i) out[m * ldo + i] = silu(z[m * ldz + i]) * x[m * ldx + i];
}

void add_inplace(float* h, const float* x, std::int64_t n) {
  const ProfileScope profile(OpKind::kElementwise);
  for (std::int64_t i = 0; i < n; ++i) h[i] += x[i];
}

}  // namespace mamba::ops
