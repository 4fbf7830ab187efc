// Backend-neutral ops of the Mamba forward pass: the only functions model code (src/models/) calls.
//
// Conventions, stated once for every op below:
//  - Activations, states and outputs are fp32, row-major, outermost dimension first.
//  - A matrix argument `x` with `ldx` is [rows, cols] with row r starting at x + r·ldx (ldx ≥ cols,
//    in elements), so an op can read a column slice of a wider buffer (e.g. the xBC columns of
//    Mamba-2's in_proj output) without a copy.
//  - Weights (TensorView) stay in their stored dtype (F32/BF16/F16, or Q8/Q4 codes with group
//    scales) and are converted to fp32 inside the kernel; accumulation is fp32. Small per-channel vectors (norm weights, conv
//    weights, A, D, dt biases) are passed as fp32 pointers (converted once at load).
//  - Ops never allocate per call in steady state (scratch is thread-local and only grows) and
//    never fail: the caller validates shapes (the weights were checked by bind_weights) and ids.
//  - Batch invariance: every output row depends only on its own input row(s) and state, with a
//    reduction order that does not depend on the number of rows, on the other rows or on the thread
//    count (the server relies on bitwise-identical logits whatever the batch composition).
//
// Symbols: d = d_model, E = d_inner, N = d_state, K = d_conv, R = dt_rank, H = n_heads,
// P = head_dim, G = n_groups, Q = chunk_size, C = conv channels, V = padded vocab.
//
// These functions are the CPU backend (src/ops/cpu/, threaded by its pool, cpu/thread_pool.h). src/ops/ref/ref_ops.h
// declares the model ops (linear and embedding over every weight dtype incl. Q8/Q4, conv, scan, SSD,
// norms, elementwise, the logits scans) as plain loops in namespace mamba::ops::ref: the oracle for
// parity tests, run on every CPU target (tests/ops/ops_test_util.h for_each_target); the *_batch
// forms and the weight packing have none (tested against per-sequence calls / directly). The
// quantized kernels' own activation rounding has its reference in tests/ops/quantized_linear_test.cc.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <span>

#include "mamba/tensor.h"

