// ops::linear for CPUs without AVX2 (and the reference target of the parity tests), bitwise
// identical to canonical_dot() (linear_canonical.h) and to the SIMD targets.
//
// Plain SSE2 has no FMA instruction, and std::fma per element is a library call (a slow software
// routine on CPUs without FMA). So the 16 lanes' fused multiply-adds are emulated two lanes at a
// time in double precision: x·w is exact in double (24 + 24 ≤ 53 bits), the sum p + l is rounded
// to odd (round to nearest, TwoSum for the exact error, then force the last bit to 1 when the sum
// was inexact), and rounding that to float gives exactly fma(x, w, l) rounded once (Boldo &
// Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to
// odd", IEEE TC 2008: round-to-odd in ≥ p + 2 bits, then to nearest in p bits).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "mamba/tensor.h"
#include "ops/cpu/linear_kernels.h"

namespace mamba::ops::cpu {
namespace {

using v2d = double __attribute__((vector_size(16)));
using v2i64 = long long __attribute__((vector_size(16)));
using v2f = float __attribute__((vector_size(8)));

inline v2d load2(const float* p) {
  v2f f;
  std::memcpy(&f, p, sizeof f);
  return __builtin_convertvector(f, v2d);
}

/// fma(x, w, l) per lane, correctly rounded to float; l holds float values (as double).
inline v2d fma2(v2d x, v2d w, v2d l) {
  const v2d p = x * w;  // exact
  const v2d s = p + l;
  const v2d bb = s - p;
  const v2d e = (p - (s - bb)) + (l - bb);  // s + e = p + l exactly (TwoSum)
  v2i64 bits;
  std::memcpy(&bits, &s, sizeof bits);
  // Inexact (e ≠ 0; e is NaN only when s is ±inf or NaN, which stays as is): truncate toward zero
  // (one step down in magnitude when e points toward zero), then set the last bit (round to odd).
  const v2i64 inexact = (e != 0.0) & (e == e);
  const v2i64 toward_zero = e * s < 0.0;  // −1 where the exact sum is below s in magnitude
  bits = (bits + toward_zero) | (inexact & 1);
  v2d odd;
  std::memcpy(&odd, &bits, sizeof odd);
  return __builtin_convertvector(__builtin_convertvector(odd, v2f), v2d);
}

/// canonical_dot(x, w, K) (without bias), 16 lanes as 8 double pairs.
float dot(const float* x, const float* w, std::int64_t K) {
  v2d l[8] = {};
  const std::int64_t k16 = K - K % 16;
  for (std::int64_t k = 0; k < k16; k += 16)
    for (int i = 0; i < 8; ++i) l[i] = fma2(load2(x + k + 2 * i), load2(w + k + 2 * i), l[i]);
  float f[16];
  for (int i = 0; i < 8; ++i) {
    f[2 * i] = static_cast<float>(l[i][0]);
    f[2 * i + 1] = static_cast<float>(l[i][1]);
  }
  for (int s = 8; s >= 1; s /= 2)
    for (int i = 0; i < s; ++i) f[i] = f[i] + f[i + s];
  float r = f[0];
  for (std::int64_t k = k16; k < K; ++k) r = std::fma(x[k], w[k], r);
  return r;
}

}  // namespace

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
        const float r = dot(x, w + j * K, K);
        y[b0 + j] = p.bias != nullptr ? r + p.bias[b0 + j] : r;
      }
    }
  }
}

}  // namespace mamba::ops::cpu
