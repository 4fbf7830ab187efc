// ops::linear kernels for AVX2 + FMA + F16C (see linear_kernels.h; canonical order in
// linear_canonical.h).
//
// Each output y[m, n] is a 16-lane dot product held in two ymm accumulators (lanes 0–7 and 8–15 of
// every 16-element step of k), reduced by the fixed tree lo+hi → 128-bit halves → 64 → 32 bits,
// then the K % 16 tail by scalar FMAs in order, then + bias: the canonical order, whatever the tile.
//
// Tiles: a micro-kernel computes MR input rows × NR weight rows (2 × 3 → 12 accumulators, plus 2 x
// and 1 w register), loading each x and w vector once per 16-element step.
//  - Few rows (decode, M ≤ kDirectMaxRows): the weights are read straight from memory in their
//    dtype (bf16 widened by two unpacks with zero against x rows permuted to match (stream_x,
//    batch_x), f16 by vcvtph2ps) one NR-row group at a time, and
//    every input row runs over that group while it is in L1: each weight byte leaves DRAM once.
//  - Many rows (prefill): blocks of weight rows are converted to fp32 once into the thread's scratch
//    (L2-sized), and the micro-kernel sweeps blocks of MB input rows over every NR-row group.
//    The first pass over each weight-row group of the direct path prefetches the next group.

// GCC 12 reports its own _mm*_undefined_*() helpers (inside the intrinsics headers) as "(maybe)
// uninitialized" once they are inlined here: a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "ops/cpu/cpu_target.h"
#include "ops/cpu/linear_kernels.h"

namespace mamba::ops::cpu {
namespace {

using WT = LinearWeight;

constexpr std::int64_t kRowBlock = 48;       // input rows per block in the many-rows path

template <WT T> inline __m256 load8(const void* w, std::int64_t i) {
  if constexpr (T == WT::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(w) + i);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const std::uint16_t*>(w) + i));
    if constexpr (T == WT::kBF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    else return _mm256_cvtph_ps(h);
  }
}

template <WT T> inline float load1(const void* w, std::int64_t i) {
  if constexpr (T == WT::kF32) {
    return static_cast<const float*>(w)[i];
  } else {
    const std::uint16_t h = static_cast<const std::uint16_t*>(w)[i];
    if constexpr (T == WT::kBF16) {
      const std::uint32_t u = std::uint32_t(h) << 16;
      float f;
      __builtin_memcpy(&f, &u, sizeof f);
      return f;
    } else {
      return _cvtsh_ss(h);
    }
  }
}

/// The canonical lane tree: (l[i] + l[i+8]) → (+4) → (+2) → (+1).
inline float tree16(__m256 lo, __m256 hi) {
  const __m256 s = _mm256_add_ps(lo, hi);
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  q = _mm_add_ss(q, _mm_movehdup_ps(q));
  return _mm_cvtss_f32(q);
}

/// xv[m] = the 8 floats at x + m·ld, m < MR, each kept in a register (one load per x vector: GCC
/// would otherwise fold the load into each FMA that uses it).
template <int MR> inline void load_rows(const float* x, std::int64_t ld, __m256 (&xv)[MR]) {
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
    xv[m] = _mm256_loadu_ps(x + m * ld);
    __asm__("" : "+x"(xv[m]));
  }
}

