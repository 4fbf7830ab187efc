// AVX2 kernels of the quantized linear (computation defined in quant_kernels.h): activation
// quantization, and the integer dot products by vpmaddwd (int16 weights or nibbles × the 16-bit
// activations) into int32.
#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ops/cpu/cpu_target.h"
#include "ops/cpu/quant_kernels.h"

namespace mamba::ops::cpu::quant {

// Per weight row and input row the integer sums isum_g come 8 groups at a time into one vector in
// group order, then d_g · float(isum_g) is added lane g % 8 by one FMA: the canonical order of step 4.
//  - q8: isum_g = Σ_k w[k] · X16[k]: the 32 codes sign-extended to int16 (2 × 16) and multiplied by
//    the 16-bit activations, 2 multiply-adds per group.
//  - q4: two groups at a time from 32 bytes of nibbles read as 16 words: nibble j of each word
//    (shift 4j, mask) times the 16-bit activations in that order (x16n), 4 multiply-adds per pair;
//    isum_g = Σ u · X16 − 8 · xsum_g (u = w + 8, xsum_g = Σ X16). (vpmaddwd is the scarce unit on
//    AVX2 CPUs: 16-bit activations as two int8 codes through vpmaddubsw would need 6 per pair.)
namespace {

inline __m256i madd16_acc(__m256i acc, __m256i a, __m256i b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }

/// How far ahead of the codes being read the decode kernel prefetches its weight streams (bytes;
/// Zen 5: 1 KiB and 4 KiB measured slower than 2 KiB; without a prefetch q8 decode ran at 124
/// tok/s on mamba-130m, with it 185 — the hardware prefetcher alone does not keep three streams
/// per core fed).
constexpr std::int64_t kPrefetchBytes = 2048;

inline std::int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

inline std::int32_t hsum_epi32x4(__m128i s) {
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

/// q8 group g: 8 int32 lanes that sum to isum_g.
inline __m256i q8_group(const std::int8_t* w, const std::int16_t* x16, std::int64_t g) {
  const __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + g * 32)));
  const __m256i w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + g * 32 + 16)));
  const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x16 + g * 32));
  const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x16 + g * 32 + 16));
  return madd16_acc(madd16_acc(_mm256_setzero_si256(), w0, x0), w1, x1);
}

/// q4 groups g, g+1 (g even, both present): lanes 0–3 sum to isum_g + 8·xsum_g, lanes 4–7 to
/// isum_g+1 + 8·xsum_g+1. The 32 bytes of nibbles as 16 words; nibble j of every word by one shift
/// and one mask, times A_j.
inline __m256i q4_pair(const std::uint8_t* w, const std::int16_t* x16n, std::int64_t g) {
  const __m256i nib = _mm256_set1_epi16(0x000F);
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + g * 16));
  const auto* x = reinterpret_cast<const __m256i*>(x16n + g * 32);
  __m256i acc = madd16_acc(_mm256_setzero_si256(), _mm256_and_si256(b, nib), _mm256_loadu_si256(x));
  acc = madd16_acc(acc, _mm256_and_si256(_mm256_srli_epi16(b, 4), nib), _mm256_loadu_si256(x + 1));
  acc = madd16_acc(acc, _mm256_and_si256(_mm256_srli_epi16(b, 8), nib), _mm256_loadu_si256(x + 2));
  return madd16_acc(acc, _mm256_srli_epi16(b, 12), _mm256_loadu_si256(x + 3));
}

/// q4 group g alone (the last of an odd count): isum_g + 8·xsum_g, the pair's computation on 8 words.
inline std::int32_t q4_single(const std::uint8_t* w, const std::int16_t* x16n, std::int64_t g) {
  const __m128i nib = _mm_set1_epi16(0x000F);
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + g * 16));
  const auto* x = reinterpret_cast<const __m128i*>(x16n + g * 32);
  __m128i s = _mm_madd_epi16(_mm_and_si128(b, nib), _mm_loadu_si128(x));
  s = _mm_add_epi32(s, _mm_madd_epi16(_mm_and_si128(_mm_srli_epi16(b, 4), nib), _mm_loadu_si128(x + 1)));
  s = _mm_add_epi32(s, _mm_madd_epi16(_mm_and_si128(_mm_srli_epi16(b, 8), nib), _mm_loadu_si128(x + 2)));
  s = _mm_add_epi32(s, _mm_madd_epi16(_mm_srli_epi16(b, 12), _mm_loadu_si128(x + 3)));
  return hsum_epi32x4(s);
}

