// ops::linear for CPUs without AVX2 (and the reference target of the parity tests): each output is
// canonical_dot() (linear_canonical.h), one std::fma at a time. Slow, but bitwise identical to the
// SIMD targets.
#include <algorithm>

#include "mamba/tensor.h"
#include "ops/cpu/linear_canonical.h"
#include "ops/cpu/linear_kernels.h"

namespace mamba::ops::cpu {

void linear_tile_baseline(const LinearProblem& p, std::int64_t m0, std::int64_t m1, std::int64_t n0,
                          std::int64_t n1, float* scratch) {
  const std::int64_t K = p.K;
  const DType dt = p.wtype == LinearWeight::kF32 ? DType::kF32
                   : p.wtype == LinearWeight::kBF16 ? DType::kBF16
                                                     : DType::kF16;
  const std::int64_t nb = linear_block_rows(K);
  const auto* wbase = static_cast<const std::uint8_t*>(p.w);
  for (std::int64_t b0 = n0; b0 < n1; b0 += nb) {
    const std::int64_t rows = std::min(nb, n1 - b0);
    const float* w = scratch;
    if (dt == DType::kF32) w = static_cast<const float*>(p.w) + b0 * K;
    else convert_to_f32(wbase + dtype_bytes(dt, std::size_t(b0 * K)), dt, std::size_t(rows * K), scratch);
    for (std::int64_t m = m0; m < m1; ++m) {
      const float* x = p.x + m * p.ldx;
      float* y = p.y + m * p.ldy;
      for (std::int64_t j = 0; j < rows; ++j) {
        const std::int64_t n = b0 + j;
        y[n] = canonical_dot(x, w + j * K, K, p.bias != nullptr ? p.bias[n] : 0.0f, p.bias != nullptr);
      }
    }
  }
}

}  // namespace mamba::ops::cpu
