// AVX-512 BF16 kernels of the bf16 tier's SSD matmuls (ssd_bf16.h): a 6-row × 4-vector register
// tile of VDPBF16PS chains (24 accumulators, each broadcast A pair feeding 4 dot products), and the
// packing of fp32 operands into bf16 pairs.

// GCC 12 reports its own _mm*_undefined_*() helpers (inside the intrinsics headers) as "(maybe)
// uninitialized" once they are inlined here: a known false positive (as in linear_avx512.cc).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "ops/cpu/ssd_bf16.h"

namespace mamba::ops::cpu::bf16dot {

namespace {

/// Rows [0, MR) × vectors [0, NV) of C: MR·NV chains over all Kp pairs.
template <int MR, int NV>
void tile(std::int64_t Kp, const std::uint32_t* A, std::int64_t lda, const std::uint32_t* B, std::int64_t ldb, float* C,
          std::int64_t ldc, const GemmOut& o) {
  __m512 c[MR][NV];
  const __m512 beta = _mm512_set1_ps(o.beta);
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      c[i][v] = o.accumulate ? _mm512_mul_ps(_mm512_loadu_ps(C + i * ldc + 16 * v), beta) : _mm512_setzero_ps();
  for (std::int64_t p = 0; p < Kp; ++p) {
    __m512bh b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) b[v] = (__m512bh)_mm512_loadu_si512(B + p * ldb + 16 * v);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(A[i * lda + p]));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) c[i][v] = _mm512_dpbf16_ps(c[i][v], a, b[v]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) {
    const __m512 r = _mm512_set1_ps(o.row_scale != nullptr ? o.row_scale[i] : 1.0f);
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      _mm512_storeu_ps(C + i * ldc + 16 * v, o.row_scale != nullptr ? _mm512_mul_ps(c[i][v], r) : c[i][v]);
  }
}

template <int NV>
void tile_rows(int rows, std::int64_t Kp, const std::uint32_t* A, std::int64_t lda, const std::uint32_t* B,
               std::int64_t ldb, float* C, std::int64_t ldc, const GemmOut& o) {
  switch (rows) {
    case 1: return tile<1, NV>(Kp, A, lda, B, ldb, C, ldc, o);
    case 2: return tile<2, NV>(Kp, A, lda, B, ldb, C, ldc, o);
    case 3: return tile<3, NV>(Kp, A, lda, B, ldb, C, ldc, o);
    case 4: return tile<4, NV>(Kp, A, lda, B, ldb, C, ldc, o);
    case 5: return tile<5, NV>(Kp, A, lda, B, ldb, C, ldc, o);
    default: return tile<6, NV>(Kp, A, lda, B, ldb, C, ldc, o);
  }
}

/// 32 fp32 → 32 bf16 in the order lo[0], hi[0], lo[1], hi[1], … (the pairs (lo[l], hi[l])).
inline __m512i interleave_bf16(__m512 lo, __m512 hi) {
  // cvtne2ps puts bf16(lo) in words 0–15 and bf16(hi) in words 16–31; word 2l ← l, 2l+1 ← 16 + l.
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5,
                                       20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

}  // namespace

void gemm_pairs_avx512bf16(std::int64_t M, std::int64_t n, std::int64_t Kp, const std::uint32_t* A, std::int64_t lda,
                           const std::uint32_t* B, std::int64_t ldb, float* C, std::int64_t ldc, const GemmOut& o) {
  for (std::int64_t j = 0; j < n; j += 64) {
    const int nv = static_cast<int>(std::min<std::int64_t>(4, (n - j) / 16));
    for (std::int64_t i = 0; i < M; i += 6) {
      const int rows = static_cast<int>(std::min<std::int64_t>(6, M - i));
      GemmOut oi = o;
      if (oi.row_scale != nullptr) oi.row_scale += i;
      const std::uint32_t* Ai = A + i * lda;
      float* Ci = C + i * ldc + j;
      switch (nv) {
        case 1: tile_rows<1>(rows, Kp, Ai, lda, B + j, ldb, Ci, ldc, oi); break;
        case 2: tile_rows<2>(rows, Kp, Ai, lda, B + j, ldb, Ci, ldc, oi); break;
        case 3: tile_rows<3>(rows, Kp, Ai, lda, B + j, ldb, Ci, ldc, oi); break;
        default: tile_rows<4>(rows, Kp, Ai, lda, B + j, ldb, Ci, ldc, oi); break;
      }
    }
  }
}

void pack_col_pairs_avx512bf16(const float* X, std::int64_t ldx, std::int64_t K, std::int64_t n,
                               const float* row_scale, std::uint32_t* out, std::int64_t ldo) {
  for (std::int64_t p = 0; 2 * p < K; ++p) {
    const float* x0 = X + 2 * p * ldx;
    const float* x1 = 2 * p + 1 < K ? x0 + ldx : nullptr;  // the odd K's pad row: +0
    const __m512 s0 = _mm512_set1_ps(row_scale != nullptr ? row_scale[2 * p] : 1.0f);
    const __m512 s1 = _mm512_set1_ps(row_scale != nullptr && x1 != nullptr ? row_scale[2 * p + 1] : 1.0f);
    for (std::int64_t j = 0; j < n; j += 16) {
      const __m512 lo = _mm512_mul_ps(_mm512_loadu_ps(x0 + j), s0);
      const __m512 hi = x1 != nullptr ? _mm512_mul_ps(_mm512_loadu_ps(x1 + j), s1) : _mm512_setzero_ps();
      _mm512_storeu_si512(out + p * ldo + j, interleave_bf16(lo, hi));
    }
  }
}

void pack_row_pairs_avx512bf16(const float* X, std::int64_t ldx, std::int64_t M, std::int64_t K, std::uint32_t* out,
                               std::int64_t ldo) {
  for (std::int64_t i = 0; i < M; ++i) {
    const float* x = X + i * ldx;
    std::uint32_t* o = out + i * ldo;
    // 32 consecutive k → 16 pairs: bf16(x[k..k+15]) then bf16(x[k+16..k+31]) is already pair order.
    for (std::int64_t k = 0; k < K; k += 32) {
      const std::int64_t left = K - k;
      const __mmask16 m0 = left >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << left) - 1);
      const __mmask16 m1 = left >= 32 ? __mmask16(0xffff) : left <= 16 ? __mmask16(0) : static_cast<__mmask16>((1u << (left - 16)) - 1);
      const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m1, x + k + 16), _mm512_maskz_loadu_ps(m0, x + k));
      const std::int64_t pairs_here = std::min<std::int64_t>(16, (left + 1) / 2);
      _mm512_mask_storeu_epi32(o + k / 2, static_cast<__mmask16>((1u << pairs_here) - 1), (__m512i)v);
    }
  }
}

}  // namespace mamba::ops::cpu::bf16dot
