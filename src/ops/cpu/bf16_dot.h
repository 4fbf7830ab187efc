// The bf16 precision tier of ops::linear (LoadOptions::precision = Precision::kBF16, or kAuto's choice
// for bf16 checkpoints on CPUs with AVX-512 BF16): the
// activations and the weights rounded to bf16, products summed by AVX-512 BF16 dot products
// (VDPBF16PS: 32 products per instruction, twice the fp32 FMA rate), in one fixed order:
//
//   xb[k] = bf16(x[k]), wb[k] = bf16(W[n, k]) with bf16(v) = round to nearest even of v, a
//   denormal v taken as ±0 first (to_bf16 below; F32/F16 weights rounded once at packing, BF16
//   weights as stored); k = K (odd K) pads both with +0; with
//   daz(v) = (|v| < FLT_MIN ? ±0 : v) and ftz likewise,
//     r = +0;  for p = 0 .. ⌈K/2⌉ − 1:  r = ftz(fma(daz(wb[2p+1]), daz(xb[2p+1]), r));
//                                       r = ftz(fma(daz(wb[2p]),   daz(xb[2p]),   r));
//     y[m, n] = r + bias[n]   (fp32; no bias → r)
// — one VDPBF16PS lane step per pair (Intel SDM: the odd product first, each an FMA with DAZ in,
// FTZ out, round to nearest even; checked bitwise on Zen 5). Every target and M gives this
// bitwise (the scalar reference runs where the CPU lacks AVX-512 BF16), so the tier keeps batch
// invariance; against the exact fp32 tier it differs by the bf16 rounding of x and W (≤ 2^-8
// relative per element).
//
// Weights: the blocked layout below, packed at load (ops::pack_weight_bf16_to). Blocks of kBlockRows
// = 16 weight rows (the last padded with zero rows), block b = ⌈K/2⌉ vectors of 64 bytes; vector p
// holds row 16b + n's pair (wb[2p], wb[2p+1]) as 4 bytes at byte 4n (the even k in the low half):
// one VDPBF16PS of a weight vector by one activation pair broadcast advances 16 rows' sums.
#pragma once

#include <cstdint>
#include <cstring>

#include "mamba/tensor.h"
#include "ops/ops.h"

namespace mamba::ops::cpu::bf16dot {

inline constexpr int kBlockRows = 16;
/// Most input rows the AVX-512 BF16 kernel takes in its decode tile (all rows at once, each weight
/// block read once, three prefetched streams); more rows, and any call with the conv epilogue, take
/// its prefill order (rows in order down each block).
inline constexpr int kDecodeRows = 8;
/// Weight blocks the decode tile reads at once (three streams far apart, or adjacent for a short
/// range), and so the grain in which threads share a decode batch's blocks at run time
/// (bf16dot::linear): a grain taken alone still runs as three streams. Zen 5, 2 threads, linear
/// time per step, medians of 10–12 interleaved runs, grains of 1 → 3 blocks: mamba-130m b=8 5.40 →
/// 5.20 ms (10 of 12 ahead), mamba2-130m b=8 5.64 → 5.32 (10 of 10), b=2 and b=6 within the noise;
/// grains of 2 and 6 behind 3.
inline constexpr int kDecodeStreams = 3;
/// Adjacent weight blocks the prefill tile (more than kDecodeRows rows) passes its rows over, and
/// so the grain of a prefill's run-time split (bf16dot::linear). Zen 5, 2 threads, prefill 512,
/// linear ms, 6 interleaved rounds, grains of 1 → 2 blocks: mamba2-130m 136.0–138.9 → 133.3–136.5
/// (6 of 6 ahead), mamba-130m 148.8–166.3 → 145.5–152.0 (5 of 6); 4 blocks as 2.
inline constexpr int kPrefillBlocks = 2;

// Helpers in an unnamed namespace: each file (the AVX-512 BF16 one included) gets its own copy, so
// the linker never hands one compiled with wider instructions to another (cpu_target.h).
namespace {

/// bf16(v) of the order above: ±0 for a denormal v, else f32_to_bf16 (RNE, NaN stays NaN).
inline std::uint16_t to_bf16(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
  std::memcpy(&v, &u, 4);
  return f32_to_bf16(v);
}

/// ⌈K/2⌉: activation pairs per row, weight vectors per block.
inline std::int64_t pairs(std::int64_t K) { return (K + 1) / 2; }

}  // namespace

/// Bytes of W [N, K] in the blocked layout.
std::int64_t packed_bytes(std::int64_t N, std::int64_t K);
/// W (F32 / BF16 / F16 [N, K], contiguous) → the blocked layout in `out` (packed_bytes(N, K) bytes).
void pack(const TensorView& W, std::uint8_t* out);

/// Activation rows x [M, K] (row stride ldx) → pairs xb [M, ⌈K/2⌉] (low half = even k, to_bf16,
/// odd K's pad +0): the scalar version and the AVX-512 one (only when kernels_available()).
void round_rows(const float* x, std::int64_t ldx, std::int64_t M, std::int64_t K, std::uint32_t* xb);
void round_rows_avx512bf16(const float* x, std::int64_t ldx, std::int64_t M, std::int64_t K, std::uint32_t* xb);

/// The conv1d + SiLU that ops::linear_conv_silu applies to a column range of the output (ops.h).
using ConvSiluEpilogue = ops::ConvSiluColumns;

/// y[m·ldy + n] = r + bias[n] (bias nullptr: r) for m ∈ [m0, m1) and the rows n < N of blocks
/// [b0, b1) of `wp`, with `softplus` clamp(softplus(r + bias[n]), 0, +inf) (ops::linear_softplus),
/// with `conv` the conv epilogue (ops::linear_conv_silu; then m0 = 0, m1 = M: the window runs down
/// all rows); the two epilogues only in the AVX-512 BF16 kernel (dot_blocks_ref ignores both: their
/// callers ask linear_fuses_* first), never both at once; xb [M, Kp] (pairs, row stride Kp).
struct Args {
  const std::uint32_t* xb;
  std::int64_t M, K, N;
  const std::uint8_t* wp;
  const float* bias;
  float* y;
  std::int64_t ldy;
  bool softplus = false;
  /// ops::linear_conv_silu's causal conv + SiLU over output columns [conv->col0, conv->col0 +
  /// conv->C), in place (the AVX-512 BF16 kernel only, with conv->K == 4, over all M rows in order).
  const ConvSiluEpilogue* conv = nullptr;
};
/// The scalar reference of the order above (any CPU).
void dot_blocks_ref(const Args& a, std::int64_t m0, std::int64_t m1, std::int64_t b0, std::int64_t b1);
/// AVX-512 BF16: only when kernels_available().
void dot_blocks_avx512bf16(const Args& a, std::int64_t m0, std::int64_t m1, std::int64_t b0, std::int64_t b1);
/// Whether the VDPBF16PS kernel runs now (target AVX-512 and the CPU has AVX-512 BF16).
bool kernels_available();

/// ops::linear for a float weight with W.packed set (this tier): x [M, K] (ldx), bias [N] fp32 or
/// nullptr, y [M, N] (ldy); with `softplus` (only where kernels_available()), ops::linear_softplus's
/// values, made in the kernel's epilogue; with `conv` (only where kernels_available() and conv->K
/// == 4), ops::linear_conv_silu's, likewise (each thread takes whole column blocks over all M rows).
void linear(const float* x, std::int64_t ldx, std::int64_t M, const TensorView& W, const float* bias, float* y,
            std::int64_t ldy, bool softplus = false, const ConvSiluEpilogue* conv = nullptr);

}  // namespace mamba::ops::cpu::bf16dot