namespace mamba::ops {

/// Threads used by the CPU ops (≤ 0: OpenMP's default, omp_get_max_threads(): the CPUs this
/// process may run on, or OMP_NUM_THREADS). Results do not depend on it.
void set_num_threads(int n);
int num_threads();

/// Runs task(i) once for every i in [0, n) on the CPU ops' threads (the caller is one of them;
/// min(n, num_threads()) in all), each thread claiming the next unclaimed i, so uneven tasks
/// balance. For independent per-sequence work outside the ops, such as sampling each sequence of
/// a decode batch (server/scheduler.cc). Tasks must not depend on which thread runs them, nor wait
/// for one another; ops they call run on their own thread. Returns when all have returned (their
/// writes are then visible). n ≤ 1 or one thread: all on the caller, i ascending. A task that
/// throws ends the claiming of the pool share it ran in (the other shares go on claiming); once all
/// have returned, the first exception is rethrown here, and tasks left unclaimed have not run.
void parallel_tasks(std::int64_t n, const std::function<void(std::int64_t)>& task);

/// y[m, n] = bias[n] + Σ_k x[m, k] · W[n, k]   (PyTorch nn.Linear).
/// x: [M, K] fp32 (ldx); W: [Nout, K] contiguous F32/BF16/F16, or Q8/Q4 (README §Quantized weights:
/// integer kernels, their own tolerance); bias: [Nout] F32/BF16/F16
/// or empty; y: [M, Nout] fp32 (ldy). One kernel for prefill (M = tokens) and decode (M = batch).
/// Reduction order (canonical, src/ops/cpu/linear_canonical.h): with w = W[n, :] converted exactly
/// to fp32, 16 lanes l[i] = +0; for k < K16 = K − K % 16 ascending, l[k % 16] = fma(x[k], w[k],
/// l[k % 16]); then the tree l[i] += l[i + s] for s = 8, 4, 2, 1 (i < s); r = l[0]; the tail
/// k ∈ [K16, K) ascending r = fma(x[k], w[k], r); y = r + bias[n] (fp32). Every dispatch target,
/// every M and every thread count gives this bitwise (batch invariance).
/// The bf16 precision tier: a float W whose `packed` points at ops::pack_weight_bf16_to's copy is
/// computed with x and W rounded to bf16 in the order of src/ops/cpu/bf16_dot.h (AVX-512 BF16 dot
/// products; the same bits on every target and M, not those of the fp32 order above).
void linear(const float* x, std::int64_t ldx, std::int64_t M, const TensorView& W, const TensorView& bias,
            float* y, std::int64_t ldy);

/// y = clamp(softplus(x · Wᵀ + bias), 0, +inf): Mamba-1's Δ (HF MambaMixer: softplus(dt_proj(δ)); the
/// clamp only as softplus_clamp and the scans' dt_softplus take it, so the values are bitwise
/// linear() followed by softplus_clamp(y, ldy, M, Nout, nullptr, 0, +inf)). Shapes and dtypes as
/// linear(). Where linear_fuses_softplus(W), the kernel applies it to its accumulators before the
/// store (one pass over y fewer; profiled as linear); elsewhere it is those two ops in turn.
void linear_softplus(const float* x, std::int64_t ldx, std::int64_t M, const TensorView& W, const TensorView& bias,
                     float* y, std::int64_t ldy);
/// Whether linear_softplus runs the softplus inside W's kernel: the bf16 tier's copy (W.packed of a
/// float W) where its AVX-512 BF16 kernel runs. Elsewhere a caller that can take the softplus later
/// (the Mamba-1 scan's dt_softplus) spares the separate pass.
bool linear_fuses_softplus(const TensorView& W);

/// The causal depthwise conv1d + SiLU that linear_conv_silu applies to the output columns [col0,
/// col0 + C) of one sequence's rows (conv1d_silu's arguments, the conv weight transposed as in
/// conv1d_silu_batch). Non-owning: wT [K, C] fp32, bias [C] fp32 or nullptr, conv_state [C, K−1]
/// fp32 (oldest first; read, then replaced by the last K−1 raw values of (conv_state ++ columns)).
struct ConvSiluColumns {
  std::int64_t col0 = 0, C = 0, K = 0;
  const float* wT = nullptr;
  const float* bias = nullptr;
  float* conv_state = nullptr;
};
/// y = x · Wᵀ + bias (linear()), then, in place over the M rows (one sequence, in order) of the
/// columns [conv.col0, conv.col0 + C): y[t, col0 + c] = silu(conv over the raw values), bitwise
/// linear() followed by conv1d_silu(raw columns, …, conv.conv_state, …) copied back; conv_state
/// advanced as conv1d_silu advances it. Mamba-1's u (in_proj's first E columns) and Mamba-2's xBC
/// in a prefill. Where linear_fuses_conv_silu(W, conv.K, M), the kernel applies the conv to its
/// accumulators before the store, keeping the last K−1 raw rows in registers (one read and one
/// write of the columns fewer than the separate pass; profiled as linear). Elsewhere it is those
/// ops in turn through a scratch copy that it allocates (so it may throw std::bad_alloc): a caller
/// with a faster way (the mixers: linear, then conv1d_silu_batch straight from y) checks
/// linear_fuses_conv_silu first. Preconditions (not checked): shapes as linear(); M ≥ 1; 0 ≤ col0,
/// col0 + C ≤ W.shape[0]; y overlaps none of x, conv's arrays or bias. Errors: none.
void linear_conv_silu(const float* x, std::int64_t ldx, std::int64_t M, const TensorView& W, const TensorView& bias,
                      float* y, std::int64_t ldy, const ConvSiluColumns& conv);
/// Whether linear_conv_silu runs the conv inside W's kernel: the bf16 tier's copy (as
/// linear_fuses_softplus), conv_taps (d_conv) == 4, the kernel's register window, and M > 8 rows
/// (up to 8 the kernel runs its decode tile, three prefetched weight streams, which the conv's
/// row-ordered blocks would give up).
bool linear_fuses_conv_silu(const TensorView& W, std::int64_t conv_taps, std::int64_t M);

/// Bytes of a quantized weight's (kQ8 / kQ4) copy repacked for the current CPU target's fastest
/// linear kernel; 0 when W is not quantized or the target reads the stored layout directly (below
/// AVX-512 VNNI). Layout: src/ops/cpu/quant_kernels.h §Blocked weights.
std::int64_t pack_weight_bytes(const TensorView& W);
/// Writes that copy to caller memory dst (pack_weight_bytes(W) > 0 bytes, 64-byte aligned; it must
/// outlive every use of W: a model packs all its weights into one allocation) and points W.packed at
/// it. Results of ops::linear are bitwise the same with or without the copy; it costs the weight's
/// size again in memory (a model then releases the stored pages: Checkpoint::release_pages) and
/// saves the per-group horizontal sums.
void pack_weight_to(TensorView& W, void* dst);

/// The int8 precision tier (README §Precision; computation in src/ops/cpu/quant_kernels.h): bytes
/// of a quantized weight's copy for it — pack_weight_to's blocked copy followed by the tier's group
/// sums T [blocks of 16 rows][K/32][16] F32 (q8 +12.5%, q4 +25% over the blocked codes); 0 where
/// pack_weight_bytes is 0 (not quantized, or no AVX-512 VNNI) or where a T would overflow fp32
/// (weights near 1e37: such a weight stays in the exact tier).
std::int64_t pack_weight_int8_bytes(const TensorView& W);
/// Writes that copy to dst (as pack_weight_to) and sets W.packed and W.int8_tier: from then on
/// ops::linear on W takes 8-bit activations (on a target forced below AVX-512 VNNI afterwards through
/// a slow scalar reference of the same bits).
void pack_weight_int8_to(TensorView& W, void* dst);
/// Whether this CPU runs the int8 tier's kernels (AVX-512 VNNI and the avx512 dispatch target).
bool int8_tier_available();

/// Bytes of the bf16 precision tier's copy of a float weight (F32 / BF16 / F16 [N, K]: rounded to
/// bf16, laid out for VDPBF16PS, src/ops/cpu/bf16_dot.h); 0 for other dtypes.
std::int64_t pack_weight_bf16_bytes(const TensorView& W);
/// Writes that copy to caller memory (as pack_weight_to) and points W.packed at it: from then on
/// ops::linear on W computes in the bf16 tier (on a CPU without AVX-512 BF16 through a slow scalar
/// reference of the same bits: callers check bf16_tier_available() first).
void pack_weight_bf16_to(TensorView& W, void* dst);
/// Whether this CPU runs the bf16 tier's dot-product kernels (AVX-512 BF16, and the dispatch
/// target is AVX-512).
bool bf16_tier_available();

/// out[i, :] = table[ids[i], :] converted to fp32. table: [V, d] F32/BF16/F16/Q8/Q4; ids already checked
/// to be in [0, V); out: [len(ids), d] contiguous.
void embedding(const TensorView& table, std::span<const std::int32_t> ids, float* out);

/// RMSNorm (HF MambaRMSNorm / state-spaces RMSNorm): y = x · rsqrt(mean(x²) + eps) · w.
/// x: [M, D] (ldx); w: [D] fp32 or nullptr (weightless, Falcon-Mamba's dt/B/C norms); y: [M, D]
/// (ldy); y may alias x (same ld).
void rms_norm(const float* x, std::int64_t ldx, std::int64_t M, std::int64_t D, const float* w, float eps,
              float* y, std::int64_t ldy);

/// The residual add fused with the next RMSNorm (HF MambaBlock: residual + mixer output, then the
/// next block's MambaRMSNorm; mamba-math.md §blocks): h[m] += r[m], then y[m] = rms_norm(h[m]) · w, row by
/// row (one pass over the rows instead of a separate add over [M, D]; the same values as the add
/// followed by rms_norm). h: [M, D] fp32 residual stream, updated in place; r: [M, D] the block's
/// output; w: [D] fp32; y: [M, D] (all contiguous, ld = D); y must not alias h or r.
void add_rms_norm(float* h, const float* r, std::int64_t M, std::int64_t D, const float* w, float eps, float* y);

/// Grouped gated RMSNorm (state-spaces RMSNormGated, norm_before_gate=False), in place:
/// v = y · silu(z); each of the G contiguous groups of E/G channels of v is RMS-normalised on its
/// own; y = v_normed · w. y: [M, E] (ldy); z: [M, E] (ldz); w: [E] fp32. E % G == 0.
void gated_rms_norm(float* y, std::int64_t ldy, const float* z, std::int64_t ldz, std::int64_t M,
                    std::int64_t E, std::int64_t G, const float* w, float eps);

/// Causal depthwise conv1d continuing from conv_state, then SiLU (../shared/docs/mamba-math.md §conv; HF MambaMixer.slow_forward):
/// y[t, c] = silu(b[c] + Σ_{k<K} w[c, k] · u[t − (K−1) + k, c]), where u at negative times comes
/// from conv_state. x: [L, C] (ldx); w: [C, K] fp32; bias: [C] fp32 or nullptr;
/// conv_state: [C, K−1] (oldest first), replaced by the last K−1 inputs of (conv_state ++ x);
/// y: [L, C] contiguous, not overlapping x or conv_state. Any L ≥ 1 (also L < K−1).
void conv1d_silu(const float* x, std::int64_t ldx, std::int64_t L, std::int64_t C, std::int64_t K,
                 const float* w, const float* bias, float* conv_state, float* y);

/// One sequence of a batched conv1d_silu call: x [L, C] (the call's ldx), conv_state [C, K−1],
/// y [L, C] contiguous — as conv1d_silu's arguments.
struct Conv1dSeq {
  const float* x = nullptr;
  std::int64_t L = 0;
  float* conv_state = nullptr;
  float* y = nullptr;
};
/// conv1d_silu for several sequences that share ldx, C, K, the weight and bias (one decode step of
/// a batch, one layer) in one parallel region. wT: the conv weight TRANSPOSED, [K, C] (wT[k·C + c]
/// = w[c·K + k]; models keep it so, see LayerParams::conv_wT). Each sequence's results are bitwise
/// those of conv1d_silu.
void conv1d_silu_batch(std::span<const Conv1dSeq> seqs, std::int64_t ldx, std::int64_t C, std::int64_t K,
                       const float* wT, const float* bias);

/// In place: dt = clamp(softplus(dt + bias), lo, hi), softplus as PyTorch (x > 20 → x, else
/// log1p(exp(x))); a NaN stays NaN (as torch.clamp). dt: [M, n] (lddt); bias: [n] fp32 or nullptr.
/// Use lo = 0, hi = +inf for none.
void softplus_clamp(float* dt, std::int64_t lddt, std::int64_t M, std::int64_t n, const float* bias, float lo,
                    float hi);

/// out[m, i] = silu(z[m, i]) · x[m, i]   (Mamba-2's d_mlp branch). z, x: [M, n]; out: [M, n] (ldo).
/// Element-wise: out may be z or x itself (the same pointer and ld), not a shifted overlap.
void silu_mul(const float* z, std::int64_t ldz, const float* x, std::int64_t ldx, std::int64_t M, std::int64_t n,
              float* out, std::int64_t ldo);


/// Index of the first element of x[0, n) that is NaN or ±inf, or −1 when every one is finite (the
/// model's logits check). One vectorised pass; the element-wise search runs only inside the block of
/// 1024 elements that holds the first such value.
std::int64_t find_non_finite(const float* x, std::int64_t n);

/// Σ_i exp(x[i] − shift) over x[0, n), n ≥ 0, as a double: the log-softmax normaliser (shift = the
/// row's maximum, so every term is ≤ 1). x finite. One vectorised pass on the dispatch target: each
/// term exp(fl(x[i] − shift)) within 2 ulp (kernels.h vexp), summed in fp32 lanes over blocks of 256
/// elements whose lane sums add in double — relative error ≤ ~4e-6 on every target (≤ 1e-6 on
/// AVX-512), vs std::exp in double summed in order (ops::ref::sum_exp). For the GPT-NeoX vocabulary
/// (50 280 logits) ~25 µs instead of the scalar double loop's ~300 µs, once per generated token.
double sum_exp(const float* x, float shift, std::int64_t n);

/// out[i] = exp(fl(x[i] − shift)) for i < n (the sampler's softmax terms; out may alias x): the
/// dispatched vector exp, each within 2 ulp of the fp32 rounding of the exact value.
void exp_shifted(const float* x, float shift, float* out, std::int64_t n);

/// Index of the first maximal element of x[0, n), n ≥ 1 (greedy decoding; ties → the lowest index,
/// as torch.argmax). x must hold no NaN (−inf is fine: all −inf → 0). One vectorised pass over
/// block maxima, then an element-wise search inside the first block that holds the maximum.
std::int64_t argmax(const float* x, std::int64_t n);

/// Mamba-1 selective scan over L tokens of one sequence (Gu & Dao 2023, Alg. 2; ../shared/docs/mamba-math.md §Mamba-1):
///   h_t = exp(Δ_t ⊙ A) ⊙ h_{t−1} + (Δ_t ⊙ u_t) ⊗ B_t ;  y_t = (h_t · C_t + D ⊙ u_t) ⊙ silu(z_t).
struct SelectiveScanArgs {
  std::int64_t L = 0, E = 0, N = 0;
  const float* u = nullptr;  std::int64_t ldu = 0;   ///< [L, E] conv output
  const float* dt = nullptr; std::int64_t lddt = 0;  ///< [L, E] Δ, or with dt_softplus its pre-activation
  const float* A = nullptr;                          ///< [E, N] = −exp(A_log)
  const float* B = nullptr;  std::int64_t ldb = 0;   ///< [L, N]
  const float* C = nullptr;  std::int64_t ldc = 0;   ///< [L, N]
  const float* D = nullptr;                          ///< [E] or nullptr (no skip)
  const float* z = nullptr;  std::int64_t ldz = 0;   ///< [L, E] gate, or nullptr (no gate)
  float* ssm_state = nullptr;                        ///< [E, N] in/out (h_{−1} → h_{L−1})
  float* y = nullptr;        std::int64_t ldy = 0;   ///< [L, E]
  /// A decode step (Model::step, L = 1): the backend may use its one-token kernel, which rounds
  /// differently from a row of a longer call. False for prefill, also for a one-token piece, so
  /// that any split of a prompt gives bitwise the unsplit result.
  bool decode_step = false;
  /// dt holds δ·dt_projᵀ + bias, and the scan takes Δ = softplus(dt) as it reads each value (fused:
  /// mamba_ssm's delta_softplus), bitwise what softplus_clamp(…, lo = 0, hi = +inf) then the scan
  /// gives; dt itself is not written.
  bool dt_softplus = false;
};
/// Runs the scan above for one sequence: reads u, dt, A, B, C, D, z (unchanged), advances
/// ssm_state in place and writes y (which must not alias the inputs). Parallel over channel blocks
/// on the CPU pool; results do not depend on the thread count. No errors (shapes are the caller's).
void selective_scan(const SelectiveScanArgs& a);
/// selective_scan for several sequences with the same E and N (a batched decode step) in one
/// parallel region over (sequence, channel block); bitwise the per-sequence results. (A decode
/// step, decode_step with L = 1, uses a one-token variant: equal to a row of a longer call within
/// rounding, not bitwise.)
void selective_scan_batch(std::span<const SelectiveScanArgs> seqs);

/// Mamba-2 SSD over L tokens of one sequence (Dao & Gu 2024 §6–7; ../shared/docs/mamba-math.md §SSD):
///   h_t[h] = exp(Δ_t[h]·A[h]) · h_{t−1}[h] + Δ_t[h] · x_t[h] ⊗ B_t[g(h)],  g(h) = h / (H/G)
///   y_t[h] = h_t[h] · C_t[g(h)] + D[h] · x_t[h].
/// The CPU backend computes it by the chunked algorithm with chunks of Q aligned to absolute
/// positions (`position` = tokens the sequence had consumed before x[0]); the first chunk may be
/// short when position % Q ≠ 0, the last when the input ends. The reference runs the recurrence.
struct SsdArgs {
  std::int64_t L = 0, H = 0, P = 0, N = 0, G = 1, Q = 256;
  std::int64_t position = 0;
  const float* x = nullptr;  std::int64_t ldx = 0;   ///< [L, H·P]  (head h = columns h·P..h·P+P)
  const float* dt = nullptr; std::int64_t lddt = 0;  ///< [L, H] Δ (after softplus + clamp)
  const float* A = nullptr;                          ///< [H] = −exp(A_log)
  const float* B = nullptr;  std::int64_t ldb = 0;   ///< [L, G·N]
  const float* C = nullptr;  std::int64_t ldc = 0;   ///< [L, G·N]
  const float* D = nullptr;                          ///< [H] or nullptr
  float* ssm_state = nullptr;                        ///< [H, P, N] in/out
  float* y = nullptr;        std::int64_t ldy = 0;   ///< [L, H·P]
  /// Optional [n_chunks, H, P, N]: the state after each chunk (the last = the final state); chunks
  /// as described above, n_chunks = number of absolute chunk boundaries crossed + 1. For tests.
  float* chunk_states = nullptr;
  /// The bf16 tier (Precision::kBF16): the CPU backend takes the chunked form's three per-head
  /// matmuls with bf16 operands and fp32 sums (src/ops/cpu/ssd_bf16.h; only where its AVX-512 BF16
  /// kernels run and P is a multiple of 16, else as without). Decode steps (ssd_decode_batch with
  /// every L = 1: the recurrence) and other backends ignore it; ssd_decode_batch's fallback for
  /// other lengths calls ssd(), which honours it.
  bool bf16_products = false;
};
/// Runs the SSD above for one sequence: advances ssm_state in place, writes y (not aliasing the
/// inputs) and, when chunk_states is set, the per-chunk states. The CPU backend also cuts at every
/// absolute multiple of 64 (sub-chunks of ≤ 64 tokens whatever Q is; the same Q boundaries, results
/// equal within rounding) and takes each decay as a product of the per-token decays exp(Δ·A), as
/// the recurrence multiplies them (accurate however large the chunk's total decay; ssd.cc); parallel
/// over (chunk, group) items, then heads, on the CPU pool, results independent of the thread count.
/// No errors (shapes are the caller's).
void ssd(const SsdArgs& a);
/// One decode step of several sequences with the same H, P, N, G, Q (every L = 1; Model::step):
/// the recurrence directly (one pass over each state, no chunk machinery) in one parallel region
/// over (sequence, head): bitwise the same per sequence whatever the batch, and equal to ssd()
/// within rounding (not bitwise) — so a prefill piece of one token goes through ssd(), never here,
/// or its prompt's split invariance would be lost. Given a sequence with L ≠ 1 it calls ssd() per
/// sequence instead.
void ssd_decode_batch(std::span<const SsdArgs> seqs);
/// Number of chunks SSD splits [position, position + L) into: chunks are aligned to absolute
/// positions (multiples of Q), so a piece starting mid-chunk first completes that chunk.
/// Q ≥ 1, position ≥ 0; L ≤ 0 gives 0.
std::int64_t ssd_num_chunks(std::int64_t position, std::int64_t L, std::int64_t Q);


}  // namespace mamba::ops
