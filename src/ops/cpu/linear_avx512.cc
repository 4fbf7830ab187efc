// ops::linear kernels for AVX-512 F/BW/VL/DQ (see linear_kernels.h; canonical order in
// linear_canonical.h). The same structure as linear_avx2.cc, with one zmm per output.
//
// Each output y[m, n] is a 16-lane dot product held in one zmm accumulator (lane i takes the k with
// k % 16 = i), reduced by the fixed tree 256-bit halves → 128 → 64 → 32 bits, then the K % 16 tail
// by scalar FMAs in order, then + bias: the canonical order, whatever the tile.
//
// Tiles: a micro-kernel computes MR input rows × NR weight rows (4 × 4 → 16 accumulators; for a
// single row 1 × 3 rows far apart, or 1 × 16 short rows; for 5–64 rows read directly, 8 of them at
// a time × 3 where avx512_batch_tile() says so), loading each x and w vector once per 16-element step.
//  - Few rows (decode batches, short prompts: linear_reads_direct): the weights are read straight
//    from memory in their dtype (bf16 widened by vpmovzxwd + vpslld, f16 by vcvtph2ps) one NR-row group at a time, and
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

template <WT T> inline __m512 load16(const void* w, std::int64_t i) {
  if constexpr (T == WT::kF32) {
    return _mm512_loadu_ps(static_cast<const float*>(w) + i);
  } else {
    const __m256i h =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const std::uint16_t*>(w) + i));
    if constexpr (T == WT::kBF16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    else return _mm512_cvtph_ps(h);
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
inline float tree16(__m512 v) {
  const __m256 s = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  q = _mm_add_ss(q, _mm_movehdup_ps(q));
  return _mm_cvtss_f32(q);
}

/// The canonical lane tree of 16 accumulators at once: lane 4q + t of the result is tree16(v[4t + q]),
/// bitwise (the same additions, (l[i] + l[i+8]) → (+4) → (+2) → (+1), of
/// 8 + 4 + 2 + 1 vectors with the accumulators' halves, quarters, pairs and lanes shuffled side by
/// side: ~3 operations per output instead of ~8 for one tree16 each).
inline __m512 tree16x16(const __m512 (&v)[16]) {
  // Level 1: a[j] = [v[2j] lanes i + i+8 | v[2j+1] lanes i + i+8], i < 8.
  __m512 a[8];
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j)
    a[j] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * j], v[2 * j + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(v[2 * j], v[2 * j + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // Level 2: b[j] quarters = v[4j], v[4j+1], v[4j+2], v[4j+3], each lanes i + i+4 of level 1, i < 4.
  __m512 b[4];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j)
    b[j] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * j], a[2 * j + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(a[2 * j], a[2 * j + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  // Level 3: quarter q of c[j] = [v[8j+q] lanes i + i+2 | v[8j+4+q] lanes i + i+2], i < 2.
  __m512 c[2];
#pragma GCC unroll 2
  for (int j = 0; j < 2; ++j)
    c[j] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(b[2 * j]), _mm512_castps_pd(b[2 * j + 1]))),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(b[2 * j]), _mm512_castps_pd(b[2 * j + 1]))));
  // Level 4: lane 0 + lane 1 of each pair: quarter q = [v[q], v[4+q], v[8+q], v[12+q]], so result
  // lane 4q + t is the tree of v[4t + q].
  return _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
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
  __m512 acc[MR][NR];
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 16
    for (int n = 0; n < NR; ++n) acc[m][n] = k0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(acc_buf + (m * NR + n) * 16);
  const std::int64_t k16 = K - K % 16;
  const bool last = k1 == K;
  for (std::int64_t k = k0, kend = last ? k16 : k1; k < kend; k += 16) {
    if constexpr (kPf) {
      constexpr std::int64_t esz = T == WT::kF32 ? 4 : 2;
#pragma GCC unroll 16
      for (int n = 0; n < NR; ++n)
        _mm_prefetch(static_cast<const char*>(w) + ((n * rs + (rs == 1 ? NR : 1)) * K + k) * esz, _MM_HINT_T0);
    }
    __m512 xv[MR];
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      xv[m] = _mm512_loadu_ps(x + m * ldx + k);
      __asm__("" : "+v"(xv[m]));  // likewise: one load per x vector
    }
