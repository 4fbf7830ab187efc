// AVX-512 VNNI kernel of the quantized linear over blocked weights (quant_kernels.h §Blocked
// weights; computation defined there, steps 2–4): for each group g and block of 16 weight rows,
// lane n of an int32 vector accumulates row n's products by vpdpbusd (codes as u8 × one activation
// quad broadcast as s8), the high codes qh and the low codes ql in two accumulators; then
// isum_g = 256 · hi + lo − corr_g per lane, and the canonical fp32 step 4 runs lane-wise (lane n =
// output n), 8 accumulators l[g % 8] per block and row, the same tree, the tail groups in order.
// Same int32 sums, same fp32 operations → bitwise equal to every other target.
//
// Zen 5, 768 × 3072 weight, one row (decode), one core, from L2: q8 31 → 86 G weights/s, q4 48 →
// 118 against the row-major VNNI kernel, whose per-group horizontal sums (shuffles) took most of its
// instructions; from memory with 2 cores both now read at the bandwidth (~60–66 GB/s). Prefill (512
// rows, 2 cores) 59–71 → 280–290 G MAC/s, ~65–70% of the dpbusd bound (two per 64 products: qh
// and ql, i.e. half of oneDNN's int8 rate, whose activations are 8-bit).
//
// The int8 tier (quant_kernels.h §int8 tier; BlockedArgs::sums set) runs the same tiles with one
// code per activation: one vpdpbusd per 4 products, the accumulator started at −corr, and per group
// three fp32 operations per (row, block) (d = s·sw, the isum FMA, the o·T FMA) against eight
// vpdpbusd — their bound is ~73% of oneDNN's int8 rate where both share the FMA pipes (Zen 5, 512 ×
// 768 × 3072, 2 threads: 0.96–1.05 T OP/s = 56–60% of oneDNN's; the exact tier 0.69, 40%).

// GCC 12 reports its own _mm*_undefined_*() helpers (inside the intrinsics headers) as "(maybe)
// uninitialized" once they are inlined here: a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ops/cpu/cpu_target.h"
#include "ops/cpu/quant_kernels.h"

