// CPU Mamba-2 SSD, chunked (Dao & Gu 2024 §6–7; ../shared/docs/mamba-math.md §SSD), its matmuls as register-blocked
// fp32 GEMMs (kernels.h gemm); in the bf16 tier (SsdArgs::bf16_products) the three per-head ones
// with bf16 operands and fp32 sums instead (ssd_bf16.h: Y_off, Y_diag, the state's update), the same
// formulas, strips and order of chunks.
//
// Chunks are cut at ABSOLUTE positions: every multiple of kMaxChunk (64) and every multiple of Q
// (chunk_size, where the state is reported). So a prompt split at multiples of Q goes through exactly
// the same chunks, with the same incoming state, as the unsplit prompt: bitwise-identical outputs
// and states. Row i of a chunk is computed the same way whatever the chunk's length (so a prompt's
// logits are bitwise the first rows of a longer one's).
// ssd_decode_batch with L = 1 everywhere (decode) runs the plain recurrence instead (ssd_step_head): one
// pass over the state, equal to the chunked form within rounding, not bitwise.
//
// Per chunk c of positions i, j ∈ [0, Lc), group g, head h of group g:
//   CB_g[i, j] = C_i · B_j  for j ≤ i                      once per group (C · Bᵀ, causal strips)
//   dA_i = exp(Δ_i·A[h]);  E_i = Π_{k≤i} dA_k              (the decay since the chunk's start)
//   F_i[j] = Δ_j · Π_{j<k≤i} dA_k                          (row i = row i−1 · dA_i, F_i[i] = Δ_i)
//   W[i, j] = CB_g[i, j] · F_i[j]  (j ≤ i, else 0) + D·[i = j]   (the D skip rides on the diagonal:
//                                                           no separate D·x pass)
//   y[i]    = E_i · (C_i · h_{c−1}ᵀ)                       Y_off  = C · hᵀ (GEMM), scaled per row
//           + Σ_{j≤i} W[i, j] · x_j                         Y_diag = W · X (GEMM over causal strips)
//   h_c     = E_last · h_{c−1} + (X ∘ w)ᵀ · B,  w_j = F_last[j]                       (GEMM)
// Every decay is a product of the per-token decays, one rounding per step like the recurrence (one
// multiply per element of W, where an exp of a segment sum cost an exp), and no cancellation: the
// exp of a difference of two running sums Σ_{k≤i} Δ_k·A − Σ_{k≤j} Δ_k·A would not do, as those sums
// reach thousands within a chunk when Δ·A is large (Δ ~ 3, A ~ −16) and their difference keeps only
// ~1e-4 of the exponent (measured: 3e-3 logit errors against 1e-4 for the recurrence). Products
// below FLT_MIN are set to 0 (ssd_decay_row: no subnormal arithmetic).
// Threads: two regions per call; per (chunk, group) its Bᵀ, C·Bᵀ (and the bf16 tier's rounded C and
// Bᵀ), then the heads in parallel (balanced at run time), each over all chunks. Every element is
// computed by the same operations whatever the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/cpu/kernels.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/bf16_dot.h"
#include "ops/cpu/ssd_bf16.h"
#include "ops/cpu/thread_pool.h"
#include "ops/ops.h"
#include "ops/profile.h"

