// Fixed-order fp32 dot product for the CPU backend's inner reductions (SSD's C·B and h·C).
// Plain `for (...) s += a[i]*b[i]` cannot be vectorised without reassociation (no -ffast-math
// here), so this spells out 8 lanes (two SSE2 vectors) over i in steps of 8, the n % 8 tail in
// order, then a fixed lane tree: deterministic, and ~4–8× faster than the serial sum.
#pragma once

#include <cstdint>
#include <cstring>

namespace mamba::ops::cpu {

inline float dot_f32(const float* a, const float* b, std::int64_t n) {
  using v4 = float __attribute__((vector_size(16)));
  v4 lo{}, hi{};
  const std::int64_t nv = n - n % 8;
  for (std::int64_t i = 0; i < nv; i += 8) {
    v4 a0, a1, b0, b1;
    std::memcpy(&a0, a + i, 16);
    std::memcpy(&a1, a + i + 4, 16);
    std::memcpy(&b0, b + i, 16);
    std::memcpy(&b1, b + i + 4, 16);
    lo += a0 * b0;
    hi += a1 * b1;
  }
  float tail = 0.0f;
  for (std::int64_t i = nv; i < n; ++i) tail += a[i] * b[i];
  return ((lo[0] + hi[0]) + (lo[1] + hi[1])) + ((lo[2] + hi[2]) + (lo[3] + hi[3])) + tail;
}

}  // namespace mamba::ops::cpu
