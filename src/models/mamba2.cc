// Mamba-2 mixer (Dao & Gu 2024 §6–7; ../shared/docs/mamba-math.md §Mamba-2 and §SSD).
// Reference: state-spaces/mamba `Mamba2.forward` (RMSNormGated with group_size = E/G,
// norm_before_gate=False; optional d_mlp gated-MLP prefix of in_proj).
#include "models/mamba_model.h"
#include "ops/ops.h"

namespace mamba::models {

void mamba2_mixer(const MixerContext& ctx, const float* x, std::int64_t T, std::span<const SeqSlice> seqs,
                  float* out) {
  const ModelConfig& c = ctx.cfg;
  const std::int64_t d = c.d_model, E = c.d_inner, N = c.d_state, K = c.d_conv, H = c.n_heads,
                     P = c.head_dim, G = c.n_groups, d_mlp = c.d_mlp;
  const std::int64_t GN = G * N, conv_channels = c.conv_channels(), rows = c.in_proj_rows();
  // Column offsets in in_proj's output: [z0 (d_mlp) | x0 (d_mlp) | z (E) | xBC (E + 2GN) | dt (H)].
  const std::int64_t off_z0 = 0, off_x0 = d_mlp, off_z = 2 * d_mlp, off_xbc = 2 * d_mlp + E,
                     off_dt = 2 * d_mlp + E + conv_channels;
  Scratch& s = ctx.s;

  // 1. zxbcdt = x · in_projᵀ                               proj: [T, rows]
  // 2. xBC = silu(conv1d(xBC)) per sequence;  [u (E) | B (G·N) | C (G·N)] = xBC
  //    xbc: [T, E + 2GN] (row stride ldxbc); a prefill where in_proj's kernel fuses the conv (the
  //    bf16 tier): in its epilogue, xBC in place in proj
  float* proj = Scratch::get(s.proj, T * rows);
  const float* conv_b = ctx.p.conv_b.empty() ? nullptr : ctx.p.conv_b.data();
  float* xbc = proj + off_xbc;
  std::int64_t ldxbc = rows;
  if (one_sequence_prefill(ctx, seqs, T) && ops::linear_fuses_conv_silu(ctx.w.in_proj, K, T)) {
    ops::linear_conv_silu(x, d, T, ctx.w.in_proj, ctx.w.in_proj_bias, proj, rows,
                          {off_xbc, conv_channels, K, ctx.p.conv_wT.data(), conv_b,
                           seqs[0].state->conv_state[ctx.layer].data<float>()});
  } else {
    ops::linear(x, d, T, ctx.w.in_proj, ctx.w.in_proj_bias, proj, rows);
    xbc = Scratch::get(s.conv, T * conv_channels);
    ldxbc = conv_channels;
    s.conv_seqs.clear();
    for (const SeqSlice& q : seqs)
      s.conv_seqs.push_back(
          {proj + q.row0 * rows + off_xbc, q.len, q.state->conv_state[ctx.layer].data<float>(), xbc + q.row0 * conv_channels});
    ops::conv1d_silu_batch(s.conv_seqs, rows, conv_channels, K, ctx.p.conv_wT.data(), conv_b);
  }

  // 3. Δ = clamp(softplus(dt + dt_bias), time_step_limit), in place in proj's dt columns   [T, H]
  float* dt = proj + off_dt;
  ops::softplus_clamp(dt, rows, T, H, ctx.p.dt_bias.data(), static_cast<float>(c.time_step_min_limit),
                      static_cast<float>(c.time_step_max_limit));

  // 4. SSD per sequence (chunks aligned to its absolute position), incl. the D skip:
  //    y_t[h] = h_t[h]·C_t[g(h)] + D[h]·u_t[h],  h_t[h] = exp(Δ·A[h])·h_{t−1}[h] + Δ·u_t[h] ⊗ B_t[g(h)]
  const std::int64_t ldy = d_mlp + E;
  float* ybuf = Scratch::get(s.y, T * ldy);
  float* y = ybuf + d_mlp;  // [T, E] with row stride d_mlp + E
  s.ssd_seqs.clear();
  for (const SeqSlice& q : seqs) {
    ops::SsdArgs a;
    a.L = q.len; a.H = H; a.P = P; a.N = N; a.G = G; a.Q = c.chunk_size;
    a.position = q.state->position;
    a.x = xbc + q.row0 * ldxbc;                   a.ldx = ldxbc;
    a.dt = dt + q.row0 * rows;                    a.lddt = rows;
    a.A = ctx.p.A.data();
    a.B = xbc + q.row0 * ldxbc + E;               a.ldb = ldxbc;
    a.C = xbc + q.row0 * ldxbc + E + GN;          a.ldc = ldxbc;
    a.D = ctx.p.D.data();
    a.ssm_state = q.state->ssm_state[ctx.layer].data<float>();
    a.y = y + q.row0 * ldy;                       a.ldy = ldy;
    a.bf16_products = ctx.bf16_tier;
    s.ssd_seqs.push_back(a);
  }
  if (ctx.decode) {
    ops::ssd_decode_batch(s.ssd_seqs);  // one token per sequence: the recurrence, all sequences in one region
  } else {
    for (const ops::SsdArgs& a : s.ssd_seqs) ops::ssd(a);  // chunked (rows independent of the length)
  }

  // 5. y = GroupRMSNorm(y · silu(z)) · w_norm   (G groups of E/G channels, eps = norm_eps)
  ops::gated_rms_norm(y, ldy, proj + off_z, rows, T, E, G, ctx.p.gated_norm.data(),
                      static_cast<float>(c.norm_eps));

  // 5b. d_mlp prefix: out_proj input = [silu(z0)·x0 | y]
  if (d_mlp > 0) ops::silu_mul(proj + off_z0, rows, proj + off_x0, rows, T, d_mlp, ybuf, ldy);

  // 6. out = [mlp | y] · out_projᵀ                         out: [T, d]
  ops::linear(ybuf, ldy, T, ctx.w.out_proj, ctx.w.out_proj_bias, out, d);
}

}  // namespace mamba::models