/// isum_g for one group of the tail (g ≥ G8).
inline std::int32_t tail_isum(const void* w, const PackedX& px, std::int64_t g, std::int64_t G, bool q4) {
  if (!q4) return hsum_epi32(q8_group(static_cast<const std::int8_t*>(w), px.x16, g));
  const auto* wb = static_cast<const std::uint8_t*>(w);
  std::int32_t s;
  if (g % 2 == 1) {  // the second of a pair
    s = hsum_epi32x4(_mm256_extracti128_si256(q4_pair(wb, px.x16n, g - 1), 1));
  } else if (g + 1 < G) {
    s = hsum_epi32x4(_mm256_castsi256_si128(q4_pair(wb, px.x16n, g)));
  } else {
    s = q4_single(wb, px.x16n, g);
  }
  return s - 8 * px.xsum[g];
}

/// The 8 group sums isum_g .. isum_g+7 of one weight row (g a multiple of 8), lane j = group g + j.
inline __m256i isum8(const PackedX& px, const void* w, std::int64_t g, bool q4) {
  if (!q4) {
    const auto* wq = static_cast<const std::int8_t*>(w);
    __m256i s[8];
    for (int j = 0; j < 8; ++j) s[j] = q8_group(wq, px.x16, g + j);
    // Eight 8-lane partial sums → one vector of the eight group sums, lane j = group g + j.
    const __m256i t01 = _mm256_hadd_epi32(s[0], s[1]), t23 = _mm256_hadd_epi32(s[2], s[3]);
    const __m256i t45 = _mm256_hadd_epi32(s[4], s[5]), t67 = _mm256_hadd_epi32(s[6], s[7]);
    const __m256i u0 = _mm256_hadd_epi32(t01, t23), u1 = _mm256_hadd_epi32(t45, t67);
    return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
  }
  const auto* wb = static_cast<const std::uint8_t*>(w);
  // Pair vectors p_j (groups g+2j in lanes 0–3, g+2j+1 in lanes 4–7) → [g0 g2 g4 g6 | g1 g3 g5 g7]
  // by three hadds → group order by one permute; then the nibble offset's correction.
  const __m256i h1 = _mm256_hadd_epi32(q4_pair(wb, px.x16n, g), q4_pair(wb, px.x16n, g + 2));
  const __m256i h2 = _mm256_hadd_epi32(q4_pair(wb, px.x16n, g + 4), q4_pair(wb, px.x16n, g + 6));
  const __m256i h3 = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(h1, h2), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  return _mm256_sub_epi32(h3, _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(px.xsum + g)), 3));
}

