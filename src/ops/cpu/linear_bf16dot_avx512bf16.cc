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
#include <cassert>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/cpu/bf16_dot.h"
#include "ops/cpu/cpu_target.h"
#include "ops/cpu/ssd_bf16.h"
#define MAMBA_SIMD_BYTES 64  // simd.h: vsoftplus and vsilu for the epilogues, as the AVX-512 target computes them
#include "ops/cpu/simd.h"

namespace mamba::ops::cpu::bf16dot {

namespace {

/// How far ahead a one-row tile prefetches each block's stream (bytes), as the quantized decode.
constexpr std::int64_t kPrefetchBytes = 2048;

/// ops::linear_conv_silu's epilogue for one 16-column block (d_conv = 4): the block's lanes inside
/// the conv columns, their taps and bias, and the window of the last 3 raw values of each lane,
/// carried from one row tile to the next (a thread takes a block's rows in order, 8 at a time).
/// Per row, conv_rows_sliding<4>'s FMAs in its order, then the same vsilu: bitwise its values.
struct ConvWindow {
  __mmask16 lanes = 0;
  vf w[4], b, win[3];
};

/// The window of block `blk` from conv_state (lanes outside the conv columns stay 0); false when
/// no lane of the block is a conv column.
bool conv_begin(const Args& a, std::int64_t blk, ConvWindow& cw) {
  const ConvSiluEpilogue& c = *a.conv;
  alignas(64) float w[4][kBlockRows] = {}, b[kBlockRows] = {}, win[3][kBlockRows] = {};
  cw.lanes = 0;
  for (int l = 0; l < kBlockRows; ++l) {
    const std::int64_t col = blk * kBlockRows + l, ch = col - c.col0;
    if (col >= a.N || ch < 0 || ch >= c.C) continue;
    cw.lanes = static_cast<__mmask16>(cw.lanes | 1u << l);
    for (int k = 0; k < 4; ++k) w[k][l] = c.wT[k * c.C + ch];
    b[l] = c.bias != nullptr ? c.bias[ch] : 0.0f;  // +0 without a bias, as conv_rows_sliding
    for (int j = 0; j < 3; ++j) win[j][l] = c.conv_state[ch * 3 + j];
  }
  for (int k = 0; k < 4; ++k) cw.w[k] = vload(w[k]);
  cw.b = vload(b);
  for (int j = 0; j < 3; ++j) cw.win[j] = vload(win[j]);
  return cw.lanes != 0;
}

/// conv_state of block `blk`'s conv lanes = the window after the last row.
void conv_end(const Args& a, std::int64_t blk, const ConvWindow& cw) {
  const ConvSiluEpilogue& c = *a.conv;
  alignas(64) float win[3][kBlockRows];
  for (int j = 0; j < 3; ++j) vstore(win[j], cw.win[j]);
  for (int l = 0; l < kBlockRows; ++l)
    if (cw.lanes >> l & 1u)
      for (int j = 0; j < 3; ++j) c.conv_state[(blk * kBlockRows + l - c.col0) * 3 + j] = win[j][l];
}

/// Rows [m0, m0 + R) times blocks blk[0..NB): R · NB accumulators, one chain each. cw: nullptr, or
/// the conv windows of the NB blocks (rows m0 .. m0 + R − 1 are the next rows of the sequence).
template <int R, int NB, bool kPrefetch>
inline void tile(const Args& a, std::int64_t m0, const std::int64_t (&blk)[NB], ConvWindow* cw) {
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
    // The NB weight vectors, then per row one broadcast feeding NB dot products: NB + 1 + R·NB
    // registers (an 8 × 3 tile fits the 32 without a spill; broadcasts per block would not).
    __m512bh w[NB];
#pragma GCC unroll 4
    for (int i = 0; i < NB; ++i) w[i] = (__m512bh)_mm512_loadu_si512(base[i] + 64 * p);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512bh xr = (__m512bh)_mm512_set1_epi32(static_cast<int>(xb[r * Kp + p]));
#pragma GCC unroll 4
      for (int i = 0; i < NB; ++i) acc[r][i] = _mm512_dpbf16_ps(acc[r][i], w[i], xr);
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
    if (cw != nullptr && cw[i].lanes != 0) {  // y = silu(b + Σₖ wₖ · window), rows in order
      ConvWindow& q = cw[i];
      for (int r = 0; r < R; ++r) {
        const vf raw = reinterpret_cast<vf>(acc[r][i]);
        vf c = q.b;
        for (int k = 0; k < 3; ++k) c = fmadd(q.w[k], q.win[k], c);
        c = fmadd(q.w[3], raw, c);
        q.win[0] = q.win[1];
        q.win[1] = q.win[2];
        q.win[2] = raw;
        acc[r][i] = _mm512_mask_blend_ps(q.lanes, acc[r][i], reinterpret_cast<__m512>(vsilu(c)));
      }
    }
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(a.y + (m0 + r) * a.ldy + n0, mask, acc[r][i]);
  }
}

/// tile<R, NB, kPrefetch> for a run-time R ∈ [1, kMaxR] over the NB = `streams` blocks j, j + h,
/// j + 2h (streams ∈ {1, 2, 3}).
constexpr int kMaxR = kDecodeRows;
template <int R, bool kPrefetch>
void tile_streams(const Args& a, std::int64_t m0, std::int64_t j, std::int64_t h, int streams, ConvWindow* cw) {
  if (streams == 3) tile<R, 3, kPrefetch>(a, m0, {j, j + h, j + 2 * h}, cw);
  else if (streams == 2) tile<R, 2, kPrefetch>(a, m0, {j, j + h}, cw);
  else tile<R, 1, kPrefetch>(a, m0, {j}, cw);
}
template <bool kPrefetch>
void tile_rows(const Args& a, std::int64_t m0, int rows, std::int64_t j, std::int64_t h, int streams,
               ConvWindow* cw = nullptr) {
  switch (rows) {
    case 1: return tile_streams<1, kPrefetch>(a, m0, j, h, streams, cw);
    case 2: return tile_streams<2, kPrefetch>(a, m0, j, h, streams, cw);
    case 3: return tile_streams<3, kPrefetch>(a, m0, j, h, streams, cw);
    case 4: return tile_streams<4, kPrefetch>(a, m0, j, h, streams, cw);
    case 5: return tile_streams<5, kPrefetch>(a, m0, j, h, streams, cw);
    case 6: return tile_streams<6, kPrefetch>(a, m0, j, h, streams, cw);
    case 7: return tile_streams<7, kPrefetch>(a, m0, j, h, streams, cw);
    default: return tile_streams<8, kPrefetch>(a, m0, j, h, streams, cw);
  }
}

}  // namespace

