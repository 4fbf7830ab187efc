// CPU Mamba-1 selective scan (Gu & Dao 2023, Alg. 2), sequential over tokens, parallel over the
// E channels (each channel's state row h[e, :] is independent).
#include <cmath>

#include "ops/cpu/parallel.h"
#include "ops/ops.h"
#include "ops/profile.h"

namespace mamba::ops {

void selective_scan(const SelectiveScanArgs& a) {
  const ProfileScope profile(OpKind::kScan);
  const std::int64_t N = a.N;
#pragma omp parallel for schedule(static) num_threads(num_threads()) if (a.L * a.E * N >= cpu::kParallelMinWork)
  for (std::int64_t e = 0; e < a.E; ++e) {
    float* h = a.ssm_state + e * N;  // [N]
    const float* A = a.A + e * N;
    for (std::int64_t t = 0; t < a.L; ++t) {
      const float dt = a.dt[t * a.lddt + e], u = a.u[t * a.ldu + e];
      const float* B = a.B + t * a.ldb;
      const float* C = a.C + t * a.ldc;
      const float dtu = dt * u;
      float y = 0.0f;
      for (std::int64_t n = 0; n < N; ++n) {
        h[n] = std::exp(dt * A[n]) * h[n] + dtu * B[n];  // h_t = exp(Δ·A)·h_{t−1} + Δ·u·B_t
        y += h[n] * C[n];                                // y_t = h_t · C_t
      }
      if (a.D) y += a.D[e] * u;                          // + D·u
      if (a.z) y *= silu(a.z[t * a.ldz + e]);            // · silu(z)
      a.y[t * a.ldy + e] = y;
    }
  }
}

}  // namespace mamba::ops
