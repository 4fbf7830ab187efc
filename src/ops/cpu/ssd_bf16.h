// The bf16 tier's SSD matmuls (ops::SsdArgs::bf16_products; README §Precision): Mamba-2's chunked
// SSD (ssd.cc) in the bf16 tier takes its three per-head GEMMs — Y_off = C·hᵀ, Y_diag = W·X and
// the state's Bᵀ·(X∘w) — as AVX-512 BF16 dot products (VDPBF16PS: 32 products per instruction, twice
// the fp32 FMA rate): both operands rounded to bf16, products and sums in fp32, C accumulated in
// fp32. The state itself stays fp32 (only its copy read by Y_off is rounded), and so do C·Bᵀ (shared
// by a group's heads), the decays and Δ. Rounding: VCVTNE2PS2BF16 (nearest even, denormals to ±0).
//
// Operand layouts (uint32 = two bf16, the lower k in the low half; the k = K pad of an odd K is +0):
//   row pairs  A [M][lda]: A(i, 2p), A(i, 2p+1) at A[i·lda + p]        (bf16dot::round_rows' layout)
//   col pairs  B [Kp][ldb]: B(2p, j), B(2p+1, j) at B[p·ldb + j]
// Only where bf16dot::kernels_available() (the tier's own condition); no scalar version: the fp32
// SSD is the reference these are tested against (tests/ops/ssd_bf16_kernels_test.cc: the kernels
// against their definitions; tests/ops/ssd_test.cc SsdBf16Products: the op against the fp32 SSD).
#pragma once

#include <cstdint>

#include "ops/cpu/kernels.h"

namespace mamba::ops::cpu::bf16dot {

/// C[M, n] (ldc, fp32) = ((o.accumulate ? o.beta · C : 0) + A · B) · o.row_scale (per row, when set):
/// A row pairs [M, Kp] (lda uint32), B col pairs [Kp, n] (ldb uint32); n a multiple of 16. Each C
/// element is one VDPBF16PS chain over p = 0 .. Kp − 1, whatever M and n (bitwise for any tiling).
void gemm_pairs_avx512bf16(std::int64_t M, std::int64_t n, std::int64_t Kp, const std::uint32_t* A, std::int64_t lda,
                           const std::uint32_t* B, std::int64_t ldb, float* C, std::int64_t ldc, const GemmOut& o);

/// X [K, n] (ldx, fp32), each row k scaled by row_scale[k] when set → col pairs out [⌈K/2⌉, n]
/// (ldo uint32): out[p·ldo + j] = (bf16(X(2p, j)·s), bf16(X(2p+1, j)·s')); n a multiple of 16.
void pack_col_pairs_avx512bf16(const float* X, std::int64_t ldx, std::int64_t K, std::int64_t n,
                               const float* row_scale, std::uint32_t* out, std::int64_t ldo);

/// X [M, K] (ldx, fp32) → row pairs out [M, ⌈K/2⌉] (ldo uint32), rounded as the two functions above.
void pack_row_pairs_avx512bf16(const float* X, std::int64_t ldx, std::int64_t M, std::int64_t K, std::uint32_t* out,
                               std::int64_t ldo);

}  // namespace mamba::ops::cpu::bf16dot