/// Steps 2–4 of quant_kernels.h for one x row (px: its packed codes, sx: its scales) and NR weight
/// rows w[r] (scales sw[r]) into out[r]; kPrefetch: prefetch each row's stream kPrefetchBytes ahead
/// (the decode path, whose rows are contiguous in each stream). Rows are independent; NR = 3 with
/// rows far apart makes the decode read three sequential weight streams (one stream per core falls
/// ~15% short of the bandwidth on Zen 3). (Two adjacent rows at a time measured slower from L2: the
/// vpmaddwd unit is the limit there and the second row only adds register pressure.)
template <int NR, bool kPrefetch = false>
inline void dot_rows(const PackedX& px, const float* sx, const void* const w[NR], const float* const sw[NR], std::int64_t G,
                     bool q4, float out[NR]) {
  __m256 acc[NR];
  for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps();
  std::int64_t g = 0;
  const std::int64_t step_bytes = q4 ? 128 : 256;  // weight bytes of 8 groups
  for (; g + 8 <= G; g += 8) {
    const __m256 xs = _mm256_loadu_ps(sx + g);
    if constexpr (kPrefetch) {
      for (int r = 0; r < NR; ++r) {
        const char* wp = static_cast<const char*>(w[r]) + g / 8 * step_bytes + kPrefetchBytes;
        for (std::int64_t b = 0; b < step_bytes; b += 64) _mm_prefetch(wp + b, _MM_HINT_T0);
        // The scales, as far ahead in groups (4 bytes per group of step_bytes / 8 code bytes).
        _mm_prefetch(reinterpret_cast<const char*>(sw[r] + g + kPrefetchBytes * 8 / step_bytes), _MM_HINT_T0);
      }
    }
    for (int r = 0; r < NR; ++r) {
      const __m256 d = _mm256_mul_ps(xs, _mm256_loadu_ps(sw[r] + g));
      acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum8(px, w[r], g, q4)), acc[r]);
    }
  }
  for (int r = 0; r < NR; ++r) {
    // Lane tree: l[i] + l[i+4], then + l[i+2], then l[0] + l[1]; then the tail groups in order.
    __m128 v = _mm_add_ps(_mm256_castps256_ps128(acc[r]), _mm256_extractf128_ps(acc[r], 1));
    v = _mm_add_ps(v, _mm_movehl_ps(v, v));
    v = _mm_add_ss(v, _mm_shuffle_ps(v, v, 1));
    float res = _mm_cvtss_f32(v);
    for (std::int64_t t = g; t < G; ++t) res = __builtin_fmaf(sx[t] * sw[r][t], static_cast<float>(tail_isum(w[r], px, t, G, q4)), res);
    out[r] = res;
  }
}

/// Row `m` of a packed array of `n` values per row; nullptr (an array the kernel does not read) stays so.
template <class T>
inline const T* row_at(const T* p, std::int64_t m, std::int64_t n) {
  return p != nullptr ? p + m * n : nullptr;
}

/// The packed activations of input row m.
inline PackedX row_of(const DotArgs& a, std::int64_t m) {
  const std::int64_t K = a.K;
  return {row_at(a.px.x16, m, K), row_at(a.px.x16n, m, K), row_at(a.px.xsum, m, K / kGroup), row_at(a.px.xq, m, K),
          row_at(a.px.xl, m, K)};
}
}  // namespace

void dot_rows_avx2(const DotArgs& a, std::int64_t m0, std::int64_t m1, std::int64_t n0, std::int64_t n1) {
  const std::int64_t G = a.K / kGroup;
  const std::int64_t row_bytes = a.q4 ? a.K / 2 : a.K;
  if (m1 - m0 == 1) {
    // One x row (decode): rows j, j + h, j + 2h together (three streams), the leftover rows below.
    const std::int64_t h = (n1 - n0) / 3, m = m0;
    const PackedX pm = row_of(a, m);
    const bool pf = weight_prefetch();
    for (std::int64_t j = n0; j < n0 + h; ++j) {
      const void* w[3];
      const float* sw[3];
      for (int r = 0; r < 3; ++r) {
        w[r] = static_cast<const std::uint8_t*>(a.w) + (j + r * h) * row_bytes;
        sw[r] = a.sw + (j + r * h) * G;
      }
      float out[3];
      if (pf) dot_rows<3, true>(pm, a.sx + m * G, w, sw, G, a.q4, out);
      else dot_rows<3, false>(pm, a.sx + m * G, w, sw, G, a.q4, out);
      for (int r = 0; r < 3; ++r) a.y[m * a.ldy + j + r * h] = out[r];
    }
    n0 += 3 * h;
  }
  for (std::int64_t n = n0; n < n1; ++n) {
    const void* wn = static_cast<const std::uint8_t*>(a.w) + n * row_bytes;
    const float* swn = a.sw + n * G;
    for (std::int64_t m = m0; m < m1; ++m) {
      const PackedX pm = row_of(a, m);
      const void* w1[1] = {wn};
      const float* sw1[1] = {swn};
      dot_rows<1>(pm, a.sx + m * G, w1, sw1, G, a.q4, a.y + m * a.ldy + n);
    }
  }
}

