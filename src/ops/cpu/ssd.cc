// CPU Mamba-2 SSD, chunked (Dao & Gu 2024 §6–7; mamba-math.md §SSD), parallel over heads.
//
// Chunks are aligned to ABSOLUTE positions: the chunk of token t is (position + t) / Q. So a prompt
// split at multiples of Q goes through exactly the same chunks, with the same incoming state, as the
// unsplit prompt: bitwise-identical outputs and states.
//
// Per head h (group g = h / (H/G)) and chunk c of positions i, j ∈ [0, Lc):
//   a_j = Δ_j·A[h];  S_i = Σ_{j≤i} a_j                                   (inclusive cumsum)
//   1. Y_diag[i] = Σ_{j≤i} (C_i·B_j) · exp(S_i − S_j) · Δ_j · x_j         (intra-chunk)
//   4. Y_off[i]  = exp(S_i) · (h_{c−1} · C_i)                             (from the incoming state)
//   5. y[i]      = Y_diag[i] + Y_off[i] + D·x_i
//   2.+3. h_c    = exp(S_last) · h_{c−1} + Σ_j exp(S_last − S_j) · Δ_j · x_j ⊗ B_j
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/cpu/dot.h"
#include "ops/cpu/parallel.h"
#include "ops/ops.h"
#include "ops/profile.h"

namespace mamba::ops {

std::int64_t ssd_num_chunks(std::int64_t position, std::int64_t L, std::int64_t Q) {
  if (L <= 0) return 0;
  return (position + L - 1) / Q - position / Q + 1;
}

namespace {

/// One head over one chunk [t0, t0 + Lc); `h` is the head's state [P, N] (in/out).
void ssd_head_chunk(const SsdArgs& a, std::int64_t head, std::int64_t t0, std::int64_t Lc, float* h,
                    std::vector<float>& S, std::vector<float>& CB, std::vector<float>& acc) {
  const std::int64_t P = a.P, N = a.N, g = head / (a.H / a.G);
  const float A = a.A[head];
  auto xrow = [&](std::int64_t t) { return a.x + (t0 + t) * a.ldx + head * P; };
  auto Brow = [&](std::int64_t t) { return a.B + (t0 + t) * a.ldb + g * N; };
  auto Crow = [&](std::int64_t t) { return a.C + (t0 + t) * a.ldc + g * N; };
  auto dt = [&](std::int64_t t) { return a.dt[(t0 + t) * a.lddt + head]; };

  // Cumulative log-decay S_i.
  S.resize(static_cast<std::size_t>(Lc));
  float s = 0.0f;
  for (std::int64_t i = 0; i < Lc; ++i) S[i] = s += dt(i) * A;

  // CB[i, j] = (C_i · B_j) · exp(S_i − S_j) · Δ_j for j ≤ i (the masked, decayed "attention").
  CB.resize(static_cast<std::size_t>(Lc * Lc));
  for (std::int64_t i = 0; i < Lc; ++i) {
    const float* Ci = Crow(i);
    for (std::int64_t j = 0; j <= i; ++j) {
      const float* Bj = Brow(j);
      const float cb = cpu::dot_f32(Ci, Bj, N);
      CB[i * Lc + j] = cb * std::exp(S[i] - S[j]) * dt(j);
    }
  }

  acc.resize(static_cast<std::size_t>(P));
  for (std::int64_t i = 0; i < Lc; ++i) {
    // 1. Y_diag[i] = Σ_{j≤i} CB[i, j] · x_j   (contributions of the chunk's own earlier tokens)
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (std::int64_t j = 0; j <= i; ++j) {
      const float wij = CB[i * Lc + j];
      const float* xj = xrow(j);
      for (std::int64_t p = 0; p < P; ++p) acc[p] += wij * xj[p];
    }
    const float* Ci = Crow(i);
    const float decay_in = std::exp(S[i]);
    const float Dh = a.D ? a.D[head] : 0.0f;
    const float* xi = xrow(i);
    float* yi = a.y + (t0 + i) * a.ldy + head * P;
    for (std::int64_t p = 0; p < P; ++p) {
      // 4. Y_off: the incoming state read out through C_i, decayed to position i.
      const float off = cpu::dot_f32(h + p * N, Ci, N);
      // 5. y = Y_diag + Y_off + D·x
      yi[p] = acc[p] + decay_in * off + Dh * xi[p];
    }
  }

  // 2.+3. State passing: h_c = exp(S_last)·h_{c−1} + Σ_j exp(S_last − S_j)·Δ_j·x_j ⊗ B_j.
  const float S_last = S[Lc - 1], decay_chunk = std::exp(S_last);
  for (std::int64_t j = 0; j < Lc; ++j) S[j] = std::exp(S_last - S[j]) * dt(j);  // reuse S as weights
  for (std::int64_t p = 0; p < P; ++p) {
    float* hp = h + p * N;
    for (std::int64_t n = 0; n < N; ++n) hp[n] *= decay_chunk;
    for (std::int64_t j = 0; j < Lc; ++j) {
      const float wx = S[j] * xrow(j)[p];
      const float* Bj = Brow(j);
      for (std::int64_t n = 0; n < N; ++n) hp[n] += wx * Bj[n];
    }
  }
}

}  // namespace

void ssd(const SsdArgs& a) {
  const ProfileScope profile(OpKind::kScan);
  const std::int64_t state_per_head = a.P * a.N, state_elems = a.H * state_per_head;
  const bool parallel = a.L * a.H * a.P * a.N >= cpu::kParallelMinWork && a.H > 1;
#pragma omp parallel for schedule(static) num_threads(num_threads()) if (parallel)
  for (std::int64_t head = 0; head < a.H; ++head) {
    static thread_local std::vector<float> S, CB, acc;
    float* h = a.ssm_state + head * state_per_head;
    std::int64_t t0 = 0, chunk = 0;
    while (t0 < a.L) {
      const std::int64_t pos = a.position + t0;
      const std::int64_t Lc = std::min(a.L - t0, a.Q - pos % a.Q);  // up to the next absolute boundary
      ssd_head_chunk(a, head, t0, Lc, h, S, CB, acc);
      if (a.chunk_states)
        std::memcpy(a.chunk_states + chunk * state_elems + head * state_per_head, h,
                    sizeof(float) * std::size_t(state_per_head));
      t0 += Lc;
      ++chunk;
    }
  }
}

}  // namespace mamba::ops
