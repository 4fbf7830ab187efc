// Per-target kernels behind ops::linear (y = x·Wᵀ + b over F32/BF16/F16 weights).
//
// linear.cc picks the target (cpu_target()), splits the outputs over threads and calls one of the
// functions below once per thread for a rectangle of outputs. Every target computes each y[m, n]
// with the canonical reduction order of linear_canonical.h (bitwise identical across targets, M,
// tile sizes and thread counts), so any split of the rectangle is batch-invariant.
#pragma once

#include <cstdint>

namespace mamba::ops::cpu {

/// Weight element type of a linear problem (the F32/BF16/F16 DTypes of mamba/tensor.h).
enum class LinearWeight : std::uint8_t { kF32, kBF16, kF16 };

/// One ops::linear call. x: [M, K] fp32 (row m at x + m·ldx); w: [N, K] contiguous rows of `wtype`
/// (uint16 bit patterns for BF16/F16); bias: [N] fp32 or nullptr; y: [M, N] fp32 (ldy).
struct LinearProblem {
  const float* x;
  std::int64_t ldx;
  const void* w;
  LinearWeight wtype;
  std::int64_t K;
  const float* bias;
  float* y;
  std::int64_t ldy;
};

/// Input rows up to which the SIMD tiles read the weights straight from memory in their dtype
/// (decode batches); more rows convert weight blocks to fp32 first (prefill).
inline constexpr std::int64_t kDirectMaxRows = 8;
/// The AVX-512 target (its 8-row batch tile) reads them directly for up to kDirectMaxRowsWide rows
/// while the rows' x, M·K floats, stays within kDirectMaxXFloats (384 KiB: in L2, which every
/// AVX-512 core has at ≥ 1 MiB, while each 3-row weight group passes all the rows from L1).
/// Zen 4, 2 threads, bf16 weights, GFLOP/s converted → direct: in_proj (K = 768) M = 12 121 → 160–169,
/// 16 137 → 175–185, 32 169 → 190–195, 64 192 → 205; out_proj (K = 1536) M = 16 132 → 189–203,
/// 64 181 → 217; M = 128: equal (in_proj 206, x_proj 203 / 199); M = 512: converted ahead (215 / 199).
/// The AVX2 target gains nothing from it (its 2 × 3 tile widens each weight vector per 2 rows).
inline constexpr std::int64_t kDirectMaxRowsWide = 64, kDirectMaxXFloats = 96 * 1024;

/// Whether the tiles read the weights of a problem of M input rows × K columns straight from memory
/// (wide: the AVX-512 target). ops::linear picks its thread split by it, the tiles their path.
constexpr bool linear_reads_direct(bool wide, std::int64_t M, std::int64_t K) {
  return M <= kDirectMaxRows || (wide && M <= kDirectMaxRowsWide && M * K <= kDirectMaxXFloats);
}

/// Weight rows per fp32-converted block for K columns (an L2-sized block; a multiple of 12, the
/// least common multiple of the micro-kernels' row counts). Defined in linear.cc (baseline code).
std::int64_t linear_block_rows(std::int64_t K);

/// Floats of per-thread scratch the kernels below need for a problem with K columns
/// (= linear_block_rows(K) · K; the caller owns it: a thread-local buffer that only grows).
std::int64_t linear_scratch_floats(std::int64_t K);

/// Computes y[m, n] for m ∈ [m0, m1), n ∈ [n0, n1) (single thread). `scratch` holds
/// linear_scratch_floats(K) floats. The AVX2 / AVX-512 versions may only be called
/// when cpu_target() allows them.
void linear_tile_baseline(const LinearProblem& p, std::int64_t m0, std::int64_t m1, std::int64_t n0,
                          std::int64_t n1, float* scratch);
void linear_tile_avx2(const LinearProblem& p, std::int64_t m0, std::int64_t m1, std::int64_t n0, std::int64_t n1,
                      float* scratch);
void linear_tile_avx512(const LinearProblem& p, std::int64_t m0, std::int64_t m1, std::int64_t n0,
                        std::int64_t n1, float* scratch);

}  // namespace mamba::ops::cpu
