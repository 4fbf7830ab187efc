// Whole-row scans of a logits vector (ops.h find_non_finite / argmax / sum_exp): the model's
// non-finite check, greedy decoding and every logprob read every logit of every decoded token (50 K
// floats for the GPT-NeoX vocab), so they run as block-wise `omp simd` reductions (a plain
// early-exit loop does not vectorise: the std::max_element of the bench took ~200 µs per token,
// these ~7 µs) or on the dispatched vector exp (sum_exp: the scalar double loop took ~350 µs).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "ops/cpu/kernels.h"
#include "ops/ops.h"

namespace mamba::ops {

namespace {
constexpr std::int64_t kScanBlock = 1024;  ///< elements per vectorised block (4 KiB)
}  // namespace

std::int64_t find_non_finite(const float* x, std::int64_t n) {
  for (std::int64_t b = 0; b < n; b += kScanBlock) {
    const std::int64_t e = b + kScanBlock < n ? b + kScanBlock : n;
    std::uint32_t any = 0;
#pragma omp simd reduction(| : any)
    for (std::int64_t i = b; i < e; ++i) {
      std::uint32_t u;
      std::memcpy(&u, x + i, sizeof u);
      any |= static_cast<std::uint32_t>((u & 0x7f800000u) == 0x7f800000u);  // exponent all ones: inf or NaN
    }
    if (any != 0)
      for (std::int64_t i = b; i < e; ++i)
        if (!std::isfinite(x[i])) return i;
  }
  return -1;
}

double sum_exp(const float* x, float shift, std::int64_t n) { return cpu::cpu_kernels().sum_exp_row(x, shift, n); }

void exp_shifted(const float* x, float shift, float* out, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) out[i] = x[i] - shift;
  cpu::cpu_kernels().exp_row(out, out, n);  // element-wise: in place is fine
}

std::int64_t argmax(const float* x, std::int64_t n) {
  float best = -std::numeric_limits<float>::infinity();
  std::int64_t best_block = 0;
  for (std::int64_t b = 0; b < n; b += kScanBlock) {
    const std::int64_t e = b + kScanBlock < n ? b + kScanBlock : n;
    float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
    for (std::int64_t i = b; i < e; ++i) m = x[i] > m ? x[i] : m;
    if (m > best) {  // strictly: an equal maximum in a later block does not move the first one
      best = m;
      best_block = b;
    }
  }
  const std::int64_t e = best_block + kScanBlock < n ? best_block + kScanBlock : n;
  for (std::int64_t i = best_block; i < e; ++i)
    if (x[i] == best) return i;
  return best_block;  // every element −inf
}

}  // namespace mamba::ops