/// y[m, n·rs] for m < MR, n < NR: x → row m0, w → row n0 (rows of K elements; the NR rows are rs
/// rows apart), y and bias → column n0. kPf: also prefetch, one k-step at a time, the rows that
/// come next (rs = 1: the NR rows after the group; rs > 1: the row after each of the NR), so that
/// DRAM streams them while this group computes.
///
/// K-slices (the many-rows sweep of long rows, linear_tile.inc sweep_sliced): the steps [k0, k1)
/// only, the accumulators starting from zero (k0 = 0) or from acc_buf (MR·NR outputs, row-major,
/// 16 floats each) and stored back there unless k1 = K, whose slice also holds the K % 16 tail and
/// finishes the outputs. A chain split at 16-element steps and carried through memory is the same
/// chain: bitwise the one-pass result. One pass: k0 = 0, k1 = K, acc_buf unused.
template <WT T, int MR, int NR, bool kPf>
void micro(const float* x, std::int64_t ldx, const void* w, std::int64_t K, std::int64_t rs, const float* bias, float* y,
           std::int64_t ldy, std::int64_t k0 = 0, std::int64_t k1 = -1, float* acc_buf = nullptr) {
  if (k1 < 0) k1 = K;
  __m256 acc[MR][NR][2];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 8
    for (int n = 0; n < NR; ++n)
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h)
        acc[m][n][h] = k0 == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(acc_buf + (m * NR + n) * 16 + 8 * h);
  const std::int64_t k16 = K - K % 16;
  const bool last = k1 == K;
  for (std::int64_t k = k0, kend = last ? k16 : k1; k < kend; k += 16) {
    if constexpr (kPf) {
      constexpr std::int64_t esz = T == WT::kF32 ? 4 : 2;
#pragma GCC unroll 8
      for (int n = 0; n < NR; ++n)
        _mm_prefetch(static_cast<const char*>(w) + ((n * rs + (rs == 1 ? NR : 1)) * K + k) * esz, _MM_HINT_T0);
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256 xv[MR];
      load_rows(x + k + 8 * h, ldx, xv);
#pragma GCC unroll 8
      for (int n = 0; n < NR; ++n) {
        __m256 wv = load8<T>(w, n * rs * K + k + 8 * h);
        // Keep wv in a register: GCC would otherwise fold the load into each of the MR FMAs,
        // loading it MR times and making the loop load-bound.
        __asm__("" : "+x"(wv));
#pragma GCC unroll 8
        for (int m = 0; m < MR; ++m) acc[m][n][h] = _mm256_fmadd_ps(xv[m], wv, acc[m][n][h]);
      }
    }
  }
  if (!last) {  // a K-slice before the last: carry the chains
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m)
#pragma GCC unroll 8
      for (int n = 0; n < NR; ++n)
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) _mm256_storeu_ps(acc_buf + (m * NR + n) * 16 + 8 * h, acc[m][n][h]);
    return;
  }
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 8
    for (int n = 0; n < NR; ++n) {
      float r = tree16(acc[m][n][0], acc[m][n][1]);
      for (std::int64_t k = k16; k < K; ++k) r = __builtin_fmaf(x[m * ldx + k], load1<T>(w, n * rs * K + k), r);
      y[m * ldy + n * rs] = bias != nullptr ? r + bias[n * rs] : r;
    }
}

/// micro<kBF16, MR, NR, kPf> over rows of x permuted as stream_x lays them out (xs: row m at
/// xs + m·K), adjacent weight rows (rs = 1), the whole of K: 16 bf16 weights are widened by two
/// unpacks with zero (vpunpcklwd / vpunpckhwd: 1 operation per 8 weights instead of vpmovzxwd +
/// vpslld), so the accumulators hold k-lanes [0..3, 8..11] and [4..7, 12..15]; two 128-bit permutes
/// restore the canonical lo / hi halves before the tree (the same FMAs in the same order), and the
/// K % 16 tail reads the unpermuted x. Zen 4 with the avx2 target forced, 2 threads, M = 8, GFLOP/s
/// vpmovzxwd + vpslld → unpacks: in_proj 106–114 → 118–119, out_proj 119–135 → 135–138; b=8
/// decode of mamba-130m bf16, 3 interleaved rounds: 330 / 325 / 326 → 326 / 350 / 360 tok/s (on
/// Intel cores vpslld also takes an FMA port; the unpacks do not).
template <int MR, int NR, bool kPf>
void micro_px(const float* x, std::int64_t ldx, const float* xs, const void* w, std::int64_t K, const float* bias,
              float* y, std::int64_t ldy) {
  const auto* wb = static_cast<const std::uint16_t*>(w);
  const __m256i zero = _mm256_setzero_si256();
  __m256 acc[MR][NR][2];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 8
    for (int n = 0; n < NR; ++n) acc[m][n][0] = acc[m][n][1] = _mm256_setzero_ps();
  const std::int64_t k16 = K - K % 16;
  for (std::int64_t k = 0; k < k16; k += 16) {
    if constexpr (kPf) {
#pragma GCC unroll 8
      for (int n = 0; n < NR; ++n) _mm_prefetch(reinterpret_cast<const char*>(wb + (n + NR) * K + k), _MM_HINT_T0);
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256 xv[MR];
      load_rows(xs + k + 8 * h, K, xv);
#pragma GCC unroll 8
      for (int n = 0; n < NR; ++n) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + n * K + k));
        __m256 wv = _mm256_castsi256_ps(h == 0 ? _mm256_unpacklo_epi16(zero, raw) : _mm256_unpackhi_epi16(zero, raw));
        __asm__("" : "+x"(wv));  // one widening per weight vector, not one per row
#pragma GCC unroll 8
        for (int m = 0; m < MR; ++m) acc[m][n][h] = _mm256_fmadd_ps(xv[m], wv, acc[m][n][h]);
      }
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 8
    for (int n = 0; n < NR; ++n) {
      const __m256 lo = _mm256_permute2f128_ps(acc[m][n][0], acc[m][n][1], 0x20);
      const __m256 hi = _mm256_permute2f128_ps(acc[m][n][0], acc[m][n][1], 0x31);
      float r = tree16(lo, hi);
      for (std::int64_t k = k16; k < K; ++k) r = __builtin_fmaf(x[m * ldx + k], load1<WT::kBF16>(w, n * K + k), r);
      y[m * ldy + n] = bias != nullptr ? r + bias[n] : r;
    }
}

