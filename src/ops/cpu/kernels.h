// Dispatch table of the forward-pass kernels that are not projection GEMMs (Mamba-1 scan, SSD
// pieces, conv1d+SiLU, softplus, SiLU gate), one instance per CPU target.
//
// The same source (src/ops/cpu/kernels_impl.inc, over the width-generic vectors of simd.h) is
// compiled three times: kernels_baseline.cc (SSE2, 4 lanes), kernels_avx2.cc (AVX2+FMA, 8 lanes),
// kernels_avx512.cc (AVX-512F, 16 lanes). cpu_kernels() returns the table of cpu_target().
// Every kernel computes each output element by a fixed sequence of operations that depends only on
// its position (channel, row, column), never on how the caller split the work between threads or
// sequences, so results are bitwise identical for any thread count and batch composition (on one
// target; different targets differ in rounding, within the parity tolerances).
#pragma once

#include <cstdint>

#include "ops/ops.h"

namespace mamba::ops::cpu {

/// How a gemm / gemm_at call writes C (Kernels::gemm): accumulate onto C scaled by beta or
/// overwrite it, and optionally scale each finished row i by row_scale[i] (M floats, borrowed for
/// the call). The SSD folds its decays in here (the state's E·h before Bᵀ·(X∘w) is added, and
/// Y_off's E_i) instead of running separate passes over C.
struct GemmOut {
  bool accumulate = false;
  float beta = 1.0f;
  const float* row_scale = nullptr;
};

struct Kernels {
  int lanes;  ///< fp32 lanes per vector (4 / 8 / 16)

  /// Mamba-1 selective scan of channels [e0, e1) over all a.L tokens (ops::selective_scan's
  /// formula; Δ = a.dt, or softplus(a.dt) with a.dt_softplus). scratch: ≥ scan_scratch_floats(N) floats
  /// (transposed state and A of a tile of channels).
  /// A decode step (a.decode_step, L = 1) runs a row-wise variant (no transposes; y summed over n
  /// in another order, so not bitwise one row of a longer call, only within rounding); every other
  /// call, a one-token prefill piece included, is bitwise the rows of any longer call.
  void (*scan_channels)(const SelectiveScanArgs& a, std::int64_t e0, std::int64_t e1, float* scratch);

  /// C[M, n] (ldc) = ((accumulate ? out.beta · C : 0) + A[M, K] (lda) · B[K, n] (ldb)) · row_scale,
  /// fp32, row-major (GemmOut: accumulate, beta, row_scale). Each C element is one chain: start
  /// c = round(beta · C) (or 0), then c = fma(A[i, k], B[k, j], c) for k ascending (fused
  /// multiply-adds where the ISA has them), then, with row_scale, round(c · row_scale[i]) — bitwise
  /// what scaling C first and the result after, as separate passes, would give (one rounding each).
  void (*gemm)(std::int64_t M, std::int64_t n, std::int64_t K, const float* A, std::int64_t lda, const float* B,
               std::int64_t ldb, float* C, std::int64_t ldc, const GemmOut& out);

  /// gemm with A stored transposed: At is [K, M] (lda ≥ M), A[i, k] = At[k·lda + i].
  void (*gemm_at)(std::int64_t M, std::int64_t n, std::int64_t K, const float* At, std::int64_t lda, const float* B,
                  std::int64_t ldb, float* C, std::int64_t ldc, const GemmOut& out);

  /// One row i of the SSD's decayed, Δ-weighted C·Bᵀ: f[j] ·= dA for j < n_decay (= i), then
  /// w[j] = cb[j] · f[j] for j < n (= i + 1), then w[j] = 0 for n ≤ j < m (m ≤ n: none).
  /// f (in/out, n floats) carries F_i[j] = Δ_j · Π_{k=j+1..i} exp(a_k) from row to row (the caller
  /// sets f[i] = Δ_i first and passes dA = exp(a_i)): each decay is the product of the per-token
  /// decays, one rounding per step like the recurrence (ssd_step_head) — never an exp of a
  /// difference of two long running sums (which loses the exponent's digits once the chunk's Σ a_k
  /// reaches hundreds). A decayed f below FLT_MIN becomes 0 (no subnormal arithmetic; NaN stays).
  void (*ssd_decay_row)(float* w, float* f, const float* cb, float dA, std::int64_t n_decay, std::int64_t n,
                        std::int64_t m);