#pragma GCC unroll 16
    for (int n = 0; n < NR; ++n) {
      __m512 wv = load16<T>(w, n * rs * K + k);
      // Keep wv in a register: GCC would otherwise fold the load into each of the MR FMAs.
      __asm__("" : "+v"(wv));
#pragma GCC unroll 16
      for (int m = 0; m < MR; ++m) acc[m][n] = _mm512_fmadd_ps(xv[m], wv, acc[m][n]);
    }
  }
  if (!last) {  // a K-slice before the last: carry the chains
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m)
#pragma GCC unroll 16
      for (int n = 0; n < NR; ++n) _mm512_storeu_ps(acc_buf + (m * NR + n) * 16, acc[m][n]);
    return;
  }
  if constexpr (MR == 4 && (NR == 4 || NR == 6)) {
    if (K % 16 == 0 && rs == 1) {  // no scalar tail, contiguous outputs: 16 trees at once
      const __m512 zero = _mm512_setzero_ps();
      __m512 v[16];
#pragma GCC unroll 4
      for (int m = 0; m < 4; ++m)
#pragma GCC unroll 4
        for (int n = 0; n < 4; ++n) v[4 * n + m] = acc[m][n];
      const __m512 r = tree16x16(v);  // lane 4m + n: output (m, n)
      const __m128 b = bias != nullptr ? _mm_loadu_ps(bias) : _mm_setzero_ps();
      auto store = [&](int m, __m128 q) { _mm_storeu_ps(y + m * ldy, bias != nullptr ? _mm_add_ps(q, b) : q); };
      store(0, _mm512_extractf32x4_ps(r, 0));
      store(1, _mm512_extractf32x4_ps(r, 1));
      store(2, _mm512_extractf32x4_ps(r, 2));
      store(3, _mm512_extractf32x4_ps(r, 3));
      if constexpr (NR == 6) {
        // Columns 4 and 5 as a second 16-tree pass with 8 zero accumulators: lane 4m + n − 4.
#pragma GCC unroll 4
        for (int m = 0; m < 4; ++m) {
          v[m] = acc[m][4];
          v[4 + m] = acc[m][5];
          v[8 + m] = zero;
          v[12 + m] = zero;
        }
        const __m512 r2 = tree16x16(v);
        double b45 = 0.0;  // bias[4], bias[5] (bias is only 4-byte aligned: no double load)
        if (bias != nullptr) __builtin_memcpy(&b45, bias + 4, sizeof b45);
        const __m128 b2 = _mm_castpd_ps(_mm_set_sd(b45));
        auto store2 = [&](int m, __m128 q) {
          _mm_storel_pi(reinterpret_cast<__m64*>(y + m * ldy + 4), bias != nullptr ? _mm_add_ps(q, b2) : q);
        };
        store2(0, _mm512_extractf32x4_ps(r2, 0));
        store2(1, _mm512_extractf32x4_ps(r2, 1));
        store2(2, _mm512_extractf32x4_ps(r2, 2));
        store2(3, _mm512_extractf32x4_ps(r2, 3));
      }
      return;
    }
  }
  if constexpr (MR > 4 && (NR == 2 || NR == 3)) {
    if (K % 16 == 0 && rs == 1) {  // the batch tile (5–8 rows × 2–3): columns 0–1 in one 16-tree pass
      // tree16x16 puts the tree of v[4t + q] in lane 4q + t = L; lane L = 2m + n holds output (m, n).
      const __m512 zero = _mm512_setzero_ps();
      __m512 v[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        const int L = 4 * (i % 4) + i / 4;
        v[i] = L / 2 < MR ? acc[L / 2 < MR ? L / 2 : 0][L % 2] : zero;
      }
      __m512 r = tree16x16(v);
      if (bias != nullptr) {  // bias[0], bias[1] in every lane pair (bias is only 4-byte aligned)
        double b01;
        __builtin_memcpy(&b01, bias, sizeof b01);
        r = _mm512_add_ps(r, _mm512_castpd_ps(_mm512_set1_pd(b01)));
      }
      alignas(64) float t[16];
      _mm512_store_ps(t, r);
#pragma GCC unroll 8
      for (int m = 0; m < MR; ++m) {
        y[m * ldy] = t[2 * m];
        y[m * ldy + 1] = t[2 * m + 1];
      }
      if constexpr (NR == 3) {  // column 2: a second pass, lane L = m
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) {
          const int L = 4 * (i % 4) + i / 4;
          v[i] = L < MR ? acc[L < MR ? L : 0][2] : zero;
        }
        r = tree16x16(v);
        if (bias != nullptr) r = _mm512_add_ps(r, _mm512_set1_ps(bias[2]));
        _mm512_store_ps(t, r);
#pragma GCC unroll 8
        for (int m = 0; m < MR; ++m) y[m * ldy + 2] = t[m];
      }
      return;
    }
  }
  if constexpr (MR == 1 && NR == 16) {
    if (K % 16 == 0 && rs == 1) {  // one input row, 16 short rows (dt_proj): 16 trees at once
      // tree16x16 puts the tree of v[4t + q] in lane 4q + t: v[4t + q] = output 4q + t's
      // accumulator, so lane L holds output L.
      __m512 v[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) v[i] = acc[0][4 * (i % 4) + i / 4];
      __m512 r = tree16x16(v);
      if (bias != nullptr) r = _mm512_add_ps(r, _mm512_loadu_ps(bias));
      _mm512_storeu_ps(y, r);
      return;
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 8
    for (int n = 0; n < NR; ++n) {
      float r = tree16(acc[m][n]);
      for (std::int64_t k = k16; k < K; ++k) r = __builtin_fmaf(x[m * ldx + k], load1<T>(w, n * rs * K + k), r);
      y[m * ldy + n * rs] = bias != nullptr ? r + bias[n * rs] : r;
    }
}

/// micro<T, mr, nr> for run-time mr ∈ [1, 4], nr ∈ [1, 6] (and nr ≤ 16 when mr = 1: 9–15 rows run as
/// 8 + the rest; results are per output, so the split changes nothing), and mr ∈ [5, 8], nr ∈ [1, 3]
/// (the batch tile).
template <WT T>
void micro_any(int mr, int nr, bool pf, const float* x, std::int64_t ldx, const void* w, std::int64_t K,
               std::int64_t rs, const float* bias, float* y, std::int64_t ldy, const float* /*xs*/ = nullptr) {
  if (mr == 1 && nr > 8 && nr < 16) {
    constexpr std::int64_t esz = T == WT::kF32 ? 4 : 2;
    micro_any<T>(1, 8, pf, x, ldx, w, K, rs, bias, y, ldy);
    return micro_any<T>(1, nr - 8, pf, x, ldx, static_cast<const std::uint8_t*>(w) + 8 * rs * K * esz, K, rs,
                        bias != nullptr ? bias + 8 * rs : nullptr, y + 8 * rs, ldy);
  }
#define MAMBA_MICRO(MR, NR)                                                         \
  if (mr == MR && nr == NR)                                                         \
    return pf ? micro<T, MR, NR, true>(x, ldx, w, K, rs, bias, y, ldy)              \
              : micro<T, MR, NR, false>(x, ldx, w, K, rs, bias, y, ldy);
  MAMBA_MICRO(4, 6) MAMBA_MICRO(8, 3) MAMBA_MICRO(4, 4) MAMBA_MICRO(1, 16) MAMBA_MICRO(1, 8)
  MAMBA_MICRO(4, 5) MAMBA_MICRO(4, 3) MAMBA_MICRO(4, 2) MAMBA_MICRO(4, 1)
  MAMBA_MICRO(3, 6) MAMBA_MICRO(3, 5) MAMBA_MICRO(3, 4) MAMBA_MICRO(3, 3) MAMBA_MICRO(3, 2) MAMBA_MICRO(3, 1)
  MAMBA_MICRO(2, 6) MAMBA_MICRO(2, 5) MAMBA_MICRO(2, 4) MAMBA_MICRO(2, 3) MAMBA_MICRO(2, 2) MAMBA_MICRO(2, 1)
  MAMBA_MICRO(1, 7) MAMBA_MICRO(1, 6) MAMBA_MICRO(1, 5) MAMBA_MICRO(1, 4) MAMBA_MICRO(1, 3) MAMBA_MICRO(1, 2)
  MAMBA_MICRO(1, 1)
  MAMBA_MICRO(8, 2) MAMBA_MICRO(8, 1) MAMBA_MICRO(7, 3) MAMBA_MICRO(7, 2) MAMBA_MICRO(7, 1)
  MAMBA_MICRO(6, 3) MAMBA_MICRO(6, 2) MAMBA_MICRO(6, 1) MAMBA_MICRO(5, 3) MAMBA_MICRO(5, 2) MAMBA_MICRO(5, 1)
#undef MAMBA_MICRO
}

/// micro<kF32, mr, nr, false> over one K-slice [k0, k1) (sweep_sliced), for run-time mr ∈ [1, 4], nr ∈ [1, 6].
void micro_slice_any(int mr, int nr, const float* x, std::int64_t ldx, const float* w, std::int64_t K, std::int64_t k0,
                     std::int64_t k1, float* acc_buf, const float* bias, float* y, std::int64_t ldy) {
#define MAMBA_SLICE(MR, NR) \
  if (mr == MR && nr == NR) return micro<WT::kF32, MR, NR, false>(x, ldx, w, K, 1, bias, y, ldy, k0, k1, acc_buf);
  MAMBA_SLICE(4, 6) MAMBA_SLICE(4, 5) MAMBA_SLICE(4, 4) MAMBA_SLICE(4, 3) MAMBA_SLICE(4, 2) MAMBA_SLICE(4, 1)
  MAMBA_SLICE(3, 6) MAMBA_SLICE(3, 5) MAMBA_SLICE(3, 4) MAMBA_SLICE(3, 3) MAMBA_SLICE(3, 2) MAMBA_SLICE(3, 1)
  MAMBA_SLICE(2, 6) MAMBA_SLICE(2, 5) MAMBA_SLICE(2, 4) MAMBA_SLICE(2, 3) MAMBA_SLICE(2, 2) MAMBA_SLICE(2, 1)
  MAMBA_SLICE(1, 6) MAMBA_SLICE(1, 5) MAMBA_SLICE(1, 4) MAMBA_SLICE(1, 3) MAMBA_SLICE(1, 2) MAMBA_SLICE(1, 1)
#undef MAMBA_SLICE
}

/// Widens rows of bf16/f16 weights to fp32 (exact).
template <WT T> void widen(const void* w, std::int64_t n, float* out) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, load16<T>(w, i));
  for (; i < n; ++i) out[i] = load1<T>(w, i);
}

