// Width-generic fp32 SIMD vectors for the forward-pass kernels (scan, SSD, conv, elementwise).
//
// Include this header only from a kernel translation unit (mamba_kernels_*.cc) after defining
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
#pragma once

#if !defined(MAMBA_SIMD_BYTES)
#error "define MAMBA_SIMD_BYTES (16, 32 or 64) before including ops/cpu/simd.h"
#endif

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace {

constexpr int kLanes = MAMBA_SIMD_BYTES / 4;
typedef float vf __attribute__((vector_size(MAMBA_SIMD_BYTES), aligned(4), may_alias));
typedef std::int32_t vi __attribute__((vector_size(MAMBA_SIMD_BYTES), aligned(4), may_alias));

inline vf vset1(float x) { return x - vf{}; }  // x − 0 = x exactly (also −0), folds to a broadcast
inline vf vload(const float* p) { return *reinterpret_cast<const vf*>(p); }
inline void vstore(float* p, vf v) { *reinterpret_cast<vf*>(p) = v; }
/// First n < kLanes lanes from p, the rest 0.
inline vf vload_part(const float* p, std::int64_t n) {
  float t[kLanes] = {};
  std::memcpy(t, p, sizeof(float) * std::size_t(n));
  return vload(t);
}
inline void vstore_part(float* p, vf v, std::int64_t n) {
  float t[kLanes];
  vstore(t, v);
  std::memcpy(p, t, sizeof(float) * std::size_t(n));
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

inline vf vmax(vf a, vf b) { return a > b ? a : b; }
inline vf vmin(vf a, vf b) { return a < b ? a : b; }

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

/// exp(xc) for xc already clamped to [−86.6, 88.7228]: Cody–Waite reduction, degree-6 polynomial,
/// ·2ⁿ (≤ 2 ulp). The shared core of vexp and vsilu.
inline vf vexp_clamped(vf xc) {
  // n = round(x / ln2) by the 1.5·2²³ trick (round to nearest even, |x/ln2| < 2²²).
  const vf magic = vset1(12582912.0f);
  const vf fn = fmadd(xc, vset1(1.44269504088896341f), magic) - magic;
  vf r = fmadd(fn, vset1(-0.693359375f), xc);
  r = fmadd(fn, vset1(2.12194440e-4f), r);
  vf p = vset1(1.9875691500e-4f);
  p = fmadd(p, r, vset1(1.3981999507e-3f));
  p = fmadd(p, r, vset1(8.3334519073e-3f));
  p = fmadd(p, r, vset1(4.1665795894e-2f));
  p = fmadd(p, r, vset1(1.6666665459e-1f));
  p = fmadd(p, r, vset1(5.0000001201e-1f));
  const vf e = fmadd(p, r * r, r) + vset1(1.0f);
#if MAMBA_SIMD_BYTES == 64
  // ·2ⁿ in one vscalefps (AVX-512F) instead of convert, add, shift and two multiplies: the same
  // value wherever the result is a normal float (both exact); for x < −86.3 (results < 2⁻¹²⁵) the
  // other widths round a subnormal intermediate e·2ⁿ⁻¹, this form does not.
  return reinterpret_cast<vf>(_mm512_scalef_ps(reinterpret_cast<__m512>(e), reinterpret_cast<__m512>(fn)));
#else
  // ·2ⁿ for n ∈ [−125, 128] as ·2ⁿ⁻¹·2 (exponent field n + 126 ∈ [1, 254], so n = 128 stays finite).
  const vi n = __builtin_convertvector(fn, vi);
  const vi bits = (n + 126) << 23;
  vf scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return (e * scale) * vset1(2.0f);
#endif
}

inline vf vexp(vf x) {
  const vf hi = vset1(88.72283935546875f), lo = vset1(-86.6f);
  vf out = vexp_clamped(vmin(vmax(x, lo), hi));
  out = x < lo ? vf{} : out;
  out = x > hi ? vset1(__builtin_inff()) : out;
  return x != x ? x : out;  // NaN in, NaN out
}

/// log2(e) rounded to fp32: the Mamba-1 scan takes exp(Δ·A) as 2^(Δ·fl(A·log2 e)) (vexp2_nonpos).
constexpr float kLog2e = 1.44269504088896341f;

/// 2^x for x ≤ 0 that is never NaN (the Mamba-1 scan's decay Δ·A·log2 e: Δ ≥ 0, A = −exp(A_log) < 0
/// and checked finite at load; a NaN Δ still reaches the state through Δ·u·B). x is clamped to
/// −126 (below, 2⁻¹²⁶ ≈ 1.2e−38 instead of a smaller number: negligible next to any other term of
/// the update), n = x rounded to nearest (even), r = x − n ∈ [−½, ½] exactly, 2^r by a degree-6
/// near-minimax polynomial (relative error 2e−9 before fp32 rounding), then ·2ⁿ (n ∈ [−126, 0]):
/// ≤ 1.5 ulp against the correctly rounded 2^x. Base 2 spares vexp's ln 2 reduction (two FMAs) and
/// its r² split: the prefill scan's update runs 1.5× faster on Zen 5 (11 → 7 cycles per vector).
inline vf vexp2_nonpos(vf x) {
  x = vmax(x, vset1(-126.0f));
#if MAMBA_SIMD_BYTES == 64
  const vf n = reinterpret_cast<vf>(
      _mm512_roundscale_ps(reinterpret_cast<__m512>(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#else
  const vf magic = vset1(12582912.0f);  // 1.5·2²³: the same round-to-nearest-even for |x| < 2²²
  const vf n = (x + magic) - magic;
#endif
  const vf r = x - n;
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
  // 2ⁿ through the exponent field (n + 127 ∈ [1, 127]); p·2ⁿ is rounded once, as vscalefps does.
  const vi bits = (__builtin_convertvector(n, vi) + 127) << 23;
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

/// Natural log for x > 0 finite (Cephes logf scheme: x = m·2ᵉ with m ∈ [√½, √2), degree-8
/// polynomial in m − 1); ≤ 2 ulp. Only used by vsoftplus on [1, 2].
inline vf vlog(vf x) {
  vi bits;
  std::memcpy(&bits, &x, sizeof(bits));
  vi e = ((bits >> 23) & 0xff) - 126;
  bits = (bits & 0x007fffff) | 0x3f000000;  // mantissa in [0.5, 1)
  vf m;
  std::memcpy(&m, &bits, sizeof(m));
  const vi small = m < vset1(0.707106781186547524f);
  e = small ? e - 1 : e;
  m = small ? m + m : m;
  m = m - vset1(1.0f);
  vf p = vset1(7.0376836292e-2f);
  p = fmadd(p, m, vset1(-1.1514610310e-1f));
  p = fmadd(p, m, vset1(1.1676998740e-1f));
  p = fmadd(p, m, vset1(-1.2420140846e-1f));
  p = fmadd(p, m, vset1(1.4249322787e-1f));
  p = fmadd(p, m, vset1(-1.6668057665e-1f));
  p = fmadd(p, m, vset1(2.0000714765e-1f));
  p = fmadd(p, m, vset1(-2.4999993993e-1f));
  p = fmadd(p, m, vset1(3.3333331174e-1f));
  const vf m2 = m * m;
  const vf fe = __builtin_convertvector(e, vf);
  vf y = p * m * m2;
  y = fmadd(fe, vset1(-2.12194440e-4f), y);
  y = y - vset1(0.5f) * m2;
  return m + y + fe * vset1(0.693359375f);
}

/// PyTorch softplus: x > 20 → x, else log1p(exp(x)), as max(x, 0) + log1p(exp(−|x|)) with
/// log1p(v) = log(1 + v) · v / ((1 + v) − 1) (exact correction for the rounding of 1 + v).
inline vf vsoftplus(vf x) {
  const vf ax = vmax(x, -x);
  const vf v = vexp(-ax);
  const vf u = vset1(1.0f) + v;
  const vf d = u - vset1(1.0f);
  const vf l1p = d == vf{} ? v : vlog(u) * (v / d);
  const vf sp = vmax(x, vf{}) + l1p;
  return x > vset1(20.0f) ? x : sp;
}

}  // namespace
