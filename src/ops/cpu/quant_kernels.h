// Quantized-weight linear: the canonical int8 computation and the per-target kernels.
//
// Weights W [N, K] in mamba.cpp's q8 / q4 format (include/mamba/quantize.h): codes q_w and one F32
// scale sw per group of 32 along K. For y[m, n] with x = x[m, :] (fp32), every target computes
// exactly (so results are bitwise equal across targets, batch sizes, row sets and thread counts):
//   1. activation quantization (depends on the row only) into two int8 codes per element (a
//      coarse code and a residual code 256× finer: ≈ 16-bit activations, so the result is close to
//      fp32 activations × dequantized weights while every product stays an int8 dot product),
//      per group g of 32:
//        amax_g = max |x[k]|;  s_g = amax_g / 127;
//        inv_g = 127 / amax_g if 256 · (127 / amax_g) ≤ FLT_MAX, else 0 (amax_g = 0, or below
//                ≈ 9.6e-35: such a group's codes would overflow int8, so it contributes 0);
//        qh[k] = round_half_even(x[k] · inv_g)                      ∈ [−127, 127]
//        r[k]  = fma(−qh[k], s_g, x[k])                            (x − qh·s, one rounding)
//        ql[k] = clamp(round_half_even(r[k] · (inv_g · 256)), −127, 127)
//        sx_g  = s_g · (1/256)
//      (a non-finite amax makes sx_g NaN and the codes 0, so NaN/Inf inputs propagate to y)
//   2. isum_g = 256 · Σ_{k in g} qh[k] · q_w[n, k] + Σ_{k in g} ql[k] · q_w[n, k]
//      (exact int32: |isum_g| ≤ 257 · 32 · 127 · 127 < 2^31)
//   3. d_g = sx_g · sw[n, g]   (one fp32 multiply); float(isum_g) rounds to nearest even
//   4. G = K / 32, G8 = G − G % 8, lanes l[0..7] = +0;
//        for g in [0, G8) ascending: l[g % 8] = fma(d_g, float(isum_g), l[g % 8]);
//        tree: for s in 4, 2, 1: l[i] = l[i] + l[i + s] for i < s;  r = l[0];
//        for g in [G8, G) ascending: r = fma(d_g, float(isum_g), r);
//   5. y[m, n] = r + bias[n] (bias converted to fp32; no bias → r).
// K must be a multiple of 32 (the quantizer only quantizes such tensors).
#pragma once

#include <cfloat>
#include <cstdint>