namespace mamba::ops::cpu::quant {

namespace {

/// Input rows up to which dot_blocked prefetches the next blocks while computing (decode batches).
constexpr std::int64_t kSmallBatchRows = 16;

/// How far ahead the decode tile prefetches each block's chunk stream (bytes). Zen 5, 2 threads,
/// q4 weights from memory: two streams with 2 KiB 65–67 GB/s; 1 KiB 61–62, 4 KiB 62–66; one
/// stream 50–61; three 55–60; two adjacent blocks 26–42.
constexpr std::int64_t kPrefetchBytes = 2048;

inline __m512i bcast4(const std::int8_t* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

/// Rows [m0, m0 + R) of the input times NB blocks blk[i] (block indices) of the weight: y for the
/// rows n < N of those blocks. R · NB accumulator sets of 8 vectors (canonical lanes l[g % 8]).
/// kDecode: the decode pass (groups in storage order; the blocks are read once), with pf: prefetch
/// each block's chunks kPrefetchBytes ahead (weight_prefetch()). ahead/ahead_bytes (optional): bytes to prefetch meanwhile, spread over the groups (the blocks the
/// next tile reads: small batches are memory-bound on their first pass over a block, compute-bound on
/// the others, so those fetch the next blocks).
template <bool kQ4, int NB, int R, bool kDecode, bool kA8>
inline void tile(const BlockedArgs& a, std::int64_t m0, const std::int64_t (&blk)[NB], bool pf = false,
                 const std::uint8_t* ahead = nullptr, std::int64_t ahead_bytes = 0) {
  const std::int64_t K = a.K, G = K / kGroup, G8 = G - G % 8;
  constexpr std::int64_t kChunk = blocked_chunk_bytes(kQ4), kCodes = blocked_code_bytes(kQ4);
  const std::uint8_t* base[NB];
  for (int i = 0; i < NB; ++i) base[i] = a.wp + blk[i] * G * kChunk;
  const __m512i nib = _mm512_set1_epi8(0x0F);

  // Group g: its term for every (row, block) into l = sink(r, i): the exact tier's
  // fma(d_g, float(isum_g), l); the int8 tier's fma(o_g, T_g, fma(d_g, float(isum_g), l)).
  auto group = [&](std::int64_t g, auto&& sink) {
    __m512i hi[R][NB], lo[R][NB];
    for (int r = 0; r < R; ++r) {
      // The int8 tier starts from −corr (isum = Σ u·c − corr in one chain).
      const __m512i init = kA8 ? _mm512_set1_epi32(-a.corr[(m0 + r) * G + g]) : _mm512_setzero_si512();
      for (int i = 0; i < NB; ++i) {
        hi[r][i] = init;
        if constexpr (!kA8) lo[r][i] = _mm512_setzero_si512();
      }
    }
    if (kDecode && pf)
      for (int i = 0; i < NB; ++i)
        for (std::int64_t b = 0; b < kChunk; b += 64) _mm_prefetch(reinterpret_cast<const char*>(base[i] + g * kChunk + kPrefetchBytes + b), _MM_HINT_T0);
    if (ahead != nullptr) {
      const std::int64_t per = (ahead_bytes / G + 63) / 64 * 64;  // bytes per group, whole lines
      for (std::int64_t b = g * per; b < (g + 1) * per && b < ahead_bytes; b += 64)
        _mm_prefetch(reinterpret_cast<const char*>(ahead + b), _MM_HINT_T1);  // to L2: L1 holds the current blocks
    }
    constexpr int kVecs = kQ4 ? 4 : 8;
#pragma GCC unroll 8
    for (int j = 0; j < kVecs; ++j) {
      const std::int64_t k = g * kGroup + (kQ4 ? 8 : 4) * j;
#pragma GCC unroll 4
      for (int i = 0; i < NB; ++i) {
        const __m512i v = _mm512_loadu_si512(base[i] + g * kChunk + 64 * j);
        if constexpr (kQ4) {
          const __m512i v0 = _mm512_and_si512(v, nib), v1 = _mm512_and_si512(_mm512_srli_epi16(v, 4), nib);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) {
            const std::int8_t* q = a.xq + (m0 + r) * K + k;
            const std::int8_t* l = a.xl + (m0 + r) * K + k;
            hi[r][i] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(hi[r][i], v0, bcast4(q)), v1, bcast4(q + 4));
            if constexpr (!kA8) lo[r][i] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(lo[r][i], v0, bcast4(l)), v1, bcast4(l + 4));
          }
        } else {
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) {
            hi[r][i] = _mm512_dpbusd_epi32(hi[r][i], v, bcast4(a.xq + (m0 + r) * K + k));
            if constexpr (!kA8) lo[r][i] = _mm512_dpbusd_epi32(lo[r][i], v, bcast4(a.xl + (m0 + r) * K + k));
          }
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m512i corr = kA8 ? _mm512_setzero_si512() : _mm512_set1_epi32(a.corr[(m0 + r) * G + g]);
      const __m512 sx = _mm512_set1_ps(a.sx[(m0 + r) * G + g]);
      for (int i = 0; i < NB; ++i) {
        const __m512 d = _mm512_mul_ps(sx, _mm512_loadu_ps(reinterpret_cast<const float*>(base[i] + g * kChunk + kCodes)));
        __m512& l = sink(r, i);
        if constexpr (kA8) {
          const __m512i isum = hi[r][i];
          const __m512 T = _mm512_loadu_ps(a.sums + (blk[i] * G + g) * kBlockRows);
          l = _mm512_fmadd_ps(_mm512_set1_ps(a.off[(m0 + r) * G + g]), T, _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(isum), l));
        } else {
          const __m512i isum = _mm512_sub_epi32(_mm512_add_epi32(_mm512_slli_epi32(hi[r][i], 8), lo[r][i]), corr);
          l = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(isum), l);
        }
      }
    }
  };

  __m512 acc[R][NB][8];
  if constexpr (kDecode) {
    // Decode: groups in storage order (the weight streams are read once, front to back).
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < NB; ++i)
        for (int j = 0; j < 8; ++j) acc[r][i][j] = _mm512_setzero_ps();
    for (std::int64_t g = 0; g < G8; g += 8) {
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j)
        group(g + j, [&](int r, int i) -> __m512& { return acc[r][i][j]; });
    }
  } else {
    // Prefill (the tile's weights sit in L1): lane j of the canonical order (groups g ≡ j mod 8,
    // ascending, the same FMA chain) one at a time, so one fp32 accumulator per (row, block) is live
    // instead of eight and a 2-row × 3-block tile fits the registers.
    for (int j = 0; j < 8; ++j) {
      __m512 l[R][NB];
      for (int r = 0; r < R; ++r)
        for (int i = 0; i < NB; ++i) l[r][i] = _mm512_setzero_ps();
      for (std::int64_t g = j; g < G8; g += 8)
        group(g, [&](int r, int i) -> __m512& { return l[r][i]; });
      for (int r = 0; r < R; ++r)
        for (int i = 0; i < NB; ++i) acc[r][i][j] = l[r][i];
    }
  }
  // Tree l[i] += l[i + s] for s = 4, 2, 1, then the tail groups in order on l[0].
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < NB; ++i)
      for (int s = 4; s >= 1; s /= 2)
        for (int j = 0; j < s; ++j) acc[r][i][j] = _mm512_add_ps(acc[r][i][j], acc[r][i][j + s]);
  for (std::int64_t g = G8; g < G; ++g)
    group(g, [&](int r, int i) -> __m512& { return acc[r][i][0]; });
  for (int i = 0; i < NB; ++i) {
    const std::int64_t n0 = blk[i] * kBlockRows, valid = std::min<std::int64_t>(kBlockRows, a.N - n0);
    const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
    if (a.bias != nullptr) {  // step 5: y = r + bias
      const __m512 bv = _mm512_maskz_loadu_ps(mask, a.bias + n0);
      for (int r = 0; r < R; ++r) acc[r][i][0] = _mm512_add_ps(acc[r][i][0], bv);
    }
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(a.y + (m0 + r) * a.ldy + n0, mask, acc[r][i][0]);
  }
}

