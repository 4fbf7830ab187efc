// CPU linear (y = x·Wᵀ + b) and embedding lookup over F32/BF16/F16 weights.
//
// Batch invariance: y[m, n] is always the same fixed-order fp32 dot product (8 lanes striding over
// k in steps of 8, the K % 8 tail summed in order, then a fixed lane tree), whatever M is, which
// rows are present, or how the work is split across threads. Threads split the OUTPUT features
// (blocks of kRowsPerTask weight rows, converted to fp32 once per call into a thread-local buffer
// and reused for all M input rows), never the reduction.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/cpu/parallel.h"
#include "ops/ops.h"

// GCC vector extensions; all helpers are inlined, so the "AVX ABI" note is irrelevant.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace mamba::ops {
namespace {

using v8 = float __attribute__((vector_size(32)));
constexpr std::int64_t kLanes = 8;
constexpr std::int64_t kRowsPerTask = 16;

inline v8 load8(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline float lane_sum(v8 a) {
  return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}

/// y[r] = dot(x, w + r·K) for r < R, each with the same fixed order as R = 1.
template <int R>
inline void dot_rows(const float* x, const float* w, std::int64_t K, float* y) {
  v8 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = v8{};
  const std::int64_t kv = K - K % kLanes;
  for (std::int64_t k = 0; k < kv; k += kLanes) {
    const v8 xv = load8(x + k);
    for (int r = 0; r < R; ++r) acc[r] += xv * load8(w + r * K + k);
  }
  for (int r = 0; r < R; ++r) {
    float tail = 0.0f;
    for (std::int64_t k = kv; k < K; ++k) tail += x[k] * w[r * K + k];
    y[r] = lane_sum(acc[r]) + tail;
  }
}

/// Converts rows [n0, n0 + nr) of W to fp32; returns a pointer to them (W itself when F32).
const float* rows_f32(const TensorView& W, std::int64_t n0, std::int64_t nr, std::vector<float>& buf) {
  const std::int64_t K = W.shape[1];
  if (W.dtype == DType::kF32) return static_cast<const float*>(W.data) + n0 * K;
  buf.resize(static_cast<std::size_t>(nr * K));
  const auto* src = static_cast<const std::uint8_t*>(W.data) + dtype_bytes(W.dtype, std::size_t(n0 * K));
  convert_to_f32(src, W.dtype, std::size_t(nr * K), buf.data());
  return buf.data();
}

float bias_at(const TensorView& b, std::int64_t n) {
  switch (b.dtype) {
    case DType::kF32: return static_cast<const float*>(b.data)[n];
    case DType::kBF16: return bf16_to_f32(static_cast<const std::uint16_t*>(b.data)[n]);
    case DType::kF16: return f16_to_f32(static_cast<const std::uint16_t*>(b.data)[n]);
    default: return 0.0f;
  }
}

}  // namespace

void linear(const float* x, std::int64_t ldx, std::int64_t M, const TensorView& W, const TensorView& bias,
            float* y, std::int64_t ldy) {
  const std::int64_t n_out = W.shape[0], K = W.shape[1];
  const std::int64_t n_tasks = (n_out + kRowsPerTask - 1) / kRowsPerTask;
  const bool parallel = M * n_out * K >= cpu::kParallelMinWork && n_tasks > 1;
#pragma omp parallel for schedule(static) num_threads(num_threads()) if (parallel)
  for (std::int64_t task = 0; task < n_tasks; ++task) {
    static thread_local std::vector<float> buf;
    const std::int64_t n0 = task * kRowsPerTask, nr = std::min(kRowsPerTask, n_out - n0);
    const float* w = rows_f32(W, n0, nr, buf);
    for (std::int64_t m = 0; m < M; ++m) {
      const float* xm = x + m * ldx;
      float* ym = y + m * ldy + n0;
      std::int64_t r = 0;
      for (; r + 4 <= nr; r += 4) dot_rows<4>(xm, w + r * K, K, ym + r);
      for (; r < nr; ++r) dot_rows<1>(xm, w + r * K, K, ym + r);
      if (!bias.empty())
        for (std::int64_t i = 0; i < nr; ++i) ym[i] += bias_at(bias, n0 + i);
    }
  }
}

void embedding(const TensorView& table, std::span<const std::int32_t> ids, float* out) {
  const std::int64_t d = table.shape[1];
  const auto* base = static_cast<const std::uint8_t*>(table.data);
  for (std::size_t i = 0; i < ids.size(); ++i)
    convert_to_f32(base + dtype_bytes(table.dtype, std::size_t(ids[i] * d)), table.dtype, std::size_t(d),
                   out + std::int64_t(i) * d);
}

}  // namespace mamba::ops
