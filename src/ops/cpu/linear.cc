// CPU linear (y = x·Wᵀ + b over F32/BF16/F16 weights) and embedding lookup.
//
// linear() is a dispatcher: it converts the bias to fp32, splits the outputs over threads in
// contiguous rectangles and runs the current target's tile kernel (linear_kernels.h) on each. Every
// target computes each output in the canonical order of linear_canonical.h, so results do not depend
// on the target, on M, on the other rows or on the split (batch invariance).
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/cpu/bf16_dot.h"
#include "ops/cpu/cpu_target.h"
#include "ops/cpu/linear_kernels.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/quantized.h"
#include "ops/cpu/thread_pool.h"
#include "ops/ops.h"
#include "ops/profile.h"

namespace mamba::ops {
namespace cpu {

std::int64_t linear_block_rows(std::int64_t K) {
  // The fp32 weight block per thread: 3/8 of L2, which leaves room for the block of kRowBlock input
  // rows that sweeps over it (each weight block makes one pass over all the input rows, so a bigger
  // block means fewer passes of the input through L3: Zen 5, 1 MiB L2, exact prefill of the 130m
  // models, 96 KiB → 384 KiB: in_proj −15%, prefill +6–9% in interleaved runs).
  static const std::int64_t block_bytes =
      std::clamp<std::int64_t>(cpu_l2_cache_bytes() * 3 / 8, 96 * 1024, 768 * 1024);
  constexpr std::int64_t kMaxRows = 240;
  const std::int64_t nb = block_bytes / (4 * std::max<std::int64_t>(K, 1)) / 12 * 12;
  return std::clamp<std::int64_t>(nb, 12, kMaxRows);
}

std::int64_t linear_scratch_floats(std::int64_t K) { return linear_block_rows(K) * K; }

}  // namespace cpu

namespace {

/// Output rows per thread are a multiple of this (the micro-kernels' row counts divide it).
constexpr std::int64_t kRowQuantum = 24;

void run_tile(const cpu::LinearProblem& p, std::int64_t m0, std::int64_t m1, std::int64_t n0, std::int64_t n1) {
  if (m0 >= m1 || n0 >= n1) return;
  static thread_local std::vector<float> scratch;
  constexpr std::size_t kAlign = 16;  // floats: the converted rows start on a cache line
  const auto need = static_cast<std::size_t>(cpu::linear_scratch_floats(p.K)) + kAlign;
  if (scratch.size() < need) scratch.resize(need);
  float* s = scratch.data();
  s += (kAlign - (reinterpret_cast<std::uintptr_t>(s) / sizeof(float)) % kAlign) % kAlign;
  switch (cpu::cpu_target()) {
    case cpu::CpuTarget::kAvx512: return cpu::linear_tile_avx512(p, m0, m1, n0, n1, s);
    case cpu::CpuTarget::kAvx2: return cpu::linear_tile_avx2(p, m0, m1, n0, n1, s);
    case cpu::CpuTarget::kBaseline: return cpu::linear_tile_baseline(p, m0, m1, n0, n1, s);
  }
}

/// Bias as fp32: the tensor itself when F32, else converted into a buffer that only grows.
const float* bias_f32(const TensorView& b) {
  if (b.empty()) return nullptr;
  if (b.dtype == DType::kF32) return static_cast<const float*>(b.data);
  static thread_local std::vector<float> buf;
  const auto n = static_cast<std::size_t>(b.shape[0]);
  if (buf.size() < n) buf.resize(n);
  convert_to_f32(b.data, b.dtype, n, buf.data());
  return buf.data();
}

}  // namespace

void linear(const float* x, std::int64_t ldx, std::int64_t M, const TensorView& W, const TensorView& bias,
            float* y, std::int64_t ldy) {
  const ProfileScope profile(OpKind::kLinear);
  if (W.dtype == DType::kQ8 || W.dtype == DType::kQ4) return cpu::linear_quantized(x, ldx, M, W, bias, y, ldy);
  if (W.packed != nullptr) return cpu::bf16dot::linear(x, ldx, M, W, bias_f32(bias), y, ldy);  // the bf16 tier
  const std::int64_t N = W.shape[0], K = W.shape[1];
  const cpu::LinearWeight wt = W.dtype == DType::kBF16  ? cpu::LinearWeight::kBF16
                               : W.dtype == DType::kF16 ? cpu::LinearWeight::kF16
                                                        : cpu::LinearWeight::kF32;
  const cpu::LinearProblem p{x, ldx, W.data, wt, K, bias_f32(bias), y, ldy};
  const int T = num_threads();
  // One input row (decode) streams its weights from memory: two threads read even a small weight
  // (x_proj, dt_proj: 120–150 K elements) sooner than one, so the threshold is lower there.
  const std::int64_t min_work = M == 1 ? cpu::kParallelMinWork / 4 : cpu::kParallelMinWork;
  if (T <= 1 || M * N * K < min_work) return run_tile(p, 0, M, 0, N);
  // One parallel region; each thread takes one contiguous rectangle. Split the output features
  // (each weight row is then read by one thread only) unless there are too few of them (x_proj,
  // N = 80, in prefill): then split the input rows.
  const bool split_n = N >= 64 * std::int64_t(T) || M < 4 * std::int64_t(T);
  if (split_n && M >= 2) {
    // Several input rows (batched decode, prefill): the output features in grains — kRowQuantum
    // rows while the weights are read straight from memory (linear_reads_direct), else one converted weight
    // block (linear_block_rows) — each thread its own range front to back, then the others' tails
    // (parallel_for_balanced). Zen 5 VM, 2 threads, b=8 decode of mamba-130m: the two halves of a
    // static split finished 9.6 µs apart on average (of ~60 µs regions), the caller's core slower.
    // One input row keeps the static split: its kernel reads a thread's range as three streams
    // a third of the range apart, which small grains would bring next to each other.
    const bool direct = cpu::linear_reads_direct(cpu::cpu_target() == cpu::CpuTarget::kAvx512, M, K);
    const std::int64_t grain = direct ? kRowQuantum : cpu::linear_block_rows(K);
    cpu::parallel_for_balanced(N, grain, true, [&](std::int64_t n0, std::int64_t n1) { run_tile(p, 0, M, n0, n1); });
    return;
  }
  cpu::parallel_region(T, [&](int ti, int nti) {
    const std::int64_t t = ti, nt = nti;
    if (split_n) {
      const std::int64_t quanta = (N + kRowQuantum - 1) / kRowQuantum;
      const std::int64_t n0 = std::min(N, quanta * t / nt * kRowQuantum);
      const std::int64_t n1 = std::min(N, quanta * (t + 1) / nt * kRowQuantum);
      run_tile(p, 0, M, n0, n1);
    } else {
      run_tile(p, M * t / nt, M * (t + 1) / nt, 0, N);
    }
  });
}

bool linear_fuses_softplus(const TensorView& W) {
  // A float weight with a packed copy: the bf16 tier's (quantized weights' copies are blocked ones).
  return W.packed != nullptr && pack_weight_bf16_bytes(W) > 0 && cpu::bf16dot::kernels_available();
}

void linear_softplus(const float* x, std::int64_t ldx, std::int64_t M, const TensorView& W, const TensorView& bias,
                     float* y, std::int64_t ldy) {
  if (linear_fuses_softplus(W)) {
    const ProfileScope profile(OpKind::kLinear);
    return cpu::bf16dot::linear(x, ldx, M, W, bias_f32(bias), y, ldy, /*softplus=*/true);
  }
  linear(x, ldx, M, W, bias, y, ldy);
  softplus_clamp(y, ldy, M, W.shape[0], nullptr, 0.0f, std::numeric_limits<float>::infinity());
}

bool linear_fuses_conv_silu(const TensorView& W, std::int64_t conv_taps, std::int64_t M) {
  // The same kernel; its window holds 3 rows. Up to kDecodeRows rows keep the decode tile.
  return conv_taps == 4 && M > cpu::bf16dot::kDecodeRows && linear_fuses_softplus(W);
}

void linear_conv_silu(const float* x, std::int64_t ldx, std::int64_t M, const TensorView& W, const TensorView& bias,
                      float* y, std::int64_t ldy, const ConvSiluColumns& conv) {
  if (linear_fuses_conv_silu(W, conv.K, M)) {
    const ProfileScope profile(OpKind::kLinear);
    return cpu::bf16dot::linear(x, ldx, M, W, bias_f32(bias), y, ldy, /*softplus=*/false, &conv);
  }
  linear(x, ldx, M, W, bias, y, ldy);
  std::vector<float> raw(static_cast<std::size_t>(M * conv.C)), out(raw.size());
  for (std::int64_t t = 0; t < M; ++t)
    std::memcpy(raw.data() + t * conv.C, y + t * ldy + conv.col0, static_cast<std::size_t>(conv.C) * sizeof(float));
  const Conv1dSeq seq{raw.data(), M, conv.conv_state, out.data()};
  conv1d_silu_batch({&seq, 1}, conv.C, conv.C, conv.K, conv.wT, conv.bias);
  for (std::int64_t t = 0; t < M; ++t)
    std::memcpy(y + t * ldy + conv.col0, out.data() + t * conv.C, static_cast<std::size_t>(conv.C) * sizeof(float));
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