template <bool kQ4, bool kA8>
void dot_blocked(const BlockedArgs& a, std::int64_t m0, std::int64_t m1, std::int64_t b0, std::int64_t b1) {
  if (m1 - m0 == 1) {
    // Decode: blocks j, j + h together (two streams far apart), the leftover block alone.
    const std::int64_t h = (b1 - b0) / 2;
    const bool pf = weight_prefetch();
    for (std::int64_t j = b0; j < b0 + h; ++j) tile<kQ4, 2, 1, true, kA8>(a, m0, {j, j + h}, pf);
    for (std::int64_t j = b0 + 2 * h; j < b1; ++j) tile<kQ4, 1, 1, true, kA8>(a, m0, {j}, pf);
    return;
  }
  // kR input rows × kPrefillTileBlocks weight blocks per tile: each activation broadcast feeds three
  // dpbusd and each weight vector two rows' (Zen 5, one core, 512 × 768 × 3072: 2 rows × 1 block
  // with eight live accumulators per row 107 G MAC/s; 2 × 2 146; 2 × 3 145–160; 3 × 2 147; 4 × 1
  // 128; 4 × 2 138; the bound of two dpbusd per 64 products at ~2 per cycle is ~218 at 3.4 GHz).
  // The int8 tier has no low-code accumulators, so 4 rows fit the registers and halve the weight
  // reads per product (512 × 1536 × 768, 2 threads: 2 rows 0.60 T OP/s — the 83 KiB 3-block tile
  // streams from L2 — 3 rows 0.81, 4 rows 0.96).
  constexpr int kR = kA8 ? 4 : 2, kNB = static_cast<int>(kPrefillTileBlocks);
  const std::int64_t block_bytes = a.K / kGroup * blocked_chunk_bytes(kQ4);
  // A decode batch (few rows): the pass after the first over kNB blocks prefetches the next kNB
  // (the first pass streams its blocks from memory, the others compute on them from cache).
  // (Kept on Zen 4 as well, unlike the one-row streams' prefetch: b=8 q8 / q4 557 → 657 / 602 →
  // 765 tok/s with it on an EPYC 9004 VM, medians of 60 interleaved rounds.)
  const bool prefetch_next = m1 - m0 <= kSmallBatchRows;
  std::int64_t b = b0;
  for (; b + kNB <= b1; b += kNB) {
    std::int64_t bl[kNB];
    for (int i = 0; i < kNB; ++i) bl[i] = b + i;
    const std::int64_t next_blocks = std::min<std::int64_t>(kNB, b1 - (b + kNB));
    const std::uint8_t* next = prefetch_next && next_blocks > 0 ? a.wp + (b + kNB) * block_bytes : nullptr;
    // Which pass prefetches: the second when there are several, else the only one.
    const std::int64_t pf_m = m1 - m0 >= 2 * kR ? m0 + kR : m0;
    std::int64_t m = m0;
    for (; m + kR <= m1; m += kR)
      tile<kQ4, kNB, kR, false, kA8>(a, m, bl, false, m == pf_m ? next : nullptr, next_blocks * block_bytes);
    for (; m < m1; ++m) tile<kQ4, kNB, 1, false, kA8>(a, m, bl, false, m == pf_m ? next : nullptr, next_blocks * block_bytes);
  }
  if (b + 2 <= b1) {  // two blocks left (x_proj's N = 80 is 3 + 2 blocks)
    std::int64_t m = m0;
    for (; m + kR <= m1; m += kR) tile<kQ4, 2, kR, false, kA8>(a, m, {b, b + 1});
    for (; m < m1; ++m) tile<kQ4, 2, 1, false, kA8>(a, m, {b, b + 1});
    b += 2;
  }
  for (; b < b1; ++b) {
    std::int64_t m = m0;
    for (; m + kR <= m1; m += kR) tile<kQ4, 1, kR, false, kA8>(a, m, {b});
    for (; m < m1; ++m) tile<kQ4, 1, 1, false, kA8>(a, m, {b});
  }
}

}  // namespace

