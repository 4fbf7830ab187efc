// AVX-512 VNNI kernel of the quantized linear (computation defined in quant_kernels.h): the AVX2
// kernel with each int16 multiply-add fused into its int32 accumulation by vpdpwssd (256-bit,
// AVX512VL + VNNI), and the 8 group sums of q8 and q4 through byte dot products (below). Same
// int32 sums, same fp32 order → bitwise equal to every other target.

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

/// The 8 group sums (lane j = group g + j) of four vectors of vpdpbusd partial sums, t[j] covering
/// groups g + 2j and g + 2j + 1: kSplitHalves (q8, k order) → quarters 0–1 hold the first group,
/// 2–3 the second; otherwise (q4, low nibbles then high ones) quarters 0 and 2 the first, 1 and 3
/// the second. Integer adds: exact in any order.
template <bool kSplitHalves>
inline __m256i group_sums8(const __m512i (&t)[4]) {
  constexpr int kA = kSplitHalves ? _MM_SHUFFLE(2, 0, 2, 0) : _MM_SHUFFLE(1, 0, 1, 0);
  constexpr int kB = kSplitHalves ? _MM_SHUFFLE(3, 1, 3, 1) : _MM_SHUFFLE(3, 2, 3, 2);
  // One group per quarter: p = [g, g+1, g+2, g+3], q = [g+4 .. g+7], 4 lanes each.
  const __m512i p = _mm512_add_epi32(_mm512_shuffle_i32x4(t[0], t[1], kA), _mm512_shuffle_i32x4(t[0], t[1], kB));
  const __m512i q = _mm512_add_epi32(_mm512_shuffle_i32x4(t[2], t[3], kA), _mm512_shuffle_i32x4(t[2], t[3], kB));
  // Per quarter i: [p lanes 0+2, 1+3, q lanes 0+2, 1+3], then adjacent pairs: lane 0 = group g + i,
  // lane 2 = group g + 4 + i.
  __m512i s = _mm512_add_epi32(_mm512_unpacklo_epi64(p, q), _mm512_unpackhi_epi64(p, q));
  s = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_CDAB));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, s));
}

/// 256 · Σ a·qh + Σ a·ql per int32 lane (4 byte products each): a as u8, qh / ql as s8.
inline __m512i dot_x16(__m512i a, const std::int8_t* qh, const std::int8_t* ql) {
  const __m512i hi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), a, _mm512_loadu_si512(qh));
  return _mm512_dpbusd_epi32(_mm512_slli_epi32(hi, 8), a, _mm512_loadu_si512(ql));
}

/// q8: the 8 group sums isum_g .. isum_g+7 of one weight row (g a multiple of 8), lane j = group
/// g + j. 64 codes (two groups) per zmm, flipped to u8 (w ^ 0x80 = w + 128) and multiplied by the
/// activation codes qh, ql as s8 by vpdpbusd (4 products per int32 lane, no widening shuffles):
/// lane = 256 · Σ (w + 128) · qh + Σ (w + 128) · ql; minus 128 · xsum_g after the lanes of each
/// group are summed (exact int32 throughout: |Σ_g (w + 128) · X16| ≤ 32 · 255 · 32639 < 2^31).
/// This needs half the vector ops of the 16-bit path's sign extension + vpdpwssd (Zen 5: q8 decode
/// was compute-bound at ~9 codes per cycle per core there).
inline __m256i q8_isum8_vnni(const PackedX& px, const std::int8_t* w, std::int64_t g) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i t[4];
  for (int j = 0; j < 4; ++j) {
    const std::int64_t k = (g + 2 * j) * 32;
    t[j] = dot_x16(_mm512_xor_si512(_mm512_loadu_si512(w + k), flip), px.xq + k, px.xl + k);
  }
  const __m256i xsum = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(px.xsum + g));
  return _mm256_sub_epi32(group_sums8<true>(t), _mm256_slli_epi32(xsum, 7));
}

/// q4: the same for nibbles u = q + 8 ∈ [0, 15] as u8: a pair's 32 bytes broadcast to both halves
/// of a zmm, the low half shifted by 0 and the high half by 4 (vpsrlvw), masked to 4 bits: the low
/// nibbles (even k) then the high ones (odd k), against qh / ql in that order (xqn / xln); minus
/// 8 · xsum_g (|Σ_g u · X16| ≤ 32 · 15 · 32639).
inline __m256i q4_isum8_vnni(const PackedX& px, const std::uint8_t* w, std::int64_t g) {
  const __m512i shifts = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
  const __m512i nib = _mm512_set1_epi8(0x0F);
  __m512i t[4];
  for (int j = 0; j < 4; ++j) {
    const std::int64_t k = (g + 2 * j) * 32;
    const __m512i b = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k / 2)));
    t[j] = dot_x16(_mm512_and_si512(_mm512_srlv_epi16(b, shifts), nib), px.xqn + k, px.xln + k);
  }
  const __m256i xsum = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(px.xsum + g));
  return _mm256_sub_epi32(group_sums8<false>(t), _mm256_slli_epi32(xsum, 3));
}
}  // namespace

#define MAMBA_Q8_ISUM8 q8_isum8_vnni
#define MAMBA_Q4_ISUM8 q4_isum8_vnni
#define MAMBA_QDOT_ROWS dot_rows_avx512vnni
#include "ops/cpu/linear_quantized_kernel.inc"
#undef MAMBA_QDOT_ROWS
#undef MAMBA_Q8_ISUM8
#undef MAMBA_Q4_ISUM8

}  // namespace mamba::ops::cpu::quant