void dot_blocks_avx512bf16(const Args& a, std::int64_t m0, std::int64_t m1, std::int64_t b0, std::int64_t b1) {
  const std::int64_t M = m1 - m0;
  if (M <= kMaxR && a.conv == nullptr) {
    // Decode (b ≤ 8 sequences): all rows at once, so each weight block is read from memory once:
    // S = 3 blocks j, j + h, j + 2h together (three streams far apart, prefetched). Zen 5, 2 threads:
    // one row, 40 cold 768 × 3072 weights, 74–78 GB/s against 66–74 with two streams; 5–8 rows,
    // mamba-130m bf16 decode, 3 against 2 streams ahead in 11 of 11 interleaved pairs (b=8 1122
    // against 1061 tok/s, mean of 5; mamba2-130m b=8 3 of 3) once the tile's loop order let its
    // 24 accumulators, 3 weight vectors and one broadcast fit the 32 registers (before, one
    // accumulator spilled and 2 streams were kept from 5 rows on). The blocks left over (x_proj:
    // N = 80 is 5 blocks for 2 threads) go together too: one chain per output is latency-bound
    // alone. The prefetches as weight_prefetch() says (bitwise the same results either way).
    constexpr int S = kDecodeStreams;
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
  // Prefill: kPrefillBlocks = 2 adjacent blocks (L1-resident) pass 8 rows at a time (16 chains in
  // registers), the rows in order (the conv epilogue's window runs down them; it needs all M rows:
  // m0 = 0).
  assert(a.conv == nullptr || (m0 == 0 && m1 == a.M));
  for (std::int64_t b = b0; b < b1; b += kPrefillBlocks) {
    const int streams = static_cast<int>(std::min<std::int64_t>(kPrefillBlocks, b1 - b));
    ConvWindow cw[kPrefillBlocks];
    bool conv = false;
    if (a.conv != nullptr)
      for (int i = 0; i < streams; ++i) conv = conv_begin(a, b + i, cw[i]) || conv;
    for (std::int64_t m = m0; m < m1; m += kMaxR)
      tile_rows<false>(a, m, static_cast<int>(std::min<std::int64_t>(kMaxR, m1 - m)), b, 1, streams,
                       conv ? cw : nullptr);
    if (conv)
      for (int i = 0; i < streams; ++i) conv_end(a, b + i, cw[i]);
  }
}

void round_rows_avx512bf16(const float* x, std::int64_t ldx, std::int64_t M, std::int64_t K, std::uint32_t* xb) {
  // VCVTNE2PS2BF16 rounds as to_bf16 does (nearest even, denormals to ±0, NaN quieted by 0x40 in its
  // top half; tests/ops/ssd_bf16_kernels_test.cc checks it bitwise): 3 instructions per 32 values
  // where the integer emulation took ~12 per 16 (4% of a mamba-130m bf16 prefill).
  pack_row_pairs_avx512bf16(x, ldx, M, K, xb, pairs(K));
}

}  // namespace mamba::ops::cpu::bf16dot