void dot_blocked_avx512vnni(const BlockedArgs& a, std::int64_t m0, std::int64_t m1, std::int64_t b0, std::int64_t b1) {
  const bool a8 = a.sums != nullptr;
  if (a.q4) a8 ? dot_blocked<true, true>(a, m0, m1, b0, b1) : dot_blocked<true, false>(a, m0, m1, b0, b1);
  else a8 ? dot_blocked<false, true>(a, m0, m1, b0, b1) : dot_blocked<false, false>(a, m0, m1, b0, b1);
}

void quantize_rows_avx512(const float* x, std::int64_t ldx, std::int64_t M, std::int64_t K, std::int8_t* xq, std::int8_t* xl,
                          float* sx, std::int32_t* xsum) {
  const std::int64_t G = K / kGroup;
  const __m512i lim_hi = _mm512_set1_epi32(127), lim_lo = _mm512_set1_epi32(-127);
  for (std::int64_t m = 0; m < M; ++m) {
    for (std::int64_t g = 0; g < G; ++g) {
      const float* xg = x + m * ldx + g * kGroup;
      const __m512 v0 = _mm512_loadu_ps(xg), v1 = _mm512_loadu_ps(xg + 16);
      std::int8_t* q = xq + m * K + g * kGroup;
      std::int8_t* ql = xl + m * K + g * kGroup;
      const std::int64_t at = m * G + g;
      // Non-finite anywhere in the group: x − x is NaN exactly for NaN and ±Inf.
      if (_mm512_cmp_ps_mask(_mm512_sub_ps(v0, v0), _mm512_sub_ps(v1, v1), _CMP_UNORD_Q) != 0) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), _mm256_setzero_si256());
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(ql), _mm256_setzero_si256());
        sx[at] = __builtin_nanf("");
        xsum[at] = 0;
        continue;
      }
      const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
      const float s = amax / 127.0f, inv = activation_inverse(amax);
      sx[at] = s * (1.0f / 256.0f);
      const __m512 vi = _mm512_set1_ps(inv), vi256 = _mm512_set1_ps(inv * 256.0f), vs = _mm512_set1_ps(s);
      // qh = rne(x · inv) (cvtps rounds to nearest even; |qh| ≤ 127 as inv is finite);
      // ql = clamp(rne(fma(−qh, s, x) · inv·256), −127, 127).
      const __m512i h0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, vi)), h1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, vi));
      auto low = [&](__m512i h, __m512 v) {
        const __m512 r = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(h), vs, v);
        return _mm512_max_epi32(lim_lo, _mm512_min_epi32(lim_hi, _mm512_cvtps_epi32(_mm512_mul_ps(r, vi256))));
      };
      const __m512i l0 = low(h0, v0), l1 = low(h1, v1);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(h0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm512_cvtsepi32_epi8(h1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(ql), _mm512_cvtepi32_epi8(l0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(ql + 16), _mm512_cvtepi32_epi8(l1));
      xsum[at] = _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(_mm512_add_epi32(h0, h1), 8), _mm512_add_epi32(l0, l1)));
    }
  }
}