/// micro<T, mr, nr> for run-time mr ∈ [1, 2], nr ∈ [1, 4]; micro_px for bf16 rows that batch_x
/// permuted (xs ≠ nullptr, rs = 1).
template <WT T>
void micro_any(int mr, int nr, bool pf, const float* x, std::int64_t ldx, const void* w, std::int64_t K,
               std::int64_t rs, const float* bias, float* y, std::int64_t ldy, const float* xs = nullptr) {
  if constexpr (T == WT::kBF16) {
    if (xs != nullptr) {
#define MAMBA_MICRO_PX(MR, NR)                                                      \
  if (mr == MR && nr == NR)                                                         \
    return pf ? micro_px<MR, NR, true>(x, ldx, xs, w, K, bias, y, ldy)              \
              : micro_px<MR, NR, false>(x, ldx, xs, w, K, bias, y, ldy);
      MAMBA_MICRO_PX(2, 3) MAMBA_MICRO_PX(1, 3) MAMBA_MICRO_PX(2, 2) MAMBA_MICRO_PX(1, 2) MAMBA_MICRO_PX(2, 1)
      MAMBA_MICRO_PX(1, 1) MAMBA_MICRO_PX(1, 4)
#undef MAMBA_MICRO_PX
    }
  }
#define MAMBA_MICRO(MR, NR)                                                         \
  if (mr == MR && nr == NR)                                                         \
    return pf ? micro<T, MR, NR, true>(x, ldx, w, K, rs, bias, y, ldy)              \
              : micro<T, MR, NR, false>(x, ldx, w, K, rs, bias, y, ldy);
  MAMBA_MICRO(2, 3) MAMBA_MICRO(1, 4) MAMBA_MICRO(1, 3) MAMBA_MICRO(2, 2) MAMBA_MICRO(1, 2) MAMBA_MICRO(2, 1)
  MAMBA_MICRO(1, 1)
#undef MAMBA_MICRO
}

/// Widens rows of bf16/f16 weights to fp32 (exact).
template <WT T> void widen(const void* w, std::int64_t n, float* out) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, load8<T>(w, i));
  for (; i < n; ++i) out[i] = load1<T>(w, i);
}

// Tile shapes of the shared driver (linear_tile.inc): M = 1, K ≥ 256 → 1 × 3 weight rows a third
// of the thread's rows apart (three sequential streams: on Zen 3 one stream per core reads ~86% of
// the bandwidth, three or more ~95–100%, while adjacent rows interleaved reach ~75%; one row alone
// is also bound by its two 4-cycle FMA chains), 1 × 1 for the < 3 leftover rows; 1 × 4 for short rows;
// else 2 × 3.
constexpr int kNrOneRow = 4, kNrStream = 1, kStreams = 3, kNr = 3, kNrWide = kNr, kMr = 2,
              kNrBatch = kNr, kMrBatch = kMr;  // no batch tile: 16 ymm registers
constexpr bool kWideDirect = false;  // linear_reads_direct: M ≤ kDirectMaxRows
constexpr std::int64_t kStreamMinK = 256, kWideMinK = 0;  // kNrWide = kNr: one tile width
/// Many rows, K ≥ kSliceMinK: K in slices of kKSlice (micro over [k0, k1)), as on AVX-512: a 2 × 3 tile's
/// rows over all of K spill L1 for long rows (avx2 target forced on Zen 5, M = 512, bf16 weights,
/// 2 threads, GFLOP/s unsliced → sliced: 1536 × 768 170 → 164, so not below 2048; 2560 × 2560
/// 183–188 → 205; 4096 × 4096 135–136 → 189–197; 5120 × 2560 125–128 → 180–183).
constexpr std::int64_t kKSlice = 768, kSliceMinK = 2048;

/// micro<kF32, mr, nr, false> over one K-slice [k0, k1) (sweep_sliced), for run-time mr ∈ [1, 2], nr ∈ [1, 3].
void micro_slice_any(int mr, int nr, const float* x, std::int64_t ldx, const float* w, std::int64_t K, std::int64_t k0,
                     std::int64_t k1, float* acc_buf, const float* bias, float* y, std::int64_t ldy) {
#define MAMBA_SLICE(MR, NR) \
  if (mr == MR && nr == NR) return micro<WT::kF32, MR, NR, false>(x, ldx, w, K, 1, bias, y, ldy, k0, k1, acc_buf);
  MAMBA_SLICE(2, 3) MAMBA_SLICE(2, 2) MAMBA_SLICE(2, 1) MAMBA_SLICE(1, 3) MAMBA_SLICE(1, 2) MAMBA_SLICE(1, 1)
#undef MAMBA_SLICE
}

