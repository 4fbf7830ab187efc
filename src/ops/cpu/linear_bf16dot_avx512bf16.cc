// AVX-512 BF16 kernel of the bf16 precision tier (bf16_dot.h): lane n of an fp32 accumulator is
// output row n of a 16-row weight block; one VDPBF16PS per activation pair (broadcast) and weight
// vector advances 16 rows' sums by the tier's two FMAs. Each output is one accumulator chain in
// pair order, so tiles of any shape give the reference's bits.

// GCC 12 reports its own _mm*_undefined_*() helpers (inside the intrinsics headers) as "(maybe)
// uninitialized" once they are inlined here: a known false positive (as in linear_avx512.cc).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/cpu/bf16_dot.h"
#include "ops/cpu/cpu_target.h"
#include "ops/cpu/ssd_bf16.h"
#define MAMBA_SIMD_BYTES 64  // simd.h: vsoftplus for the softplus epilogue, as the AVX-512 target computes it
#include "ops/cpu/simd.h"

namespace mamba::ops::cpu::bf16dot {

namespace {

/// How far ahead a one-row tile prefetches each block's stream (bytes), as the quantized decode.
constexpr std::int64_t kPrefetchBytes = 2048;

/// Rows [m0, m0 + R) times blocks blk[0..NB): R · NB accumulators, one chain each.
template <int R, int NB, bool kPrefetch>
inline void tile(const Args& a, std::int64_t m0, const std::int64_t (&blk)[NB]) {
  const std::int64_t Kp = pairs(a.K);
  const std::uint8_t* base[NB];
  for (int i = 0; i < NB; ++i) base[i] = a.wp + blk[i] * Kp * 64;
  __m512 acc[R][NB];
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < NB; ++i) acc[r][i] = _mm512_setzero_ps();
  const std::uint32_t* xb = a.xb + m0 * Kp;
  for (std::int64_t p = 0; p < Kp; ++p) {
    if constexpr (kPrefetch)
      for (int i = 0; i < NB; ++i) _mm_prefetch(reinterpret_cast<const char*>(base[i] + 64 * p + kPrefetchBytes), _MM_HINT_T0);
#pragma GCC unroll 4
    for (int i = 0; i < NB; ++i) {
      const __m512bh w = (__m512bh)_mm512_loadu_si512(base[i] + 64 * p);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        acc[r][i] = _mm512_dpbf16_ps(acc[r][i], w, (__m512bh)_mm512_set1_epi32(static_cast<int>(xb[r * Kp + p])));
    }
  }
  for (int i = 0; i < NB; ++i) {
    const std::int64_t n0 = blk[i] * kBlockRows, valid = std::min<std::int64_t>(kBlockRows, a.N - n0);
    const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
    if (a.bias != nullptr) {  // y = r + bias (the bias added here, not in a pass of its own over y)
      const __m512 bv = _mm512_maskz_loadu_ps(mask, a.bias + n0);
      for (int r = 0; r < R; ++r) acc[r][i] = _mm512_add_ps(acc[r][i], bv);
    }
    if (a.softplus)  // clamp(softplus(·), 0, +inf) as the AVX-512 softplus_clamp_row computes it
      for (int r = 0; r < R; ++r)
        acc[r][i] = reinterpret_cast<__m512>(
            vsoftplus_clamp(reinterpret_cast<vf>(acc[r][i]), vf{}, vset1(std::numeric_limits<float>::infinity())));
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(a.y + (m0 + r) * a.ldy + n0, mask, acc[r][i]);
  }
}

/// tile<R, NB, kPrefetch> for a run-time R ∈ [1, kMaxR] over the NB = `streams` blocks j, j + h,
/// j + 2h (streams ∈ {1, 2, 3}).
constexpr int kMaxR = 8;
template <int R, bool kPrefetch>
void tile_streams(const Args& a, std::int64_t m0, std::int64_t j, std::int64_t h, int streams) {
  if (streams == 3) tile<R, 3, kPrefetch>(a, m0, {j, j + h, j + 2 * h});
  else if (streams == 2) tile<R, 2, kPrefetch>(a, m0, {j, j + h});
  else tile<R, 1, kPrefetch>(a, m0, {j});
}
template <bool kPrefetch>
void tile_rows(const Args& a, std::int64_t m0, int rows, std::int64_t j, std::int64_t h, int streams) {
  switch (rows) {
    case 1: return tile_streams<1, kPrefetch>(a, m0, j, h, streams);
    case 2: return tile_streams<2, kPrefetch>(a, m0, j, h, streams);
    case 3: return tile_streams<3, kPrefetch>(a, m0, j, h, streams);
    case 4: return tile_streams<4, kPrefetch>(a, m0, j, h, streams);
    case 5: return tile_streams<5, kPrefetch>(a, m0, j, h, streams);
    case 6: return tile_streams<6, kPrefetch>(a, m0, j, h, streams);
    case 7: return tile_streams<7, kPrefetch>(a, m0, j, h, streams);
    default: return tile_streams<8, kPrefetch>(a, m0, j, h, streams);
  }
}

}  // namespace