namespace mamba::ops::cpu::quant {

/// Weights per scale along K: the stored format's group (include/mamba/quantize.h kQuantGroupSize).
inline constexpr int kGroup = 32;

// In an unnamed namespace: each file (the AVX2 and AVX-512 ones included) gets its own copy, so the
// linker never hands one compiled with wider instructions to another (cpu_target.h).
namespace {
/// Step 1's inv_g for a group's finite amax_g ≥ 0 (every target computes it by this function).
inline float activation_inverse(float amax) {
  if (!(amax > 0.0f)) return 0.0f;
  const float inv = 127.0f / amax;
  return inv * 256.0f <= FLT_MAX ? inv : 0.0f;
}
}  // namespace

/// Step 1 for one row: x[0, K) → xq[0, K) (qh), xl[0, K) (ql), sx[0, K/32). Scalar reference.
void quantize_row_ref(const float* x, std::int64_t K, std::int8_t* xq, std::int8_t* xl, float* sx);

/// Steps 2–4 for one (x row, weight row): the scalar reference. `w` points at weight row n's codes
/// (q8: K int8; q4: K/2 packed bytes), `sw` at its K/32 scales.
float dot_ref(const std::int8_t* xq, const std::int8_t* xl, const float* sx, const void* w, const float* sw, std::int64_t K, bool q4);

/// The activation codes rearranged for the SIMD kernels (filled by pack_rows from xq / xl; the
/// integer sums of step 2 do not depend on the order of the products inside a group, so every
/// layout gives the same isum_g):
///  - x16 [M, K] int16, k order: X16[k] = 256·qh[k] + ql[k] (|X16| ≤ 32639), so step 2's isum_g is
///    Σ_k q_w[k] · X16[k], one int16 multiply-add per weight (q8 kernels).
///  - x16n [M, K] int16, for q4 weights kept as their stored nibbles u = q_w + 8 ∈ [0, 15]: the
///    same X16 values in the order in which 16-bit words of packed nibbles split by shifts. Groups
///    go in pairs (g, g+1), g even, 64 values each: 4 vectors A_j (j = 0..3, the nibble at bit 4j of
///    each word) of 16 values, A_j[i] = X16[g·32 + 4i + j] for i < 8 and X16[(g+1)·32 + 4(i−8) + j]
///    for i ≥ 8; a last unpaired group takes 32 values, 4 vectors of 8, A_j[i] = X16[g·32 + 4i + j].
///  - xsum [M, K/32] int32: xsum_g = Σ_{k∈g} X16[k], the correction of offset weight codes: for q4,
///    isum_g = Σ_k u[k] · X16[k] − 8 · xsum_g.
///  - xq, xl: the rows of qh and ql as quantize_rows wrote them (k order, int8).
struct PackedX {
  const std::int16_t* x16;
  const std::int16_t* x16n;
  const std::int32_t* xsum;
  const std::int8_t* xq;
  const std::int8_t* xl;
};

/// Fills x16 (q4 = false) or x16n (q4 = true) and xsum for M rows from xq, xl [M, K] (layouts
/// above); xsum may be nullptr (not filled) when the kernel does not read it.
void pack_rows(const std::int8_t* xq, const std::int8_t* xl, std::int64_t M, std::int64_t K, bool q4, std::int16_t* x16,
               std::int16_t* x16n, std::int32_t* xsum);

/// Per-target kernels: y[m·ldy + n] = steps 2–4 for m < M, n ∈ [n0, n1), no bias. xq is [M, K]
/// (row stride K) and xl likewise, sx [M, K/32]; px the same rows packed (the SIMD kernels read
/// px, the baseline xq / xl); w/sw are the whole weight's codes / scales.
struct DotArgs {
  const std::int8_t* xq;
  const std::int8_t* xl;
  const float* sx;
  PackedX px;
  std::int64_t M, K;
  const void* w;
  const float* sw;
  bool q4;
  float* y;
  std::int64_t ldy;
};
void dot_rows_baseline(const DotArgs& a, std::int64_t m0, std::int64_t m1, std::int64_t n0, std::int64_t n1);
void dot_rows_avx2(const DotArgs& a, std::int64_t m0, std::int64_t m1, std::int64_t n0, std::int64_t n1);
/// The AVX2 kernel for several input rows (prefill, decode batches): the same y, bitwise. Weight
/// rows [n0, n1) are first unpacked into per-thread scratch (8 rows per block, int16 pairs with one
/// int32 lane per row; codes as signed values), then each unpacked vector serves every input row.
/// Reads px.x16 in k order for q4 weights as well (not x16n / xsum).
void dot_tiles_avx2(const DotArgs& a, std::int64_t m0, std::int64_t m1, std::int64_t n0, std::int64_t n1);

/// Blocked weights (the AVX-512 VNNI kernels' layout; ops::pack_weight_to makes a model's copies at
/// load, linear_quantized packs a weight that has none into scratch per call). From W [N, K]:
/// blocks of kBlockRows = 16 weight rows (the last one padded with rows of code 0 and scale 0),
/// block b = G chunks in group order, chunk g = the codes of group g for the block's 16 rows, then
/// their 16 F32 scales (lane n = sw[16b + n, g]):
///  - q8: 8 vectors of 64 bytes; vector j holds k = 32g + 4j + i (i < 4) of row 16b + n at byte
///    4n + i, as q + 128 (u8);
///  - q4: 4 vectors; vector j holds row 16b + n's k = 32g + 8j + i at byte 4n + i's low nibble and
///    k = 32g + 8j + 4 + i in its high nibble, as u = q + 8.
/// A vpdpbusd of a codes vector (u8) by 4 activation codes broadcast (s8) then sums 4 products of
/// row 16b + n in int32 lane n: a group's sums for 16 rows need no horizontal adds. Offsets are
/// corrected by xsum as for the row-major kernels (q8: −128 · xsum_g, q4: −8 · xsum_g).
inline constexpr int kBlockRows = 16;
inline constexpr std::int64_t blocked_code_bytes(bool q4) { return q4 ? 256 : 512; }
inline constexpr std::int64_t blocked_chunk_bytes(bool q4) { return blocked_code_bytes(q4) + 4 * kBlockRows; }
/// Bytes of W [N, K] in the blocked layout.
std::int64_t blocked_bytes(std::int64_t N, std::int64_t K, bool q4);
/// Writes W's codes `w` (stored layout) and scales `sw` [N, K/32] in the blocked layout to `out`
/// (blocked_bytes(N, K, q4) bytes).
void pack_blocked(const void* w, const float* sw, std::int64_t N, std::int64_t K, bool q4, std::uint8_t* out);
/// Whether linear_quantized runs the blocked kernels now (target AVX-512 with VNNI).
bool blocked_kernels_active();

/// Steps 2–5 by the blocked kernel: y[m·ldy + n] for m ∈ [m0, m1) and the rows n < N of blocks
/// [b0, b1) of `wp` (blocked layout); bias [N] fp32 or nullptr. corr [M, K/32] = (q4 ? 8 : 128) ·
/// xsum (int32). The int8 tier: `sums` (pack_a8_sums) non-null, xq = the codes c, xl unused,
/// sx = s, off = o [M, K/32], corr = (q4 ? 8 : 128) · Σ_{k∈g} c[k].
struct BlockedArgs {
  const std::int8_t* xq;
  const std::int8_t* xl;
  const float* sx;
  const std::int32_t* corr;
  std::int64_t M, K, N;
  const std::uint8_t* wp;
  bool q4;
  const float* bias;
  float* y;
  std::int64_t ldy;
  const float* off = nullptr;
  const float* sums = nullptr;
};
void dot_blocked_avx512vnni(const BlockedArgs& a, std::int64_t m0, std::int64_t m1, std::int64_t b0, std::int64_t b1);
/// Weight blocks per prefill tile of dot_blocked_avx512vnni: callers hand it ranges of this many
/// blocks (a shorter range runs one block at a time, slower).
inline constexpr std::int64_t kPrefillTileBlocks = 3;

// ---- The int8 precision tier (Precision::kInt8, README §Precision) ---------------------------------
// The same weights with 8-bit activations: one asymmetric code per element, per group g of 32:
//   lo_g = min x[k], hi_g = max x[k] (over the group);  s_g = hi_g / 255 − lo_g / 255 (fp32 ops);
//   s_g ≥ FLT_MIN: c[k] = round_half_even(min((x[k]·½ − lo_g·½) · (2 · (1 / s_g)), 255)) − 128
//   (halved: x − lo overflows for a spread above FLT_MAX);
//   else (a constant group): s_g = 0, c[k] = −128;       o_g = fma(128, s_g, lo_g)
//   so x[k] ≈ s_g · c[k] + o_g; a non-finite x in the group: s_g = o_g = NaN, c = 0 (y is NaN).
// With S[n, g] = Σ_{k∈g} q_w[n, k] and T[n, g] = sw[n, g] · float(S[n, g]) (made at load):
//   isum_g = Σ_{k∈g} c[k] · q_w[n, k] (exact int32);  d_g = s_g · sw[n, g];
//   term_g(l) = fma(o_g, T[n, g], fma(d_g, float(isum_g), l))
// combined in step 4's order (lanes l[g % 8], the tree, the tail groups) and step 5's bias. Half the
// integer products of the 16-bit activations (one vpdpbusd per 4 products instead of two), at a
// precision of its own (teacher-forced top-1 ≥ 99% against the exact tier, tests `Int8Tier*`).

/// Activation codes of the int8 tier for one row: c[0, K), s[0, K/32], o[0, K/32]. Scalar reference.
void quantize_row_a8_ref(const float* x, std::int64_t K, std::int8_t* c, float* s, float* o);
/// The same for M rows (row stride ldx) with AVX-512 (the blocked kernels' target), bitwise equal
/// to the reference; also csum [M, K/32] = Σ_{k∈g} c[k] (the blocked kernel's offset correction).
void quantize_rows_a8_avx512(const float* x, std::int64_t ldx, std::int64_t M, std::int64_t K, std::int8_t* c, float* s, float* o,
                             std::int32_t* csum);
/// The int8 tier's y for one (x row, weight row): the scalar reference (no bias); T = T[n, :] [K/32].
float dot_a8_ref(const std::int8_t* c, const float* s, const float* o, const void* w, const float* sw, const float* T,
                 std::int64_t K, bool q4);
/// T[n, g] of W in blocked order: [blocks of 16 rows][K/32 groups][16 lanes] F32 (padding rows 0);
/// a8_sums_bytes(N, K) bytes.
std::int64_t a8_sums_bytes(std::int64_t N, std::int64_t K);
void pack_a8_sums(const void* w, const float* sw, std::int64_t N, std::int64_t K, bool q4, float* out);
/// T[n, g] row-major [N, K/32] (the reference's layout).
void a8_sums_rows(const void* w, const float* sw, std::int64_t N, std::int64_t K, bool q4, float* out);

/// Step 1 for M rows (x row stride ldx) into xq, xl [M, K], sx [M, K/32].
void quantize_rows_avx2(const float* x, std::int64_t ldx, std::int64_t M, std::int64_t K, std::int8_t* xq, std::int8_t* xl, float* sx);
/// The same with AVX-512 (the blocked kernels' target), bitwise equal to the reference; also
/// xsum [M, K/32] = Σ_{k∈g} (256·qh[k] + ql[k]) (0 for a non-finite group), the blocked kernels'
/// offset correction before its factor.
void quantize_rows_avx512(const float* x, std::int64_t ldx, std::int64_t M, std::int64_t K, std::int8_t* xq, std::int8_t* xl,
                          float* sx, std::int32_t* xsum);

}  // namespace mamba::ops::cpu::quant