/// The x row as micro_stream<T> reads it. BF16: every whole 16-element block permuted to
/// [x0..3, x8..11, x4..7, x12..15] (in `buf`, K floats), the lane order in which vpunpcklwd /
/// vpunpckhwd widen 16 bf16 weights; other dtypes read x as it is.
template <WT T> const float* stream_x(const float* x, std::int64_t K, float* buf) {
  if constexpr (T != WT::kBF16) {
    return x;
  } else {
    for (std::int64_t k = 0; k + 16 <= K; k += 16) {
      _mm_storeu_ps(buf + k, _mm_loadu_ps(x + k));
      _mm_storeu_ps(buf + k + 4, _mm_loadu_ps(x + k + 8));
      _mm_storeu_ps(buf + k + 8, _mm_loadu_ps(x + k + 4));
      _mm_storeu_ps(buf + k + 12, _mm_loadu_ps(x + k + 12));
    }
    return buf;
  }
}

/// The direct path's rows (M > 1) for micro_px: BF16 rows permuted by stream_x into `buf` (row m at
/// buf + m·K; M ≤ kDirectMaxRows ≤ linear_block_rows(K), so the scratch holds them), else nullptr.
template <WT T> const float* batch_x(const float* x, std::int64_t ldx, std::int64_t M, std::int64_t K, float* buf) {
  if constexpr (T != WT::kBF16) {
    return nullptr;
  } else {
    for (std::int64_t m = 0; m < M; ++m) stream_x<T>(x + m * ldx, K, buf + m * K);
    return buf;
  }
}

/// One input row × kStreams weight rows rs rows apart, with prefetch of the row after each when
/// kPf: micro<T, 1, kStreams, kPf>, except for BF16, where 16 weights are widened by two unpacks
/// with zero (1 op per 8 instead of vpmovzxwd + vpslld) against the permuted x of stream_x. The
/// accumulator lanes then hold k-lanes [0..3, 8..11] and [4..7, 12..15]; two 128-bit permutes
/// restore the canonical lo/hi accumulators (same FMAs, same order), then the canonical tree and
/// scalar tail on the unpermuted x.
template <WT T, bool kPf>
void micro_stream(const float* xs, const void* w, std::int64_t K, std::int64_t rs, const float* x, const float* bias,
                  float* y) {
  if constexpr (T != WT::kBF16) {
    micro<T, 1, kStreams, kPf>(x, 0, w, K, rs, bias, y, 0);
  } else {
    const auto* wb = static_cast<const std::uint16_t*>(w);
    const __m256i zero = _mm256_setzero_si256();
    __m256 acc[kStreams][2];
#pragma GCC unroll 8
    for (int n = 0; n < kStreams; ++n) acc[n][0] = acc[n][1] = _mm256_setzero_ps();
    const std::int64_t k16 = K - K % 16;
    for (std::int64_t k = 0; k < k16; k += 16) {
      if constexpr (kPf) {
#pragma GCC unroll 8
        for (int n = 0; n < kStreams; ++n) _mm_prefetch(reinterpret_cast<const char*>(wb + (n * rs + 1) * K + k), _MM_HINT_T0);
      }
      const __m256 x0 = _mm256_loadu_ps(xs + k), x1 = _mm256_loadu_ps(xs + k + 8);
#pragma GCC unroll 8
      for (int n = 0; n < kStreams; ++n) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + n * rs * K + k));
        acc[n][0] = _mm256_fmadd_ps(x0, _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, raw)), acc[n][0]);
        acc[n][1] = _mm256_fmadd_ps(x1, _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, raw)), acc[n][1]);
      }
    }
#pragma GCC unroll 8
    for (int n = 0; n < kStreams; ++n) {
      const __m256 lo = _mm256_permute2f128_ps(acc[n][0], acc[n][1], 0x20);
      const __m256 hi = _mm256_permute2f128_ps(acc[n][0], acc[n][1], 0x31);
      float r = tree16(lo, hi);
      for (std::int64_t k = k16; k < K; ++k) r = __builtin_fmaf(x[k], load1<T>(w, n * rs * K + k), r);
      y[n * rs] = bias != nullptr ? r + bias[n * rs] : r;
    }
  }
}

#include "ops/cpu/linear_tile.inc"  // sweep<T>() and tile<T>()

}  // namespace

void linear_tile_avx2(const LinearProblem& p, std::int64_t m0, std::int64_t m1, std::int64_t n0, std::int64_t n1,
                      float* scratch) {
  switch (p.wtype) {
    case WT::kF32: return tile<WT::kF32>(p, m0, m1, n0, n1, scratch);
    case WT::kBF16: return tile<WT::kBF16>(p, m0, m1, n0, n1, scratch);
    case WT::kF16: return tile<WT::kF16>(p, m0, m1, n0, n1, scratch);
  }
}

}  // namespace mamba::ops::cpu