// ---- Tiles for several input rows (prefill, decode batches) -------------------------------------
// The row-major kernel above spends most of its instructions per (input row, weight row) on
// widening the codes and on the horizontal sums that gather a group's lanes. With several input
// rows, the task's weight rows are first unpacked (once per call) into lanes-are-rows vectors of
// int16 pairs, so that one vpmaddwd by an activation pair broadcast to all lanes adds 2 products to
// each of 8 rows: a group's sums for 8 rows need no horizontal adds, and each unpacked vector
// serves every input row of the tile (the AVX-512 VNNI kernel's blocked idea, made per call here,
// as the stored int8 rows stay the decode path's format).
//
// Zen 4 under MAMBA_CPU_TARGET=avx2, one thread, G MAC/s: 512 × 768 × 3072 q8 36 (row-major
// kernel) → 57–63, 512 × 1536 × 768 37 → 54; a tight vpmaddwd + vpaddd loop from L1 reaches ~77.
// Model prefill (512 tokens, 2 threads, mamba-130m) q8 / q4 579 / 598 → 932–975 / 990–1010 tok/s.
namespace {

/// Weight rows per unpacked block: int32 lane n of a vector = row n.
constexpr int kTileLanes = 8;

/// Unpacked block layout, per group g: 16 vectors, vector p's lane n = the int16 pair
/// (w[n][32g + 2p], w[n][32g + 2p + 1]) (the low half first), codes as signed values (q4: u − 8).
constexpr int kPairsPerGroup = kGroup / 2;

/// Input rows per tile (each unpacked vector feeds kTileRows vpmaddwd; with two blocks per tile,
/// 6 integer and 6 fp32 accumulators live). 512 × 768 × 3072 q8, one thread, G MAC/s: 2 rows × 2
/// blocks 55–61, 4 × 1 58, 3 × 1 56, 3 × 2 63; model prefill q8 3 × 2 947–969 tok/s, 2 × 2 906–940.
constexpr int kTileRows = 3;

/// 8 × 8 transpose of int32 elements: r[n] lane p → r[p] lane n.
inline void transpose8(__m256i r[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int h = 0; h < 8; h += 4) {
    u[h + 0] = _mm256_unpacklo_epi64(t[h + 0], t[h + 2]);
    u[h + 1] = _mm256_unpackhi_epi64(t[h + 0], t[h + 2]);
    u[h + 2] = _mm256_unpacklo_epi64(t[h + 1], t[h + 3]);
    u[h + 3] = _mm256_unpackhi_epi64(t[h + 1], t[h + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    r[c] = _mm256_permute2x128_si256(u[c], u[c + 4], 0x20);
    r[c + 4] = _mm256_permute2x128_si256(u[c], u[c + 4], 0x31);
  }
}

/// How far ahead in each weight row's codes unpack_block prefetches (bytes). The weights come from
/// memory in decode batches (768 × 50280 q8, 8 input rows, 2 threads, ms: none 5.75, 256 4.68,
/// 1024 4.54–4.68, 2048 4.59; the row-major kernel 4.83).
constexpr std::int64_t kUnpackPrefetch = 1024;

/// Unpacks weight rows [n0, n0 + rows) (rows ≤ 8; lanes past them get code 0 and scale 0) into
/// codes [G][16] vectors and scales [G][8] (lane n = sw[n0 + n, g]).
void unpack_block(const DotArgs& a, std::int64_t n0, std::int64_t rows, __m256i* codes, float* scales) {
  const std::int64_t G = a.K / kGroup, row_bytes = a.q4 ? a.K / 2 : a.K;
  const auto* w = static_cast<const std::uint8_t*>(a.w) + n0 * row_bytes;
  const __m256i nib = _mm256_set1_epi32(0x0F), nib_hi = _mm256_set1_epi32(0xF0), eight = _mm256_set1_epi16(8);
  for (std::int64_t g = 0; g < G; ++g) {
    __m256i lo[8], hi[8];  // row n's pairs 0–7 and 8–15 (int32 lanes)
    for (int n = 0; n < kTileLanes; ++n) {
      if (n >= rows) {
        lo[n] = hi[n] = _mm256_setzero_si256();
        scales[g * kTileLanes + n] = 0.0f;
        continue;
      }
      scales[g * kTileLanes + n] = a.sw[(n0 + n) * G + g];
      _mm_prefetch(reinterpret_cast<const char*>(w + n * row_bytes + g * (a.q4 ? kGroup / 2 : kGroup) + kUnpackPrefetch), _MM_HINT_T0);
      if (!a.q4) {
        // 32 int8 codes → 32 int16: pairs 0–7 in the first vector, 8–15 in the second.
        const auto* c = reinterpret_cast<const __m128i*>(w + n * row_bytes + g * kGroup);
        lo[n] = _mm256_cvtepi8_epi16(_mm_loadu_si128(c));
        hi[n] = _mm256_cvtepi8_epi16(_mm_loadu_si128(c + 1));
      } else {
        // Byte p holds u(2p) in its low nibble and u(2p + 1) in its high one: lane p = the pair
        // (u(2p) − 8, u(2p + 1) − 8) as int16.
        const std::uint8_t* c = w + n * row_bytes + g * kGroup / 2;
        auto pairs = [&](const std::uint8_t* b8) {
          const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b8)));
          const __m256i both = _mm256_or_si256(_mm256_and_si256(b, nib), _mm256_slli_epi32(_mm256_and_si256(b, nib_hi), 12));
          return _mm256_sub_epi16(both, eight);
        };
        lo[n] = pairs(c);
        hi[n] = pairs(c + 8);
      }
    }
    transpose8(lo);
    transpose8(hi);
    __m256i* out = codes + g * kPairsPerGroup;
    for (int p = 0; p < 8; ++p) {
      _mm256_store_si256(out + p, lo[p]);
      _mm256_store_si256(out + 8 + p, hi[p]);
    }
  }
}

