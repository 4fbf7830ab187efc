// Width-generic fp32 SIMD vectors for the forward-pass kernels (scan, SSD, conv, elementwise).
//
// Include this header only from a translation unit compiled for one ISA (kernels_*.cc via
// kernels_impl.inc; linear_bf16dot_avx512bf16.cc for its softplus epilogue) after defining
// MAMBA_SIMD_BYTES = 16 (baseline SSE2), 32 (AVX2+FMA) or 64 (AVX-512F). Everything here is in an
// anonymous namespace, so each ISA's TU gets its own copy (cpu_target.h's rule: no shared inline
// code between ISA flags). The vector type is GCC's vector extension, which lowers to the ISA's
// registers; `fmadd` is a fused multiply-add where the ISA has one (a·b + c, two roundings on SSE2).
//
// vexp: accurate exp (Cephes expf scheme: x = n·ln2 + r with a two-constant Cody–Waite split,
// degree-6 polynomial on |r| ≤ ln2/2, then ·2ⁿ through the exponent bits, or one vscalefps with
// 64-byte vectors); max error ≤ 2 ulp
// against the correctly rounded result over [−86.6, 88.7] (tests/ops/forward_kernels_test.cc).
// Below −86.6 it returns 0 (the true value is < 2.6e−38), above 88.72 +inf; NaN → NaN.
// vexp2_nonpos: 2^x for x ≤ 0 (the scan's decay, whose A is pre-scaled by log2 e), fewer operations
// than vexp (no ln 2 reduction, no blends, a degree-5 polynomial), relative error ≤ 1.44·2⁻²³
// (1.62·2⁻²³ on SSE2, without FMA).
#pragma once

#if !defined(MAMBA_SIMD_BYTES)
#error "define MAMBA_SIMD_BYTES (16, 32 or 64) before including ops/cpu/simd.h"
#endif

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <limits>

namespace {

constexpr int kLanes = MAMBA_SIMD_BYTES / 4;
typedef float vf __attribute__((vector_size(MAMBA_SIMD_BYTES), aligned(4), may_alias));
typedef std::int32_t vi __attribute__((vector_size(MAMBA_SIMD_BYTES), aligned(4), may_alias));

inline vf vset1(float x) { return x - vf{}; }  // x − 0 = x exactly (also −0), folds to a broadcast
inline vf vload(const float* p) { return *reinterpret_cast<const vf*>(p); }
inline void vstore(float* p, vf v) { *reinterpret_cast<vf*>(p) = v; }
#if MAMBA_SIMD_BYTES == 32
/// Lanes [0, n) set (all bits), the rest clear: the mask operand of vmaskmovps, n ∈ [0, 8].
inline __m256i tail_mask(std::int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#endif
/// First n < kLanes lanes from p, the rest 0 (nothing past p + n is touched: masked moves never
/// fault on their masked-off lanes). AVX-512 / AVX2 use the ISA's masked moves (a memcpy through a
/// stack buffer cost a library call and a store-forwarding stall per row tail: the SSD's decay rows,
/// one tail per row, ran several times slower); SSE2 has none and keeps the copy.
inline vf vload_part(const float* p, std::int64_t n) {
#if MAMBA_SIMD_BYTES == 64
  return reinterpret_cast<vf>(_mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1u), p));
#elif MAMBA_SIMD_BYTES == 32
  return reinterpret_cast<vf>(_mm256_maskload_ps(p, tail_mask(n)));
#else
  float t[kLanes] = {};
  std::memcpy(t, p, sizeof(float) * std::size_t(n));
  return vload(t);
#endif
}
inline void vstore_part(float* p, vf v, std::int64_t n) {
#if MAMBA_SIMD_BYTES == 64
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1u), reinterpret_cast<__m512>(v));
#elif MAMBA_SIMD_BYTES == 32
  _mm256_maskstore_ps(p, tail_mask(n), reinterpret_cast<__m256>(v));