// Tile shapes of the shared driver (linear_tile.inc): M = 1, K ≥ 256 → 1 × 3 weight rows a third
// of the thread's rows apart (three sequential streams, as the AVX2 target: on Zen 5 the 8 adjacent
// rows of the 1 × 8 tile read 130m models' decode weights at 158–164 tok/s, three far streams at
// 209–228), 1 × 1 for the < 3 leftover rows; 1 × 16 for short rows (dt_proj: 16 outputs reduced
// by one tree16x16 pass instead of a tree16 each; K = 48, N = 1536 from L2 on Zen 5, one thread:
// 1 × 8 6.2 µs → 1 × 16 3.4 µs per call); else 4 × 6 for rows of
// K ≥ kWideMinK (24 accumulators: each x vector loaded from L2 serves 6 weight rows held in L1, not
// 4; prefill in_proj +11–14%, out_proj +6–11% on Zen 5) and 4 × 4 for shorter rows (dt_proj,
// K = 48: there the epilogue dominates and the 4 × 4 tile's single 16-tree pass wins). More than 4
// rows read directly (up to 64, linear_reads_direct) with K ≥ kWideMinK: 8 rows at a time × 3 weight
// rows (kMrBatch × kNrBatch, ≤ 24 accumulators), each bf16 weight vector widened (vpmovzxwd +
// vpslld) once per 8 rows, not once per 4: Zen 4,
// 2 threads, M = 8, GFLOP/s 4 × 6 → 8 × 3: in_proj 137–161 → 170–176, lm_head 145–173 → 178–184,
// out_proj (K = 1536) unchanged (~183); mamba-130m bf16 b=8 decode +15–20%. 8 × 2 lost on
// out_proj (−20%: its 8 rows of x, 48 KiB, spill L1 and are read from L2 twice as often). On
// full-width 512-bit units (Zen 5) 4 × 6 is ahead at every batch: avx512_batch_tile() (cpu_target.h)
// picks the tile per CPU.
constexpr int kNrOneRow = 16, kNrStream = 1, kStreams = 3, kNr = 4, kNrWide = 6, kMr = 4,
              kNrBatch = 3, kMrBatch = 8;
