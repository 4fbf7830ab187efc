// CPU linear (y = x·Wᵀ + b) and embedding lookup over F32/BF16/F16 weights (GCC vector extensions).
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
#include "ops/cpu/quantized.h"
#include "ops/ops.h"
#include "ops/profile.h"

namespace mamba::ops {
namespace {

// 8 lanes held as two 4-wide vectors (native SSE2 registers on the x86-64 baseline; wider ISAs are
// issue 5's runtime-dispatched kernels, which must keep a per-output order independent of M).
using v4 = float __attribute__((vector_size(16)));
using v4u32 = std::uint32_t __attribute__((vector_size(16)));
using v4u16 = std::uint16_t __attribute__((vector_size(8)));
struct V8 {
  v4 lo, hi;
};
constexpr std::int64_t kLanes = 8;
constexpr std::int64_t kRowsPerTask = 16;

inline v4 load4(const float* p) {
  v4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
/// 4 bf16 values widened to fp32 (exact: bf16 is the top half of an fp32).
inline v4 load4_bf16(const std::uint16_t* p) {
  v4u16 h;
  std::memcpy(&h, p, sizeof h);
  const v4u32 u = __builtin_convertvector(h, v4u32) << 16;
  v4 f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// Weight element loads: fp32 rows, or bf16 rows read directly.
template <bool kBf16> inline v4 wload4(const void* w, std::int64_t i) {
  if constexpr (kBf16) return load4_bf16(static_cast<const std::uint16_t*>(w) + i);
  else return load4(static_cast<const float*>(w) + i);
}
template <bool kBf16> inline float wload1(const void* w, std::int64_t i) {
  if constexpr (kBf16) return bf16_to_f32(static_cast<const std::uint16_t*>(w)[i]);
  else return static_cast<const float*>(w)[i];
}

inline void fma8(V8& acc, v4 xlo, v4 xhi, v4 wlo, v4 whi) {
  acc.lo += xlo * wlo;
  acc.hi += xhi * whi;
}

/// One row's K % 8 tail (in order) and the fixed lane tree.
template <bool kBf16>
inline float finish(const V8& a, const float* x, const void* w, std::int64_t row_off, std::int64_t kv, std::int64_t K) {
  float tail = 0.0f;
  for (std::int64_t k = kv; k < K; ++k) tail += x[k] * wload1<kBf16>(w, row_off + k);
  return ((a.lo[0] + a.hi[0]) + (a.lo[1] + a.hi[1])) + ((a.lo[2] + a.hi[2]) + (a.lo[3] + a.hi[3])) + tail;
}

/// y[0] = dot(x, w[0:K]). Fixed order per output: 8 lanes over k (step 8), the K % 8 tail in
/// order, then lane tree + tail.
template <bool kBf16>
inline void dot1(const float* x, const void* w, std::int64_t K, float* y) {
  V8 a0{};
  const std::int64_t kv = K - K % kLanes;
  for (std::int64_t k = 0; k < kv; k += kLanes)
    fma8(a0, load4(x + k), load4(x + k + 4), wload4<kBf16>(w, k), wload4<kBf16>(w, k + 4));
  y[0] = finish<kBf16>(a0, x, w, 0, kv, K);
}

/// y[r] = dot(x, w[r·K : (r+1)·K]) for r < 4, each bitwise equal to dot1 on that row (x is
/// loaded once for four weight rows).
template <bool kBf16>
inline void dot4(const float* x, const void* w, std::int64_t K, float* y) {
  V8 a0{}, a1{}, a2{}, a3{};
  const std::int64_t kv = K - K % kLanes;
  for (std::int64_t k = 0; k < kv; k += kLanes) {
    const v4 xlo = load4(x + k), xhi = load4(x + k + 4);
    fma8(a0, xlo, xhi, wload4<kBf16>(w, k), wload4<kBf16>(w, k + 4));
    fma8(a1, xlo, xhi, wload4<kBf16>(w, K + k), wload4<kBf16>(w, K + k + 4));
    fma8(a2, xlo, xhi, wload4<kBf16>(w, 2 * K + k), wload4<kBf16>(w, 2 * K + k + 4));
    fma8(a3, xlo, xhi, wload4<kBf16>(w, 3 * K + k), wload4<kBf16>(w, 3 * K + k + 4));
  }
  y[0] = finish<kBf16>(a0, x, w, 0, kv, K);
  y[1] = finish<kBf16>(a1, x, w, K, kv, K);
  y[2] = finish<kBf16>(a2, x, w, 2 * K, kv, K);
  y[3] = finish<kBf16>(a3, x, w, 3 * K, kv, K);
}

/// Rows [0, nr) of y for one input row x: w holds nr weight rows of K elements.
template <bool kBf16>
inline void dot_block(const float* x, const void* w, std::int64_t nr, std::int64_t K, float* y) {
  const std::int64_t esz = kBf16 ? 2 : 4;
  const auto* wb = static_cast<const std::uint8_t*>(w);
  std::int64_t r = 0;
  for (; r + 4 <= nr; r += 4) dot4<kBf16>(x, wb + r * K * esz, K, y + r);
  for (; r < nr; ++r) dot1<kBf16>(x, wb + r * K * esz, K, y + r);
}

/// Below this many input rows, bf16 weights are read directly instead of converted per block.
constexpr std::int64_t kDirectBf16MaxRows = 2;

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
  const ProfileScope profile(OpKind::kLinear);
  if (W.dtype == DType::kQ8 || W.dtype == DType::kQ4) return cpu::linear_quantized(x, ldx, M, W, bias, y, ldy);
  const std::int64_t n_out = W.shape[0], K = W.shape[1];
  const std::int64_t n_tasks = (n_out + kRowsPerTask - 1) / kRowsPerTask;
  const bool parallel = M * n_out * K >= cpu::kParallelMinWork && n_tasks > 1;
#pragma omp parallel for schedule(static) num_threads(num_threads()) if (parallel)
  for (std::int64_t task = 0; task < n_tasks; ++task) {
    static thread_local std::vector<float> buf;
    const std::int64_t n0 = task * kRowsPerTask, nr = std::min(kRowsPerTask, n_out - n0);
    if (W.dtype == DType::kBF16 && M <= kDirectBf16MaxRows) {
      const auto* wb = static_cast<const std::uint16_t*>(W.data) + n0 * K;
      for (std::int64_t m = 0; m < M; ++m) {
        float* ym = y + m * ldy + n0;
        dot_block<true>(x + m * ldx, wb, nr, K, ym);
        if (!bias.empty())
          for (std::int64_t i = 0; i < nr; ++i) ym[i] += bias_at(bias, n0 + i);
      }
      continue;
    }
    const float* w = rows_f32(W, n0, nr, buf);
    for (std::int64_t m = 0; m < M; ++m) {
      float* ym = y + m * ldy + n0;
      dot_block<false>(x + m * ldx, w, nr, K, ym);
      if (!bias.empty())
        for (std::int64_t i = 0; i < nr; ++i) ym[i] += bias_at(bias, n0 + i);
    }
  }
}

void embedding(const TensorView& table, std::span<const std::int32_t> ids, float* out) {
  const ProfileScope profile(OpKind::kEmbedding);
  if (table.dtype == DType::kQ8 || table.dtype == DType::kQ4) return cpu::embedding_quantized(table, ids, out);
  const std::int64_t d = table.shape[1];
  const auto* base = static_cast<const std::uint8_t*>(table.data);
  for (std::size_t i = 0; i < ids.size(); ++i)
    convert_to_f32(base + dtype_bytes(table.dtype, std::size_t(ids[i] * d)), table.dtype, std::size_t(d),
                   out + std::int64_t(i) * d);
}

}  // namespace mamba::ops
