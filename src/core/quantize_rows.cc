// Row quantizers of mamba.cpp's q8 / q4 format (rules in include/mamba/quantize.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "mamba/quantize.h"

namespace mamba {

namespace {
/// The row quantizers' preconditions: K a positive multiple of the group size, every weight finite
/// (a NaN would reach a float → int conversion, undefined behaviour).
Status check_row(const float* w, std::int64_t K) {
  if (K <= 0 || K % kQuantGroupSize != 0)
    return make_error(ErrorCode::kInvalidArgument, fmt::format("row length K = {}: expected a positive multiple of {}", K, kQuantGroupSize));
  for (std::int64_t k = 0; k < K; ++k)
    if (!std::isfinite(w[k])) return make_error(ErrorCode::kNumerical, fmt::format("non-finite weight {} at k = {}: cannot quantize", w[k], k));
  return {};
}
}  // namespace

Status quantize_row_q8(const float* w, std::int64_t K, std::int8_t* codes, float* scales) {
  MAMBA_RETURN_IF_ERROR(check_row(w, K));
  for (std::int64_t g = 0; g < K / kQuantGroupSize; ++g) {
    const float* wg = w + g * kQuantGroupSize;
    float amax = 0.0f;
    for (int i = 0; i < kQuantGroupSize; ++i) amax = std::max(amax, std::fabs(wg[i]));
    const float d = amax / 127.0f;
    scales[g] = d;
    for (int i = 0; i < kQuantGroupSize; ++i) {
      const float q = d == 0.0f ? 0.0f : std::nearbyint(wg[i] / d);
      codes[g * kQuantGroupSize + i] = static_cast<std::int8_t>(std::clamp(q, -127.0f, 127.0f));
    }
  }
  return {};
}

Status quantize_row_q4(const float* w, std::int64_t K, std::uint8_t* codes, float* scales) {
  MAMBA_RETURN_IF_ERROR(check_row(w, K));
  for (std::int64_t g = 0; g < K / kQuantGroupSize; ++g) {
    const float* wg = w + g * kQuantGroupSize;
    float m = 0.0f;
    for (int i = 0; i < kQuantGroupSize; ++i)
      if (std::fabs(wg[i]) > std::fabs(m)) m = wg[i];
    const float d = m / -8.0f;
    scales[g] = d;
    std::uint8_t u[kQuantGroupSize];
    for (int i = 0; i < kQuantGroupSize; ++i) {
      const float q = d == 0.0f ? 0.0f : std::clamp(std::nearbyint(wg[i] / d), -8.0f, 7.0f);
      u[i] = static_cast<std::uint8_t>(static_cast<int>(q) + 8);
    }
    for (int j = 0; j < kQuantGroupSize / 2; ++j)
      codes[g * kQuantGroupSize / 2 + j] = static_cast<std::uint8_t>(u[2 * j] | (u[2 * j + 1] << 4));
  }
  return {};
}

}  // namespace mamba
