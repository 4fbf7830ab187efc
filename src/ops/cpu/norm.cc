// CPU RMSNorm (alone and fused with the residual add, which the profile then counts as norm) and
// grouped gated RMSNorm. Per-row sums of squares in double (kernels.h sumsq_row, a fixed order
// within the row, so the result of a row never depends on the other rows).
#include <cmath>

#include "ops/cpu/kernels.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/thread_pool.h"
#include "ops/ops.h"
#include "ops/profile.h"

namespace mamba::ops {

namespace {
/// 1 / sqrt(ss / n + eps) as HF computes it (torch.rsqrt(variance + eps) in fp32), except where the
/// mean square overflows fp32 (|x| ≳ 1.8e19): then in double, so the row is scaled to its RMS
/// instead of to 0 (fp32 gave rsqrt(inf) = 0 and an all-zero row, i.e. silently constant logits).
float inv_rms(double ss, std::int64_t n, float eps) {
  const float mean_sq = float(ss / double(n));
  if (std::isfinite(mean_sq)) return 1.0f / std::sqrt(mean_sq + eps);
  return float(1.0 / std::sqrt(ss / double(n) + double(eps)));
}
}  // namespace

void rms_norm(const float* x, std::int64_t ldx, std::int64_t M, std::int64_t D, const float* w, float eps,
              float* y, std::int64_t ldy) {
  const ProfileScope profile(OpKind::kNorm);
  const cpu::Kernels& k = cpu::cpu_kernels();
  cpu::parallel_for(M, M * D * 4 >= cpu::kParallelMinWork, [&](std::int64_t m0, std::int64_t m1) {
    for (std::int64_t m = m0; m < m1; ++m) {
      const float* xm = x + m * ldx;
      float* ym = y + m * ldy;
      // HF: hidden * torch.rsqrt(variance + eps), in fp32.
      const float r = inv_rms(k.sumsq_row(xm, D), D, eps);
      k.scale_row(xm, r, w, ym, D);
    }
  });
}

void add_rms_norm(float* h, const float* r, std::int64_t M, std::int64_t D, const float* w, float eps, float* y) {
  const ProfileScope profile(OpKind::kNorm);
  const cpu::Kernels& k = cpu::cpu_kernels();
  cpu::parallel_for(M, M * D * 4 >= cpu::kParallelMinWork, [&](std::int64_t m0, std::int64_t m1) {
    for (std::int64_t m = m0; m < m1; ++m) {
      float* __restrict hm = h + m * D;
      const float* __restrict rm = r + m * D;
      for (std::int64_t i = 0; i < D; ++i) hm[i] += rm[i];
      k.scale_row(hm, inv_rms(k.sumsq_row(hm, D), D, eps), w, y + m * D, D);
    }
  });
}

void gated_rms_norm(float* y, std::int64_t ldy, const float* z, std::int64_t ldz, std::int64_t M,
                    std::int64_t E, std::int64_t G, const float* w, float eps) {
  const ProfileScope profile(OpKind::kNorm);
  const std::int64_t gs = E / G;
  const cpu::Kernels& k = cpu::cpu_kernels();
  auto body = [&](std::int64_t m0, std::int64_t m1) {
    for (std::int64_t m = m0; m < m1; ++m) {
      float* ym = y + m * ldy;
      const float* zm = z + m * ldz;
      // The next row's z into the cache while this row is computed. z rows are E floats ldz apart
      // (in_proj's output row, 13 KB for mamba2-130m), so the hardware's stream prefetcher starts
      // over on each; y's rows follow one another and need no hint. mamba2-130m bf16 prefill 512
      // (2 threads, Zen 5, 8 interleaved rounds): the norm 9.7 → 8.5 ms, 8 of 8 rounds.
      if (m + 1 < m1) {
        const char* z_next = reinterpret_cast<const char*>(zm + ldz);
        for (std::int64_t byte = 0; byte < E * std::int64_t(sizeof(float)); byte += 64)
          __builtin_prefetch(z_next + byte, 0, 3);
      }
      k.silu_mul_row(zm, ym, ym, E);  // v = y · silu(z)
      for (std::int64_t g = 0; g < G; ++g) {
        float* v = ym + g * gs;
        const float r = inv_rms(k.sumsq_row(v, gs), gs, eps);
        k.scale_row(v, r, w + g * gs, v, gs);
      }
    }
  };
  // Rows through parallel_for_balanced (each row is computed alone; mamba2-130m prefill 512
  // balanced / static: 2590 / 2513 tok/s).
  cpu::parallel_for_balanced(M, 8, M * E * 8 >= cpu::kParallelMinWork, body);
}

}  // namespace mamba::ops
