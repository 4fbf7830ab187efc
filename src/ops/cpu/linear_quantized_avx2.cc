// AVX2 kernels of the quantized linear (computation defined in quant_kernels.h): activation
// quantization, and the integer dot products by vpmaddwd (int16 weights or nibbles × the 16-bit
// activations) into int32.
#include <immintrin.h>

#include <cfloat>
#include <cstdint>

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
  return {row_at(a.px.x16, m, K), row_at(a.px.x16n, m, K), row_at(a.px.xsum, m, K / 32), row_at(a.px.xq, m, K),
          row_at(a.px.xl, m, K)};
}
}  // namespace

void dot_rows_avx2(const DotArgs& a, std::int64_t m0, std::int64_t m1, std::int64_t n0, std::int64_t n1) {
  const std::int64_t G = a.K / 32;
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

void quantize_rows_avx2(const float* x, std::int64_t ldx, std::int64_t M, std::int64_t K, std::int8_t* xq, std::int8_t* xl, float* sx) {
  const std::int64_t G = K / 32;
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