/// Input rows [m0, m0 + R) times the NB unpacked blocks (codes wb[i], scales sb[i]; rows n0[i] ..
/// n0[i] + valid[i] of the weight) into y: step 4 lane-wise (lane n = output n), the canonical
/// order — lane accumulator j holds groups g ≡ j (mod 8) in ascending order (one pass per j, one
/// fp32 accumulator per (row, block) live), then the tree, then the tail groups in order.
template <int R, int NB>
inline void tile(const DotArgs& a, std::int64_t m0, const __m256i* const (&wb)[NB], const float* const (&sb)[NB],
                 const std::int64_t (&n0)[NB], const std::int64_t (&valid)[NB]) {
  const std::int64_t K = a.K, G = K / kGroup, G8 = G - G % 8;
  const std::int16_t* x16 = a.px.x16;
  auto group = [&](std::int64_t g, auto&& sink) {
    __m256i s[R][NB];
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < NB; ++i) s[r][i] = _mm256_setzero_si256();
    // (Unrolled 16 times, GCC computed all products first and spilled them: 36 G MAC/s against 63.)
#pragma GCC unroll 4
    for (int p = 0; p < kPairsPerGroup; ++p) {
      __m256i xb[R];
      for (int r = 0; r < R; ++r) {
        std::int32_t pair;
        std::memcpy(&pair, x16 + (m0 + r) * K + g * kGroup + 2 * p, 4);
        xb[r] = _mm256_set1_epi32(pair);
      }
      for (int i = 0; i < NB; ++i) {
        const __m256i w = _mm256_load_si256(wb[i] + g * kPairsPerGroup + p);
        for (int r = 0; r < R; ++r) s[r][i] = madd16_acc(s[r][i], w, xb[r]);
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m256 sx = _mm256_set1_ps(a.sx[(m0 + r) * G + g]);
      for (int i = 0; i < NB; ++i) {
        const __m256 d = _mm256_mul_ps(sx, _mm256_loadu_ps(sb[i] + g * kTileLanes));
        __m256& l = sink(r, i);
        l = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s[r][i]), l);
      }
    }
  };
  __m256 acc[R][NB][8];
  for (int j = 0; j < 8; ++j) {
    __m256 l[R][NB];
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < NB; ++i) l[r][i] = _mm256_setzero_ps();
    for (std::int64_t g = j; g < G8; g += 8) group(g, [&](int r, int i) -> __m256& { return l[r][i]; });
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < NB; ++i) acc[r][i][j] = l[r][i];
  }
  // Tree l[i] += l[i + s] for s = 4, 2, 1, then the tail groups in order on l[0].
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < NB; ++i)
      for (int s = 4; s >= 1; s /= 2)
        for (int j = 0; j < s; ++j) acc[r][i][j] = _mm256_add_ps(acc[r][i][j], acc[r][i][j + s]);
  for (std::int64_t g = G8; g < G; ++g) group(g, [&](int r, int i) -> __m256& { return acc[r][i][0]; });
  for (int i = 0; i < NB; ++i) {
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(valid[i])), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int r = 0; r < R; ++r) _mm256_maskstore_ps(a.y + (m0 + r) * a.ldy + n0[i], mask, acc[r][i][0]);
  }
}

