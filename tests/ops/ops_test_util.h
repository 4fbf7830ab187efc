// Helpers for the op parity tests: seeded random buffers and max-abs-difference checks.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "mamba/tensor.h"
#include "ops/cpu/cpu_target.h"
#include "ops/ops.h"

namespace mamba::test {

/// Runs fn() once per CPU target this machine supports (baseline, then AVX2, AVX-512 where present;
/// SCOPED_TRACE names it), then restores the target that was active: the parity tests' "every
/// dispatch target" loop.
template <class Fn>
void for_each_target(Fn fn) {
  const ops::cpu::CpuTarget original = ops::cpu::cpu_target();
  for (ops::cpu::CpuTarget t : ops::cpu::supported_cpu_targets()) {
    ops::cpu::set_cpu_target_for_test(t);
    SCOPED_TRACE(ops::cpu::cpu_target_name(t));
    fn();
  }
  ops::cpu::set_cpu_target_for_test(original);
}

/// A weight's packed copy for the tests (ops::pack_weight_bytes + pack_weight_to, or the bf16 tier's
/// pair): an owning buffer W.packed points at; empty (W unchanged) when nothing is packed.
inline Tensor pack_for_test(TensorView& W, bool bf16_tier) {
  const std::int64_t bytes = bf16_tier ? ops::pack_weight_bf16_bytes(W) : ops::pack_weight_bytes(W);
  if (bytes == 0) return Tensor();
  Tensor t(DType::kU8, Shape{bytes});
  if (bf16_tier) ops::pack_weight_bf16_to(W, t.data<std::uint8_t>());
  else ops::pack_weight_to(W, t.data<std::uint8_t>());
  return t;
}

inline std::vector<float> random_vec(std::int64_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

/// Stores `v` as `dtype` (F32/BF16/F16), rounding like PyTorch; `rounded` gets the stored values as float.
inline std::vector<std::uint16_t> to_half(const std::vector<float>& v, DType dtype, std::vector<float>& rounded) {
  std::vector<std::uint16_t> out(v.size());
  rounded.resize(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    out[i] = dtype == DType::kBF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
    rounded[i] = dtype == DType::kBF16 ? bf16_to_f32(out[i]) : f16_to_f32(out[i]);
  }
  return out;
}

inline double max_abs_diff(const float* a, const float* b, std::int64_t n) {
  double m = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i]));
    if (!(d <= m)) m = d;  // NaN propagates as failure
  }
  return m;
}

/// Batch and thread invariance of ops::linear on W (K inputs, N outputs): M rows of x [M, K] in one
/// call with 2 threads, then rows 0, 5, 64 and M − 1 alone with 1 thread — bitwise equal.
inline void expect_rows_equal_alone(const TensorView& W, const std::vector<float>& x, std::int64_t M, const std::string& what) {
  const std::int64_t N = W.shape[0], K = W.shape[1];
  std::vector<float> all(std::size_t(M * N)), one(static_cast<std::size_t>(N));
  const int saved_threads = ops::num_threads();
  ops::set_num_threads(2);
  ops::linear(x.data(), K, M, W, TensorView(), all.data(), N);
  ops::set_num_threads(1);
  for (std::int64_t m : {std::int64_t{0}, std::int64_t{5}, std::int64_t{64}, M - 1}) {
    ops::linear(x.data() + m * K, K, 1, W, TensorView(), one.data(), N);
    EXPECT_EQ(std::memcmp(one.data(), all.data() + m * N, std::size_t(N) * 4), 0) << what << " row " << m;
  }
  ops::set_num_threads(saved_threads);
}

}  // namespace mamba::test