void quantize_rows_a8_avx512(const float* x, std::int64_t ldx, std::int64_t M, std::int64_t K, std::int8_t* c, float* s, float* o,
                             std::int32_t* csum) {
  const std::int64_t G = K / kGroup;
  const __m512 top = _mm512_set1_ps(255.0f);
  const __m512i bias = _mm512_set1_epi32(128);
  for (std::int64_t m = 0; m < M; ++m) {
    for (std::int64_t g = 0; g < G; ++g) {
      const float* xg = x + m * ldx + g * kGroup;
      const __m512 v0 = _mm512_loadu_ps(xg), v1 = _mm512_loadu_ps(xg + 16);
      std::int8_t* cg = c + m * K + g * kGroup;
      const std::int64_t at = m * G + g;
      // Non-finite anywhere in the group: x − x is NaN exactly for NaN and ±Inf.
      const __mmask16 bad = _mm512_cmp_ps_mask(_mm512_sub_ps(v0, v0), _mm512_sub_ps(v1, v1), _CMP_UNORD_Q);
      if (bad != 0) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(cg), _mm256_setzero_si256());
        s[at] = o[at] = __builtin_nanf("");
        csum[at] = 0;
        continue;
      }
      // + 0: −0 → +0 (which of ±0 a min returns differs between the reference and vector forms).
      const float lo = _mm512_reduce_min_ps(_mm512_min_ps(v0, v1)) + 0.0f;
      const float hi = _mm512_reduce_max_ps(_mm512_max_ps(v0, v1));
      float step = hi / 255.0f - lo / 255.0f;
      if (!(step >= FLT_MIN)) {
        step = 0.0f;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(cg), _mm256_set1_epi8(-128));
        csum[at] = -128 * kGroup;
      } else {
        const __m512 vlo = _mm512_set1_ps(lo * 0.5f), vinv = _mm512_set1_ps(2.0f * (1.0f / step)), half = _mm512_set1_ps(0.5f);
        // c = rne(min((x/2 − lo/2) · (2/s), 255)) − 128 (cvtps rounds to nearest even).
        auto code = [&](__m512 v) {
          return _mm512_sub_epi32(_mm512_cvtps_epi32(_mm512_min_ps(_mm512_mul_ps(_mm512_sub_ps(_mm512_mul_ps(v, half), vlo), vinv), top)), bias);
        };
        const __m512i c0 = code(v0), c1 = code(v1);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(cg), _mm512_cvtsepi32_epi8(c0));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(cg + 16), _mm512_cvtsepi32_epi8(c1));
        csum[at] = _mm512_reduce_add_epi32(_mm512_add_epi32(c0, c1));
      }
      s[at] = step;
      o[at] = std::fma(128.0f, step, lo);
    }
  }
}

}  // namespace mamba::ops::cpu::quant