#else
  float t[kLanes];
  vstore(t, v);
  std::memcpy(p, t, sizeof(float) * std::size_t(n));
#endif
}
inline vf vload_n(const float* p, std::int64_t n) { return n >= kLanes ? vload(p) : vload_part(p, n); }
inline void vstore_n(float* p, vf v, std::int64_t n) {
  if (n >= kLanes)
    vstore(p, v);
  else
    vstore_part(p, v, n);
}

inline vf fmadd(vf a, vf b, vf c) {
#if MAMBA_SIMD_BYTES == 64
  return _mm512_fmadd_ps(a, b, c);
#elif MAMBA_SIMD_BYTES == 32
  return _mm256_fmadd_ps(a, b, c);
#else
  return a * b + c;
#endif
}

/// One lane of fmadd: the same rounding(s) as the vector version on this target.
inline float fmadd1(float a, float b, float c) {
#if MAMBA_SIMD_BYTES >= 32
  return __builtin_fmaf(a, b, c);
#else
  return a * b + c;
#endif
}

/// a > b ? a : b and a < b ? a : b lane-wise (b when the lanes are equal, ±0 included, or either is
/// NaN): exactly what maxps / minps return, so they are those instructions (GCC lowered the
/// comparison to a compare and a blend, two operations in the scan's inner loop). Checked over
/// all 2³² values of a against ±0, ±inf, NaNs, denormals and others, every width. (With the
/// MXCSR's denormals-are-zero mode on — never set here — maxps flushes a denormal operand first.)
inline vf vmax(vf a, vf b) {
#if MAMBA_SIMD_BYTES == 64
  return reinterpret_cast<vf>(_mm512_max_ps(reinterpret_cast<__m512>(a), reinterpret_cast<__m512>(b)));
#elif MAMBA_SIMD_BYTES == 32
  return reinterpret_cast<vf>(_mm256_max_ps(reinterpret_cast<__m256>(a), reinterpret_cast<__m256>(b)));
#else
  return reinterpret_cast<vf>(_mm_max_ps(reinterpret_cast<__m128>(a), reinterpret_cast<__m128>(b)));
#endif
}
inline vf vmin(vf a, vf b) {
#if MAMBA_SIMD_BYTES == 64
  return reinterpret_cast<vf>(_mm512_min_ps(reinterpret_cast<__m512>(a), reinterpret_cast<__m512>(b)));
#elif MAMBA_SIMD_BYTES == 32
  return reinterpret_cast<vf>(_mm256_min_ps(reinterpret_cast<__m256>(a), reinterpret_cast<__m256>(b)));
#else
  return reinterpret_cast<vf>(_mm_min_ps(reinterpret_cast<__m128>(a), reinterpret_cast<__m128>(b)));
#endif
}

/// Sum of the lanes in a fixed pairwise order (deterministic): t[i] += t[i + w] for i < w, w =
/// kLanes/2, …, 1; result t[0]. In registers (halves, then 128-bit shuffles).
inline float hsum(vf v) {
#if MAMBA_SIMD_BYTES == 64
  // Halves by vector shuffles (the _mm512 cast/extract intrinsics trip GCC 12's uninitialized warning).
  typedef float v8 __attribute__((vector_size(32)));
  const v8 lo = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
  const v8 hi = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m256 y = reinterpret_cast<__m256>(lo + hi);
#elif MAMBA_SIMD_BYTES == 32
  const __m256 y = reinterpret_cast<__m256>(v);
#endif
#if MAMBA_SIMD_BYTES >= 32
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(y), _mm256_extractf128_ps(y, 1));
#else
  __m128 s = reinterpret_cast<__m128>(v);
#endif
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

/// log2(e) rounded to fp32: the Mamba-1 scan takes exp(Δ·A) as 2^(Δ·fl(A·log2 e)) (vexp2_nonpos).
constexpr float kLog2e = 1.44269504088896341f;