/// Input rows [m0, m1) times the NB unpacked blocks: kTileRows rows at a time, then one by one.
template <int NB>
void tiles_over_rows(const DotArgs& a, std::int64_t m0, std::int64_t m1, const __m256i* const (&wb)[NB], const float* const (&sb)[NB],
                     const std::int64_t (&n0)[NB], const std::int64_t (&valid)[NB]) {
  std::int64_t m = m0;
  for (; m + kTileRows <= m1; m += kTileRows) tile<kTileRows, NB>(a, m, wb, sb, n0, valid);
  for (; m < m1; ++m) tile<1, NB>(a, m, wb, sb, n0, valid);
}

}  // namespace

void dot_tiles_avx2(const DotArgs& a, std::int64_t m0, std::int64_t m1, std::int64_t n0, std::int64_t n1) {
  const std::int64_t G = a.K / kGroup;
  // The unpacked blocks of this call's weight rows (per thread; grows only).
  struct alignas(32) Vec8 {
    std::int32_t lane[8];
  };
  static thread_local std::vector<Vec8> code_store;
  static thread_local std::vector<float> scale_store;
  const std::int64_t blocks = (n1 - n0 + kTileLanes - 1) / kTileLanes;
  if (code_store.size() < static_cast<std::size_t>(blocks * G * kPairsPerGroup))
    code_store.resize(static_cast<std::size_t>(blocks * G * kPairsPerGroup));
  if (scale_store.size() < static_cast<std::size_t>(blocks * G * kTileLanes))
    scale_store.resize(static_cast<std::size_t>(blocks * G * kTileLanes));
  auto* codes = reinterpret_cast<__m256i*>(code_store.data());
  float* scales = scale_store.data();
  for (std::int64_t b = 0; b < blocks; ++b)
    unpack_block(a, n0 + b * kTileLanes, std::min<std::int64_t>(kTileLanes, n1 - n0 - b * kTileLanes), codes + b * G * kPairsPerGroup,
                 scales + b * G * kTileLanes);
  // Block b's unpacked codes and scales, its first weight row and how many rows it holds.
  auto block = [&](std::int64_t b, const __m256i*& wb, const float*& sb, std::int64_t& first, std::int64_t& valid) {
    wb = codes + b * G * kPairsPerGroup;
    sb = scales + b * G * kTileLanes;
    first = n0 + b * kTileLanes;
    valid = std::min<std::int64_t>(kTileLanes, n1 - first);
  };
  std::int64_t b = 0;
  for (; b + 2 <= blocks; b += 2) {  // two blocks per tile
    const __m256i* wb[2];
    const float* sb[2];
    std::int64_t first[2], valid[2];
    for (int i = 0; i < 2; ++i) block(b + i, wb[i], sb[i], first[i], valid[i]);
    tiles_over_rows<2>(a, m0, m1, wb, sb, first, valid);
  }
  if (b < blocks) {  // an odd last block
    const __m256i* wb[1];
    const float* sb[1];
    std::int64_t first[1], valid[1];
    block(b, wb[0], sb[0], first[0], valid[0]);
    tiles_over_rows<1>(a, m0, m1, wb, sb, first, valid);
  }
}