namespace mamba::ops {

std::int64_t ssd_num_chunks(std::int64_t position, std::int64_t L, std::int64_t Q) {
  if (L <= 0) return 0;
  return (position + L - 1) / Q - position / Q + 1;
}

namespace {

/// Rows per causal strip of the CB and Y_diag GEMMs (a multiple of the GEMM's 6-row tile).
constexpr std::int64_t kStrip = 24;
/// Tokens per block of the Bᵀ transpose (the block's B rows stay in L1 while it is transposed).
constexpr std::int64_t kTransposeRows = 16;

template <class T>
T* grow(std::vector<T>& v, std::int64_t n) {
  if (v.size() < static_cast<std::size_t>(n)) v.resize(static_cast<std::size_t>(n));
  return v.data();
}

/// Token t (always 0: a decode step has one) through the recurrence, one head.
void step_head(const cpu::Kernels& k, const SsdArgs& a, std::int64_t head, std::int64_t t) {
  const std::int64_t g = head / (a.H / a.G);
  const float dt = a.dt[t * a.lddt + head];
  k.ssd_step_head(a.x + t * a.ldx + head * a.P, dt, std::exp(dt * a.A[head]), a.B + t * a.ldb + g * a.N,
                  a.C + t * a.ldc + g * a.N, a.D ? a.D[head] : 0.0f, a.ssm_state + head * a.P * a.N, a.P, a.N,
                  a.y + t * a.ldy + head * a.P);
}

using cpu::bf16dot::pairs;  // ⌈K/2⌉: bf16 pairs of K values

/// Bf16 (the bf16 tier, ssd_bf16.h): the chunk's C and Bᵀ as row pairs, Cb [Lc, ⌈N/2⌉] and
/// Btb [N, ⌈Lc/2⌉] (ssd() rounds them once per chunk and group), and the three GEMMs in bf16.
struct Bf16Operands {
  const std::uint32_t* Cb = nullptr;
  const std::uint32_t* Btb = nullptr;
};

/// head_chunk's three GEMMs with bf16 operands (ssd_bf16.h), the same formulas and the same strips:
/// Y_off = E ∘ (C · hᵀ), y += W · X, hᵀ = E_last · hᵀ + Bᵀ · (X ∘ w); W, X, X ∘ w and hᵀ rounded here.
void chunk_products_bf16(const SsdArgs& a, const Bf16Operands& b, std::int64_t Lc, std::int64_t N, std::int64_t P,
                         const float* W, const float* x, const float* F, const float* E, float* hT, float* y,
                         bool skip_state) {
  static thread_local std::vector<std::uint32_t> hTb_buf, Wb_buf, Xb_buf;
  const std::int64_t pN = pairs(N), pL = pairs(Lc);
  std::uint32_t* hTb = grow(hTb_buf, pN * P);
  std::uint32_t* Wb = grow(Wb_buf, Lc * pL);
  std::uint32_t* Xb = grow(Xb_buf, pL * P);
  namespace bd = cpu::bf16dot;
  if (!skip_state) {
    bd::pack_col_pairs_avx512bf16(hT, P, N, P, nullptr, hTb, P);
    bd::gemm_pairs_avx512bf16(Lc, P, pN, b.Cb, pN, hTb, P, y, a.ldy, {.accumulate = false, .beta = 1.0f, .row_scale = E});
  }
  bd::pack_col_pairs_avx512bf16(x, a.ldx, Lc, P, nullptr, Xb, P);
  for (std::int64_t i0 = 0; i0 < Lc; i0 += kStrip) {
    const std::int64_t i1 = std::min(Lc, i0 + kStrip), pK = pairs(i1);
    bd::pack_row_pairs_avx512bf16(W + i0 * Lc, Lc, i1 - i0, i1, Wb, pK);
    bd::gemm_pairs_avx512bf16(i1 - i0, P, pK, Wb, pK, Xb, P, y + i0 * a.ldy, a.ldy, {.accumulate = !skip_state});
  }
  bd::pack_col_pairs_avx512bf16(x, a.ldx, Lc, P, F, Xb, P);
  bd::gemm_pairs_avx512bf16(N, P, pL, b.Btb, pL, Xb, P, hT, P, {.accumulate = !skip_state, .beta = E[Lc - 1]});
}

/// One head over the chunk [t0, t0 + Lc); CB: the group's [Lc, Lc] C·Bᵀ (rows i, cols ≤ i);
/// hT: the head's state TRANSPOSED, [N, P] (in/out), so both state GEMMs read it directly.
/// h_zero: the incoming state is all zeros and hT was not filled (a fresh prompt's first chunk):
/// Y_off and the state's decay are then skipped (0 either way while every decay E_i is finite;
/// otherwise hT is zeroed and the chunk runs in full, so a NaN/inf decay still reaches y and h).
/// An infinite C then gives y = ±inf, as the recurrence does from a zero state (C·0 in Y_off
/// would have made it NaN).
/// Every vector loop goes through the target's kernels (this file is compiled for the baseline ISA),
/// or, with bf16, through the AVX-512 BF16 ones of ssd_bf16.h (run only where they are available).
void head_chunk(const cpu::Kernels& k, const SsdArgs& a, std::int64_t head, std::int64_t t0, std::int64_t Lc,
                const float* CB, float* hT, bool h_zero, const Bf16Operands* bf16) {
  static thread_local std::vector<float> a_buf, dA_buf, E_buf, F_buf, dt_buf, W_buf, Xw_buf;
  const std::int64_t P = a.P, N = a.N, g = head / (a.H / a.G);
  float* av = grow(a_buf, Lc);
  float* dA = grow(dA_buf, Lc);
  float* E = grow(E_buf, Lc);
  float* F = grow(F_buf, Lc);
  float* dts = grow(dt_buf, Lc);
  float* W = grow(W_buf, Lc * Lc);
  float* Xw = grow(Xw_buf, Lc * P);
  const float* x = a.x + t0 * a.ldx + head * P;
  const float* B = a.B + t0 * a.ldb + g * N;
  const float* C = a.C + t0 * a.ldc + g * N;
  float* y = a.y + t0 * a.ldy + head * P;
  const float A = a.A[head], Dh = a.D ? a.D[head] : 0.0f;

  // dA_i = exp(Δ_i·A), E_i = Π_{k≤i} dA_k (the decay since the chunk's start), as the recurrence
  // multiplies them.
  for (std::int64_t i = 0; i < Lc; ++i) {
    dts[i] = a.dt[(t0 + i) * a.lddt + head];
    av[i] = dts[i] * A;
  }
  k.exp_row(av, dA, Lc);
  float e_run = 1.0f;
  for (std::int64_t i = 0; i < Lc; ++i) {
    e_run *= dA[i];
    if (e_run < std::numeric_limits<float>::min()) e_run = 0.0f;  // no subnormals (ssd_decay_row)
    E[i] = e_run;
  }
  // W = causal, decayed, Δ-weighted CB, zero above the diagonal up to the end of the row's strip,
  // with the D skip on the diagonal (y_i gets W[i, i]·x_i: Σ_j W[i, j]·x_j + D·x_i in one GEMM).
  // F_i[j] = Δ_j·Π_{k=j+1..i} dA_k, advanced row by row.
  for (std::int64_t i = 0; i < Lc; ++i) {
    float* Wi = W + i * Lc;
    F[i] = dts[i];
    k.ssd_decay_row(Wi, F, CB + i * Lc, dA[i], i, i + 1, std::min(Lc, (i / kStrip + 1) * kStrip));
    Wi[i] += Dh;
  }
  // E_last finite ⇒ every E_i finite: E is a running product, and an inf or NaN in it persists.
  const bool skip_state = h_zero && std::isfinite(E[Lc - 1]);
  if (h_zero && !skip_state) std::fill(hT, hT + N * P, 0.0f);
  if (bf16 != nullptr) {
    chunk_products_bf16(a, *bf16, Lc, N, P, W, x, F, E, hT, y, skip_state);
    return;
  }
  // Y_off = C · hᵀ with row i scaled by E_i (the GEMM's row_scale): y_i = E_i·(C_i · hᵀ).
  if (!skip_state) k.gemm(Lc, P, N, C, a.ldc, hT, P, y, a.ldy, {.accumulate = false, .beta = 1.0f, .row_scale = E});
  // y += W · X over causal strips (row strip [i0, i1) needs columns j < i1 only); with no Y_off,
  // y = W · X.
  for (std::int64_t i0 = 0; i0 < Lc; i0 += kStrip) {
    const std::int64_t i1 = std::min(Lc, i0 + kStrip);
    k.gemm(i1 - i0, P, i1, W + i0 * Lc, Lc, x, a.ldx, y + i0 * a.ldy, a.ldy, {.accumulate = !skip_state});
  }
  // h_cᵀ = E_last·hᵀ + Bᵀ · (X ∘ w)   (X ∘ w: [Lc, P], row j = w_j·x_j, w_j = F_last[j]: F holds the
  // last row's values; B rows passed as Aᵀ; E_last·hᵀ as the GEMM's beta).
  for (std::int64_t j = 0; j < Lc; ++j) k.scale_row(x + j * a.ldx, F[j], nullptr, Xw + j * P, P);
  k.gemm_at(N, P, Lc, B, a.ldb, Xw, P, hT, P, {.accumulate = !skip_state, .beta = E[Lc - 1]});
}

/// Longest internal chunk. The chunked form is exact for any chunking; short chunks cut the
/// quadratic part (C·Bᵀ and W·X: L·q/2 per row) while the state passing (C·hᵀ and (X∘w)ᵀ·B) stays
/// L·N·P, and keep E (the decay from the chunk's start) within ~64 steps of Δ·A.
constexpr std::int64_t kMaxChunk = 64;

/// Tokens from absolute position pos to the next chunk cut: the next multiple of kMaxChunk or of Q.
std::int64_t to_next_cut(std::int64_t pos, std::int64_t Q) {
  return std::min(kMaxChunk - pos % kMaxChunk, Q - pos % Q);
}

/// dst[j·ld_dst + i] = src[i·ld_src + j] for i < rows, j < cols: 4 × 4 blocks through two rounds
/// of shuffles (GCC vector extensions: SSE on the baseline x86-64 this file is built for), the
/// ragged edges one element at a time. An exact copy.
void transpose(const float* src, std::int64_t ld_src, float* dst, std::int64_t ld_dst, std::int64_t rows,
               std::int64_t cols) {
  typedef float v4 __attribute__((vector_size(16), aligned(4), may_alias));
  typedef int i4 __attribute__((vector_size(16)));
  const std::int64_t r4 = rows - rows % 4, c4 = cols - cols % 4;
  for (std::int64_t i = 0; i < r4; i += 4)
    for (std::int64_t j = 0; j < c4; j += 4) {
      const v4 a0 = *reinterpret_cast<const v4*>(src + i * ld_src + j);
      const v4 a1 = *reinterpret_cast<const v4*>(src + (i + 1) * ld_src + j);
      const v4 a2 = *reinterpret_cast<const v4*>(src + (i + 2) * ld_src + j);
      const v4 a3 = *reinterpret_cast<const v4*>(src + (i + 3) * ld_src + j);
      const v4 t0 = __builtin_shuffle(a0, a1, i4{0, 4, 1, 5}), t1 = __builtin_shuffle(a0, a1, i4{2, 6, 3, 7});
      const v4 t2 = __builtin_shuffle(a2, a3, i4{0, 4, 1, 5}), t3 = __builtin_shuffle(a2, a3, i4{2, 6, 3, 7});
      *reinterpret_cast<v4*>(dst + j * ld_dst + i) = __builtin_shuffle(t0, t2, i4{0, 1, 4, 5});
      *reinterpret_cast<v4*>(dst + (j + 1) * ld_dst + i) = __builtin_shuffle(t0, t2, i4{2, 3, 6, 7});
      *reinterpret_cast<v4*>(dst + (j + 2) * ld_dst + i) = __builtin_shuffle(t1, t3, i4{0, 1, 4, 5});
      *reinterpret_cast<v4*>(dst + (j + 3) * ld_dst + i) = __builtin_shuffle(t1, t3, i4{2, 3, 6, 7});
    }
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = i < r4 ? c4 : 0; j < cols; ++j) dst[j * ld_dst + i] = src[i * ld_src + j];
}

/// h [P, N] ← hT [N, P] (and the reverse with to_T).
void transpose_state(float* h, float* hT, std::int64_t P, std::int64_t N, bool to_T) {
  if (to_T)
    transpose(h, N, hT, P, P, N);
  else
    transpose(hT, P, h, N, N, P);
}

/// Whether every element of x[0, n) is ±0 (a NaN is not): one pass without an early exit, which
/// the compiler vectorises.
bool all_zero(const float* x, std::int64_t n) {
  std::uint32_t any = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint32_t u;
    std::memcpy(&u, x + i, sizeof u);
    any |= u & 0x7fffffffu;
  }
  return any == 0;
}

