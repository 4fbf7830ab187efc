// Mamba-1 and Falcon-Mamba mixer (Gu & Dao 2023 §3, Alg. 2; ../shared/docs/mamba-math.md §Mamba-1).
// Reference: HF transformers MambaMixer.slow_forward / FalconMambaMixer.slow_forward.
#include "models/mamba_model.h"
#include "ops/ops.h"

namespace mamba::models {

void mamba1_mixer(const MixerContext& ctx, const float* x, std::int64_t T, std::span<const SeqSlice> seqs,
                  float* out) {
  const ModelConfig& c = ctx.cfg;
  const std::int64_t d = c.d_model, E = c.d_inner, N = c.d_state, K = c.d_conv, R = c.dt_rank;
  const std::int64_t n_xdbl = R + 2 * N;
  Scratch& s = ctx.s;

  // 1. [u, z] = x · in_projᵀ                              proj: [T, 2E] (u = cols [0, E), z = [E, 2E))
  // 2. u = silu(conv1d(u)), causal, continuing from each sequence's conv_state   u: [T, E] (row stride ldu)
  //    a prefill where in_proj's kernel fuses the conv (the bf16 tier): in its epilogue, u in place
  float* proj = Scratch::get(s.proj, T * 2 * E);
  const float* conv_b = ctx.p.conv_b.empty() ? nullptr : ctx.p.conv_b.data();
  float* u = proj;
  std::int64_t ldu = 2 * E;
  if (one_sequence_prefill(ctx, seqs, T) && ops::linear_fuses_conv_silu(ctx.w.in_proj, K, T)) {
    ops::linear_conv_silu(x, d, T, ctx.w.in_proj, ctx.w.in_proj_bias, proj, 2 * E,
                          {0, E, K, ctx.p.conv_wT.data(), conv_b, seqs[0].state->conv_state[ctx.layer].data<float>()});
  } else {
    ops::linear(x, d, T, ctx.w.in_proj, ctx.w.in_proj_bias, proj, 2 * E);
    u = Scratch::get(s.conv, T * E);
    ldu = E;
    s.conv_seqs.clear();
    for (const SeqSlice& q : seqs)
      s.conv_seqs.push_back({proj + q.row0 * 2 * E, q.len, q.state->conv_state[ctx.layer].data<float>(), u + q.row0 * E});
    ops::conv1d_silu_batch(s.conv_seqs, 2 * E, E, K, ctx.p.conv_wT.data(), conv_b);
  }

  // 3. [δ, B, C] = u · x_projᵀ                            xdbl: [T, R + 2N]
  float* xdbl = Scratch::get(s.xdbl, T * n_xdbl);
  ops::linear(u, ldu, T, ctx.w.x_proj, TensorView(), xdbl, n_xdbl);
  float* delta = xdbl;
  float* B = xdbl + R;
  float* C = xdbl + R + N;

  // 3b. Falcon-Mamba: weightless RMS norms on δ, B, C (eps = mixer_rms_eps), in place.
  if (c.arch == Arch::kFalconMamba) {
    const auto eps = static_cast<float>(c.mixer_rms_eps);
    ops::rms_norm(B, n_xdbl, T, N, nullptr, eps, B, n_xdbl);
    ops::rms_norm(C, n_xdbl, T, N, nullptr, eps, C, n_xdbl);
    ops::rms_norm(delta, n_xdbl, T, R, nullptr, eps, delta, n_xdbl);
  }

  // 4. Δ = softplus(δ · dt_projᵀ + dt_proj.bias)            dt: [T, E]
  //    in dt_proj's kernel where it fuses it (the bf16 tier), else in the scan as it reads each value
  float* dt = Scratch::get(s.dt, T * E);
  const bool softplus_in_linear = ops::linear_fuses_softplus(ctx.w.dt_proj);
  if (softplus_in_linear)
    ops::linear_softplus(delta, n_xdbl, T, ctx.w.dt_proj, ctx.w.dt_proj_bias, dt, E);
  else
    ops::linear(delta, n_xdbl, T, ctx.w.dt_proj, ctx.w.dt_proj_bias, dt, E);

  // 5. selective scan per sequence: h_t = exp(Δ_t·A)·h_{t−1} + Δ_t·u_t·B_t;
  //    y_t = (h_t·C_t + D·u_t) · silu(z_t)                y: [T, E]
  float* y = Scratch::get(s.y, T * E);
  s.scan_seqs.clear();
  for (const SeqSlice& q : seqs) {
    ops::SelectiveScanArgs a;
    a.L = q.len; a.E = E; a.N = N;
    a.u = u + q.row0 * ldu;            a.ldu = ldu;
    a.dt = dt + q.row0 * E;            a.lddt = E;
    a.A = ctx.p.A.data();
    a.B = B + q.row0 * n_xdbl;         a.ldb = n_xdbl;
    a.C = C + q.row0 * n_xdbl;         a.ldc = n_xdbl;
    a.D = ctx.p.D.data();
    a.z = proj + q.row0 * 2 * E + E;   a.ldz = 2 * E;
    a.ssm_state = q.state->ssm_state[ctx.layer].data<float>();
    a.y = y + q.row0 * E;              a.ldy = E;
    a.decode_step = ctx.decode;        // prefill (any piece): the same kernel whatever the split
    a.dt_softplus = !softplus_in_linear;
    s.scan_seqs.push_back(a);
  }
  ops::selective_scan_batch(s.scan_seqs);

  // 6. out = y · out_projᵀ                                out: [T, d]
  ops::linear(y, E, T, ctx.w.out_proj, ctx.w.out_proj_bias, out, d);
}

}  // namespace mamba::models