void dot_blocks_avx512bf16(const Args& a, std::int64_t m0, std::int64_t m1, std::int64_t b0, std::int64_t b1) {
  const std::int64_t M = m1 - m0;
  if (M <= kMaxR) {
    // Decode (b ≤ 8 sequences): all rows at once, so each weight block is read from memory once:
    // S blocks j, j + h, .. together (S streams far apart, prefetched). S = 3 up to 4 rows (Zen 5,
    // 2 threads, 40 cold 768 × 3072 weights: b=1 74–78 GB/s against 66–74 with two streams); 2 from
    // 5 rows on, where 3 · R accumulators no longer fit the registers (a spilled accumulator made
    // the 8-row 3-stream tile 2× slower than the 2-stream one). The blocks left over (x_proj: N = 80
    // is 5 blocks for 2 threads) go together too: one chain per output is latency-bound alone.
    // The prefetches as weight_prefetch() says (bitwise the same results either way).
    const int S = M <= 4 ? 3 : 2;
    const std::int64_t h = (b1 - b0) / S;
    auto run = [&](auto pf) {
      constexpr bool kPf = decltype(pf)::value;
      for (std::int64_t j = b0; j < b0 + h; ++j) tile_rows<kPf>(a, m0, static_cast<int>(M), j, h, S);
      for (std::int64_t j = b0 + S * h; j < b1; j += S)
        tile_rows<kPf>(a, m0, static_cast<int>(M), j, 1, static_cast<int>(std::min<std::int64_t>(S, b1 - j)));
    };
    if (weight_prefetch()) run(std::true_type{});
    else run(std::false_type{});
    return;
  }
  // Prefill: two adjacent blocks (L1-resident) pass 8 rows at a time (16 chains in registers).
  for (std::int64_t b = b0; b < b1; b += 2) {
    const int streams = b + 1 < b1 ? 2 : 1;
    for (std::int64_t m = m0; m < m1; m += kMaxR)
      tile_rows<false>(a, m, static_cast<int>(std::min<std::int64_t>(kMaxR, m1 - m)), b, 1, streams);
  }
}

void round_rows_avx512bf16(const float* x, std::int64_t ldx, std::int64_t M, std::int64_t K, std::uint32_t* xb) {
  // VCVTNE2PS2BF16 rounds as to_bf16 does (nearest even, denormals to ±0, NaN quieted by 0x40 in its
  // top half; tests/ops/ssd_bf16_kernels_test.cc checks it bitwise): 3 instructions per 32 values
  // where the integer emulation took ~12 per 16 (4% of a mamba-130m bf16 prefill).
  pack_row_pairs_avx512bf16(x, ldx, M, K, xb, pairs(K));
}

}  // namespace mamba::ops::cpu::bf16dot