  /// SSD recurrence for one token of one head (the decode step: ssd_decode_batch with every L = 1):
  ///   h[p, :] = dA · h[p, :] + (dt · x[p]) · B[:];  y[p] = h[p, :] · C + Dh · x[p],  p < P, N = d_state.
  void (*ssd_step_head)(const float* x, float dt, float dA, const float* B, const float* C, float Dh, float* h,
                        std::int64_t P, std::int64_t N, float* y);

  /// Causal depthwise conv + SiLU for rows [t0, t1) and channels [c0, c1) (ops::conv1d_silu's
  /// formula). wT: [K, C] (the conv weight transposed, so a row is contiguous over channels);
  /// bias: [C] or nullptr; conv_state: [C, K−1] (read only here); y: [L, C] contiguous.
  /// prefetch_end > t1: rows [t1, prefetch_end) of x (all < L) are the caller's next; they are
  /// prefetched into L2 while these rows are computed (no effect on the results).
  void (*conv1d_silu_rows)(const float* x, std::int64_t ldx, std::int64_t t0, std::int64_t t1, std::int64_t c0,
                           std::int64_t c1, std::int64_t C, std::int64_t K, const float* wT, const float* bias,
                           const float* conv_state, float* y, std::int64_t prefetch_end);

  /// conv1d_silu_rows for one token (decode) and channels [c0, c1), reading the state in its own
  /// layout and advancing it:
  /// y[c] = silu(bias[c] + Σ_{j<K−1} wT[j·C + c]·conv_state[c·(K−1) + j] + wT[(K−1)·C + c]·x[c])
  /// (the same fused multiply-adds in the same order, so bitwise equal to conv1d_silu_rows), then
  /// conv_state[c, :] = (conv_state[c, 1:], x[c]). x, y: [C]; conv_state: [C, K−1], updated in place.
  void (*conv1d_silu_step)(const float* x, std::int64_t c0, std::int64_t c1, std::int64_t C, std::int64_t K,
                           const float* wT, const float* bias, float* conv_state, float* y);

  /// d[i] = clamp(softplus(d[i] + bias[i]), lo, hi), i < n (bias may be nullptr); NaN stays NaN.
  void (*softplus_clamp_row)(float* d, const float* bias, std::int64_t n, float lo, float hi);

  /// out[i] = silu(z[i]) · x[i], i < n (out may alias x).
  void (*silu_mul_row)(const float* z, const float* x, float* out, std::int64_t n);

  /// Σ_i x[i]² in double (16-wide partial sums, then 4-wide into the first, in a fixed order, then
  /// the scalar tail), i < n.
  double (*sumsq_row)(const float* x, std::int64_t n);

  /// y[i] = w[i] · (x[i] · r), or x[i] · r when w is nullptr, i < n (the RMSNorm scaling: two fp32
  /// roundings, as the scalar expression; y may alias x).
  void (*scale_row)(const float* x, float r, const float* w, float* y, std::int64_t n);

  /// out[i] = exp(x[i]), i < n (vexp, ≤ 2 ulp; the SSD's per-row decays, and the tests of the vector exp).
  void (*exp_row)(const float* x, float* out, std::int64_t n);

  /// Σ_i exp(x[i] − shift), i < n (ops::sum_exp): vexp of the fp32 difference, summed in fp32 lanes
  /// over blocks of 256 elements, each block's lanes added into a double in order.
  double (*sum_exp_row)(const float* x, float shift, std::int64_t n);
  /// out[i] = the Mamba-1 scan's decay exp(dt[i]·A[i]), computed as scan_channels does:
  /// 2^(dt·fl(A·log2 e)) (simd.h vexp2_nonpos), i < n; dt ≥ 0, A ≤ 0 finite (for tests).
  void (*scan_decay_row)(const float* dt, const float* A, float* out, std::int64_t n);
};

/// Channels per tile of the prefill scan: their transposed state and A (2·N floats per channel,
/// 16 KiB at N = 16) stay in L1 while the tile runs through the tokens.
inline constexpr std::int64_t kScanTileChannels = 128;

/// Tokens per pass of the prefill scan over a tile's channel groups.
inline constexpr std::int64_t kScanTokenChunk = 16;

/// Floats of scratch scan_channels needs at d_state N (any target, any channel range): the tile's
/// transposed state and A, and Δ of one token chunk (a.dt_softplus).
inline std::int64_t scan_scratch_floats(std::int64_t N) {
  return 2 * N * kScanTileChannels + kScanTokenChunk * kScanTileChannels;
}

/// The kernels of cpu_target().
const Kernels& cpu_kernels();

namespace baseline { extern const Kernels kKernels; }
namespace avx2 { extern const Kernels kKernels; }
namespace avx512 { extern const Kernels kKernels; }

}  // namespace mamba::ops::cpu
