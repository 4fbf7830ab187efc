// AVX2 kernels of the quantized linear (computation defined in quant_kernels.h): activation
// quantization, and the integer dot products by vpmaddwd (int16 weights or nibbles × the 16-bit
// activations) into int32.
#include <immintrin.h>

#include <cfloat>
#include <cstdint>

#include "ops/cpu/quant_kernels.h"

namespace mamba::ops::cpu::quant {

namespace {
inline __m256i madd16_acc(__m256i acc, __m256i a, __m256i b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
}  // namespace

#define MAMBA_QDOT_ROWS dot_rows_avx2
#include "ops/cpu/linear_quantized_kernel.inc"
#undef MAMBA_QDOT_ROWS

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
      const float inv = amax == 0.0f ? 0.0f : 127.0f / amax;
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