void quantize_rows_avx2(const float* x, std::int64_t ldx, std::int64_t M, std::int64_t K, std::int8_t* xq, std::int8_t* xl, float* sx) {
  const std::int64_t G = K / kGroup;
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 big = _mm256_set1_ps(FLT_MAX);
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i lim_hi = _mm256_set1_epi32(127), lim_lo = _mm256_set1_epi32(-127);
  for (std::int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * ldx;
    for (std::int64_t g = 0; g < G; ++g) {
      const float* xg = xr + g * 32;
      const __m256 v0 = _mm256_loadu_ps(xg), v1 = _mm256_loadu_ps(xg + 8), v2 = _mm256_loadu_ps(xg + 16), v3 = _mm256_loadu_ps(xg + 24);
      const __m256 a0 = _mm256_and_ps(v0, abs_mask), a1 = _mm256_and_ps(v1, abs_mask);
      const __m256 a2 = _mm256_and_ps(v2, abs_mask), a3 = _mm256_and_ps(v3, abs_mask);
      // Non-finite (NaN or ±Inf) anywhere in the group: "not ≤ FLT_MAX", unordered-true.
      const __m256 bad = _mm256_or_ps(_mm256_or_ps(_mm256_cmp_ps(a0, big, _CMP_NLE_UQ), _mm256_cmp_ps(a1, big, _CMP_NLE_UQ)),
                                      _mm256_or_ps(_mm256_cmp_ps(a2, big, _CMP_NLE_UQ), _mm256_cmp_ps(a3, big, _CMP_NLE_UQ)));
      std::int8_t* q = xq + m * K + g * 32;
      std::int8_t* ql = xl + m * K + g * 32;
      if (_mm256_movemask_ps(bad) != 0) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), _mm256_setzero_si256());
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(ql), _mm256_setzero_si256());
        sx[m * G + g] = __builtin_nanf("");
        continue;
      }
      __m256 mx = _mm256_max_ps(_mm256_max_ps(a0, a1), _mm256_max_ps(a2, a3));
      __m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
      h = _mm_max_ps(h, _mm_movehl_ps(h, h));
      h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
      const float amax = _mm_cvtss_f32(h);
      const float sc = amax / 127.0f;
      const float inv = activation_inverse(amax);
      sx[m * G + g] = sc * (1.0f / 256.0f);
      const __m256 vi = _mm256_set1_ps(inv), vi256 = _mm256_set1_ps(inv * 256.0f), vs = _mm256_set1_ps(sc);
      const __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, vi)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, vi));
      const __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, vi)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, vi));
      const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), _mm256_permutevar8x32_epi32(p, perm));
      // Residual codes: clamp(rne(fma(−qh, s, x) · inv·256), −127, 127).
      auto lo = [&](__m256i qh, __m256 v) {
        const __m256 r = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(qh), vs, v);
        return _mm256_max_epi32(lim_lo, _mm256_min_epi32(lim_hi, _mm256_cvtps_epi32(_mm256_mul_ps(r, vi256))));
      };
      const __m256i l = _mm256_packs_epi16(_mm256_packs_epi32(lo(i0, v0), lo(i1, v1)), _mm256_packs_epi32(lo(i2, v2), lo(i3, v3)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(ql), _mm256_permutevar8x32_epi32(l, perm));
    }
  }
}

}  // namespace mamba::ops::cpu::quant
