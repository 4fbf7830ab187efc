// The canonical reduction order of ops::linear, as a plain scalar function.
//
// Every dispatch target (baseline, AVX2, AVX-512) computes each output of ops::linear exactly like
// this, so results are bitwise identical whatever the target, the number of rows M, the tiling or
// the thread count (batch invariance; tests/ops/linear_test.cc checks every target against it):
//
//   K16 = K − K % 16;  lanes l[0..15] = +0
//   for k in [0, K16) ascending:  l[k % 16] = fma(x[k], w[k], l[k % 16])
//   tree: for s in 8, 4, 2, 1:  l[i] = l[i] + l[i + s]  for i < s;   r = l[0]
//   for k in [K16, K) ascending:  r = fma(x[k], w[k], r)
//   y = r + bias  (no bias: y = r)
//
// AVX2 holds the 16 lanes in two ymm registers (lanes 0–7, 8–15), AVX-512 in one zmm; their
// horizontal sum (lo + hi → 128-bit halves → 64-bit → 32-bit) is exactly the tree above.
// The baseline target uses this function itself (std::fma: slow without FMA hardware).
//
// Only baseline translation units and tests may include this header (see cpu_target.h).
#pragma once

#include <cmath>
#include <cstdint>

namespace mamba::ops::cpu {

/// Σ_k x[k]·w[k] in the canonical order, plus `bias` when `has_bias`. x, w: [K] fp32.
inline float canonical_dot(const float* x, const float* w, std::int64_t K, float bias, bool has_bias) {
  float l[16] = {};
  const std::int64_t k16 = K - K % 16;
  for (std::int64_t k = 0; k < k16; k += 16)
    for (int i = 0; i < 16; ++i) l[i] = std::fma(x[k + i], w[k + i], l[i]);
  for (int s = 8; s >= 1; s /= 2)
    for (int i = 0; i < s; ++i) l[i] = l[i] + l[i + s];
  float r = l[0];
  for (std::int64_t k = k16; k < K; ++k) r = std::fma(x[k], w[k], r);
  return has_bias ? r + bias : r;
}

}  // namespace mamba::ops::cpu