/// Decode: the chunk state of one head (already [P, N]) into chunk_states[chunk].
void copy_chunk_state(const SsdArgs& a, std::int64_t chunk, std::int64_t head) {
  if (!a.chunk_states || chunk < 0) return;
  const std::int64_t per_head = a.P * a.N;
  std::memcpy(a.chunk_states + (chunk * a.H + head) * per_head, a.ssm_state + head * per_head,
              sizeof(float) * std::size_t(per_head));
}

}  // namespace

void ssd(const SsdArgs& a) {
  const ProfileScope profile(OpKind::kScan);
  if (a.L <= 0) return;
  const cpu::Kernels& k = cpu::cpu_kernels();
  const std::int64_t H = a.H, G = a.G, N = a.N, P = a.P, L = a.L, per_head = P * N;
  const std::int64_t q = std::min(a.Q, kMaxChunk);  // longest chunk
  const bool parallel = L * H * P * N >= cpu::kParallelMinWork && H > 1;
  // The chunks: [starts[c], starts[c + 1]), cut at absolute multiples of kMaxChunk and of Q.
  static thread_local std::vector<std::int64_t> starts;
  starts.clear();
  for (std::int64_t t0 = 0; t0 < L;) {
    starts.push_back(t0);
    t0 += std::min(L - t0, to_next_cut(a.position + t0, a.Q));
  }
  starts.push_back(L);
  const std::int64_t n_chunks = static_cast<std::int64_t>(starts.size()) - 1, cb_size = q * q;
  static thread_local std::vector<float> CB_buf;
  float* CB = grow(CB_buf, n_chunks * G * cb_size);  // [chunk][G][Lc, Lc] C·Bᵀ (lower strips)
  const std::int64_t* st = starts.data();
  // The bf16 tier: each chunk's C and Bᵀ rounded to row pairs once per group (every head of the
  // group reads them), in the C·Bᵀ phase.
  const bool bf16 = a.bf16_products && P % 16 == 0 && cpu::bf16dot::kernels_available();
  static thread_local std::vector<std::uint32_t> Cb_buf, Btb_buf;
  const std::int64_t cb16_size = q * pairs(N), btb16_size = N * pairs(q);
  std::uint32_t* Cb = bf16 ? grow(Cb_buf, n_chunks * G * cb16_size) : nullptr;     // [chunk][G][Lc, ⌈N/2⌉]
  std::uint32_t* Btb = bf16 ? grow(Btb_buf, n_chunks * G * btb16_size) : nullptr;  // [chunk][G][N, ⌈Lc/2⌉]
  // Two phases, each split over the threads: per (chunk, group) its Bᵀ (in the thread's cache),
  // C·Bᵀ over causal strips and, in the bf16 tier, the rounded C and Bᵀ; then each head walks all
  // chunks in order with its state transposed in its thread's cache.
  cpu::parallel_for(n_chunks * G, parallel, [&](std::int64_t item0, std::int64_t item1) {
    static thread_local std::vector<float> Bt_buf;
    float* Bt = grow(Bt_buf, N * q);  // [N, Lc] Bᵀ of the chunk
    for (std::int64_t item = item0; item < item1; ++item) {
      const std::int64_t c = item / G, g = item % G, t0 = st[c], Lc = st[c + 1] - t0;
      // Bᵀ in blocks of kTransposeRows tokens: the block's B rows stay in L1 while each Bᵀ row gets
      // kTransposeRows consecutive floats.
      for (std::int64_t i0 = 0; i0 < Lc; i0 += kTransposeRows)
        transpose(a.B + (t0 + i0) * a.ldb + g * N, a.ldb, Bt + i0, Lc, std::min(kTransposeRows, Lc - i0), N);
      float* CBc = CB + (c * G + g) * cb_size;
      for (std::int64_t i0 = 0; i0 < Lc; i0 += kStrip) {
        const std::int64_t i1 = std::min(Lc, i0 + kStrip);
        k.gemm(i1 - i0, i1, N, a.C + (t0 + i0) * a.ldc + g * N, a.ldc, Bt, Lc, CBc + i0 * Lc, Lc, {});
      }
      if (bf16) {
        cpu::bf16dot::pack_row_pairs_avx512bf16(a.C + t0 * a.ldc + g * N, a.ldc, Lc, N, Cb + (c * G + g) * cb16_size, pairs(N));
        cpu::bf16dot::pack_row_pairs_avx512bf16(Bt, Lc, N, Lc, Btb + (c * G + g) * btb16_size, pairs(Lc));
      }
    }
  });
  auto heads_body = [&](std::int64_t head0, std::int64_t head1) {
    static thread_local std::vector<float> hT_buf;
    float* hT = grow(hT_buf, per_head);  // [N, P] this head's state, transposed
    for (std::int64_t head = head0; head < head1; ++head) {
      float* h = a.ssm_state + head * per_head;
      // A fresh prompt's state is all zeros (−0 counts, NaN does not): no transpose, and its first
      // chunk skips what the zero state would contribute (head_chunk).
      const bool h_zero = all_zero(h, per_head);
      if (!h_zero) transpose_state(h, hT, P, N, true);
      for (std::int64_t c = 0; c < n_chunks; ++c) {
        const std::int64_t t0 = st[c], Lc = st[c + 1] - t0, pos_end = a.position + t0 + Lc;
        const std::int64_t cg = c * G + head / (H / G);
        Bf16Operands ops16;  // (Cb / Btb stay unallocated, and untouched, where bf16 is off)
        if (bf16) ops16 = {Cb + cg * cb16_size, Btb + cg * btb16_size};
        head_chunk(k, a, head, t0, Lc, CB + cg * cb_size, hT, h_zero && c == 0, bf16 ? &ops16 : nullptr);
        if (a.chunk_states && (pos_end % a.Q == 0 || c + 1 == n_chunks)) {
          const std::int64_t chunk = (pos_end - 1) / a.Q - a.position / a.Q;
          transpose_state(a.chunk_states + (chunk * H + head) * per_head, hT, P, N, false);
        }
      }
      transpose_state(h, hT, P, N, false);
    }
  };
  // Heads through parallel_for_balanced (each head's work is independent of which thread runs it;
  // mamba2-130m prefill 512 balanced / static: 2397 / 2374 tok/s).
  cpu::parallel_for_balanced(H, 1, parallel, heads_body);
}

void ssd_decode_batch(std::span<const SsdArgs> seqs) {
  bool all_single = true;
  for (const SsdArgs& a : seqs) all_single = all_single && a.L == 1;
  if (!all_single) {
    for (const SsdArgs& a : seqs) ssd(a);
    return;
  }
  const ProfileScope profile(OpKind::kScan);
  if (seqs.empty()) return;
  const cpu::Kernels& k = cpu::cpu_kernels();
  const std::int64_t H = seqs[0].H, items = H * static_cast<std::int64_t>(seqs.size());
  const bool parallel = items * seqs[0].P * seqs[0].N >= cpu::kParallelMinWork && items > 1;
  cpu::parallel_for(items, parallel, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      const SsdArgs& a = seqs[static_cast<std::size_t>(i / H)];
      step_head(k, a, i % H, 0);
      copy_chunk_state(a, 0, i % H);
    }
  });
}

}  // namespace mamba::ops