constexpr bool kWideDirect = true;  // linear_reads_direct: the batch tile reads up to 64 rows directly
constexpr std::int64_t kStreamMinK = 256, kWideMinK = 256;
/// Many rows, K ≥ kSliceMinK: the sweep runs K in slices of kKSlice (micro over [k0, k1)): a 4 × 6 tile's
/// rows over all of K (K = 1536: 60 KiB) spill L1, which made prefill GEMMs with long rows
/// L2-bound (Zen 5, M = 512, bf16 weights, 2 threads, GFLOP/s before → after: K = 768 (one slice)
/// 335–355; 1536 × 768 263–278 → 314–338; 2560 × 2560 278–292 → 335–370; 4096 × 4096 249–266 →
/// 297–311; 5120 × 2560 232–239 → 269–312; slices of 256 / 512 / 768 within each other's noise).
constexpr std::int64_t kKSlice = 768, kSliceMinK = 1024;

/// The stream path and the direct batch path of the shared driver read x as it is (vpmovzxwd
/// widens bf16 in k order; a 512-bit unpack would mix two 16-element steps in one vector).
template <WT T> const float* stream_x(const float* x, std::int64_t, float*) { return x; }
template <WT T> const float* batch_x(const float*, std::int64_t, std::int64_t, std::int64_t, float*) { return nullptr; }
/// One input row × kStreams weight rows rs rows apart; kPf: prefetching the row after each.
template <WT T, bool kPf>
void micro_stream(const float*, const void* w, std::int64_t K, std::int64_t rs, const float* x, const float* bias, float* y) {
  micro<T, 1, kStreams, kPf>(x, 0, w, K, rs, bias, y, 0);
}

#include "ops/cpu/linear_tile.inc"  // sweep<T>() and tile<T>()

}  // namespace

void linear_tile_avx512(const LinearProblem& p, std::int64_t m0, std::int64_t m1, std::int64_t n0,
                        std::int64_t n1, float* scratch) {
  switch (p.wtype) {
    case WT::kF32: return tile<WT::kF32>(p, m0, m1, n0, n1, scratch);
    case WT::kBF16: return tile<WT::kBF16>(p, m0, m1, n0, n1, scratch);
    case WT::kF16: return tile<WT::kF16>(p, m0, m1, n0, n1, scratch);
  }
}

}  // namespace mamba::ops::cpu