/// x rounded to the nearest integer (ties to even), |x| < 2²².
inline vf vround(vf x) {
#if MAMBA_SIMD_BYTES == 64
  return reinterpret_cast<vf>(
      _mm512_roundscale_ps(reinterpret_cast<__m512>(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#else
  const vf magic = vset1(12582912.0f);  // 1.5·2²³: the same rounding by an add and a subtract
  return (x + magic) - magic;
#endif
}

/// 2^(n + r) for integral n ∈ [−125, 128] and r ∈ [−½, ½] (a little beyond is fine): 2^r by a
/// degree-6 near-minimax polynomial (relative error 2e−9 before fp32 rounding), then ·2ⁿ: one
/// vscalefps with 64-byte vectors, else ·2ⁿ⁻¹·2 through the exponent field (n + 126 ∈ [1, 254], so
/// n = 128 stays finite) — the same value wherever the result is a normal float; below 2⁻¹²⁵ the
/// narrower widths round a subnormal intermediate, vscalefps does not.
inline vf vexp2_parts(vf n, vf r) {
  vf p = vset1(1.5353361960e-4f);
  p = fmadd(p, r, vset1(1.3398875017e-3f));
  p = fmadd(p, r, vset1(9.6184369177e-3f));
  p = fmadd(p, r, vset1(5.5503323674e-2f));
  p = fmadd(p, r, vset1(2.4022647738e-1f));
  p = fmadd(p, r, vset1(6.9314718246e-1f));
  p = fmadd(p, r, vset1(1.0f));
#if MAMBA_SIMD_BYTES == 64
  return reinterpret_cast<vf>(_mm512_scalef_ps(reinterpret_cast<__m512>(p), reinterpret_cast<__m512>(n)));
#else
  const vi bits = (__builtin_convertvector(n, vi) + 126) << 23;
  vf scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return (p * scale) * vset1(2.0f);
#endif
}

/// exp(xc) for xc already clamped to [−86.6, 88.7228]: n = round(x·log2 e), r = x − n·ln 2 by a
/// two-constant Cody–Waite split (exact products: n has ≤ 8 bits), then 2^(n + r·log2 e) by
/// vexp2_parts (≤ 2 ulp). The shared core of vexp, vsilu and vsoftplus.
inline vf vexp_clamped(vf xc) {
  // n by the 1.5·2²³ trick (round to nearest even, |x·log2 e| < 2²²).
  const vf magic = vset1(12582912.0f);
  const vf fn = fmadd(xc, vset1(kLog2e), magic) - magic;
  vf r = fmadd(fn, vset1(-0.693359375f), xc);
  r = fmadd(fn, vset1(2.12194440e-4f), r);
  return vexp2_parts(fn, r * vset1(kLog2e));
}

inline vf vexp(vf x) {
  const vf hi = vset1(88.72283935546875f), lo = vset1(-86.6f);
  vf out = vexp_clamped(vmin(vmax(x, lo), hi));
  out = x < lo ? vf{} : out;
  out = x > hi ? vset1(__builtin_inff()) : out;
  return x != x ? x : out;  // NaN in, NaN out
}


/// 2^x for x ≤ 0 that is never NaN (the Mamba-1 scan's decay Δ·A·log2 e: Δ ≥ 0, A = −exp(A_log) < 0
/// and checked finite at load; a NaN Δ still reaches the state through Δ·u·B). x is clamped to
/// −125 (below, 2⁻¹²⁵ ≈ 2.4e−38 instead of a smaller number: negligible next to any other term of
/// the update), then n = round(x), r = x − n ∈ [−½, ½] exactly, 2^r by a degree-5 polynomial with
/// p(0) = 1 exactly (Lawson near-minimax for the relative error: 1.08e−7 with its fp32 coefficients
/// before the arithmetic's rounding, ≤ 1.44·2⁻²³ after the fp32 Horner steps with FMA, 1.62·2⁻²³
/// on the baseline target's two roundings per step, at |r| = ½; near x = 0, the decays that carry long
/// memory, p = 1 + ln2·r + … is nearly exact), then ·2ⁿ exactly (p·2ⁿ ≥ 2⁻¹²⁵·√½ is normal): one
/// vscalefps with 64-byte vectors, 2ⁿ built in the exponent field otherwise (the same values).
/// Base 2 spares vexp's ln 2 reduction (two FMAs); degree 5 instead of vexp's 6 one more: the
/// prefill scan's update runs at ~6 cycles per 16 channels × 1 state on Zen 5 (vexp: 11; degree 6: 7).
inline vf vexp2_nonpos(vf x) {
  x = vmax(x, vset1(-125.0f));
  const vf n = vround(x);
  const vf r = x - n;
  vf p = vset1(1.3264728477e-3f);
  p = fmadd(p, r, vset1(9.6715129912e-3f));
  p = fmadd(p, r, vset1(5.5507335812e-2f));
  p = fmadd(p, r, vset1(2.4022242427e-1f));
  p = fmadd(p, r, vset1(6.9314700365e-1f));
  p = fmadd(p, r, vset1(1.0f));
#if MAMBA_SIMD_BYTES == 64
  return reinterpret_cast<vf>(_mm512_scalef_ps(reinterpret_cast<__m512>(p), reinterpret_cast<__m512>(n)));
#else
  const vi bits = (__builtin_convertvector(n, vi) + 127) << 23;  // 2ⁿ, n + 127 ∈ [2, 127]
  vf scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
#endif
}

/// x / (1 + exp(−x)), the PyTorch SiLU formula. exp(−x) is taken on −x clamped to vexp's finite
/// range without vexp's blends: bitwise vexp's value there; below the range the quotient is x /
/// (1 + 3.4e38) instead of x / inf (a tiny number instead of −0, as the true silu is tiny too);
/// above it x / (1 + 2.6e−38) = x; NaN stays NaN through the division.
inline vf vsilu(vf x) {
  const vf e = vexp_clamped(vmin(vmax(-x, vset1(-86.6f)), vset1(88.72283935546875f)));
  return x / (vset1(1.0f) + e);
}

/// PyTorch softplus: x > 20 → x, else log1p(exp(x)), as max(x, 0) + log1p(v) with v = e^−|x| ∈ (0, 1]
/// (vexp's core, clamped at −86.6) and log1p(v) = 2·atanh(s), s = v / (2 + v) ∈ (0, ⅓], by a degree-4 near-minimax
/// polynomial in s² (relative error 4e−9): no range reduction and no rounding correction for small
/// v (s ≈ v/2 keeps its relative accuracy). ≤ 5 ulp over [−86, 20] against the correctly rounded
/// value; 2.4× faster than the log(1 + v)·v/((1 + v) − 1) form on Zen 5. NaN stays NaN; below −86.6
/// it returns ≈ 2.6e−38 instead of a smaller number.
inline vf vsoftplus(vf x) {
  const vf v = vexp_clamped(vmax(-vmax(x, -x), vset1(-86.6f)));
  const vf s = v / (vset1(2.0f) + v);
  const vf t = s * s;
  vf q = vset1(1.4089167118e-1f);
  q = fmadd(q, t, vset1(1.3980300725e-1f));
  q = fmadd(q, t, vset1(2.0012454689e-1f));
  q = fmadd(q, t, vset1(3.3333158493e-1f));
  q = fmadd(q, t, vset1(1.0f));
  const vf sp = vmax(x, vf{}) + (s + s) * q;
  const vf out = x > vset1(20.0f) ? x : sp;
  return x != x ? x : out;
}

/// clamp(softplus(v), lo, hi) with NaN kept NaN (the operands' order: maxps / minps return the second
/// when either is NaN), as ops::ref::softplus_clamp: softplus_clamp_row's value, the scans' Δ with
/// dt_softplus and the bf16 tier's linear_softplus epilogue (lo = 0, hi = +inf), bitwise alike.
inline vf vsoftplus_clamp(vf v, vf lo, vf hi) { return vmin(hi, vmax(lo, vsoftplus(v))); }

}  // namespace
