// AVX-512 VNNI kernel of the quantized linear (computation defined in quant_kernels.h): the AVX2
// kernel with each int16 multiply-add fused into its int32 accumulation by vpdpwssd (256-bit,
// AVX512VL + VNNI), and q8 through byte dot products (below). Same int32 sums, same fp32 order →
// bitwise equal to every other target.
// GCC 12 reports its own _mm*_undefined_*() helpers (inside the intrinsics headers) as "(maybe)
// uninitialized" once they are inlined here: a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cstdint>

#include "ops/cpu/quant_kernels.h"

namespace mamba::ops::cpu::quant {

namespace {
inline __m256i madd16_acc(__m256i acc, __m256i a, __m256i b) { return _mm256_dpwssd_epi32(acc, a, b); }

/// q8: the 8 group sums isum_g .. isum_g+7 of one weight row (g a multiple of 8), lane j = group
/// g + j. 64 codes (two groups) per zmm, flipped to u8 (w ^ 0x80 = w + 128) and multiplied by the
/// activation codes qh, ql as s8 by vpdpbusd (4 products per int32 lane, no widening shuffles):
/// lane = 256 · Σ (w + 128) · qh + Σ (w + 128) · ql; minus 128 · xsum_g after the lanes of each
/// group are summed (exact int32 throughout: |Σ_g (w + 128) · X16| ≤ 32 · 255 · 32639 < 2^31).
/// This needs half the vector ops of the 16-bit path's sign extension + vpdpwssd (Zen 5: q8 decode
/// was compute-bound at ~9 codes per cycle per core there).
inline __m256i q8_isum8_vnni(const PackedX& px, const std::int8_t* w, std::int64_t g) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i t[4];  // t[j]: 128-bit quarters 0–1 partial sums of group g + 2j, quarters 2–3 of g + 2j + 1
  for (int j = 0; j < 4; ++j) {
    const std::int64_t k = (g + 2 * j) * 32;
    const __m512i wu = _mm512_xor_si512(_mm512_loadu_si512(w + k), flip);
    const __m512i hi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wu, _mm512_loadu_si512(px.xq + k));
    t[j] = _mm512_dpbusd_epi32(_mm512_slli_epi32(hi, 8), wu, _mm512_loadu_si512(px.xl + k));
  }
  // Quarters → one group per quarter: [g, g+1, g+2, g+3] and [g+4 .. g+7], 4 lanes each.
  const __m512i p = _mm512_add_epi32(_mm512_shuffle_i32x4(t[0], t[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                     _mm512_shuffle_i32x4(t[0], t[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i q = _mm512_add_epi32(_mm512_shuffle_i32x4(t[2], t[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                     _mm512_shuffle_i32x4(t[2], t[3], _MM_SHUFFLE(3, 1, 3, 1)));
  // Per quarter i: [p lanes 0+2, 1+3, q lanes 0+2, 1+3], then adjacent pairs: lane 0 = group g + i,
  // lane 2 = group g + 4 + i.
  __m512i s = _mm512_add_epi32(_mm512_unpacklo_epi64(p, q), _mm512_unpackhi_epi64(p, q));
  s = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_CDAB));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m256i sums = _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, s));
  return _mm256_sub_epi32(sums, _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(px.xsum + g)), 7));
}
}  // namespace

#define MAMBA_Q8_ISUM8 q8_isum8_vnni
#define MAMBA_QDOT_ROWS dot_rows_avx512vnni
#include "ops/cpu/linear_quantized_kernel.inc"
#undef MAMBA_QDOT_ROWS
#undef MAMBA_Q8_ISUM8

}  // namespace mamba::ops::cpu::quant
