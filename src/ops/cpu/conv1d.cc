// CPU causal depthwise conv1d + SiLU continuing from conv_state (mamba-math.md §conv).
// Channels are independent; the loop over channels is innermost so rows of x are read contiguously.
#include "ops/cpu/parallel.h"
#include "ops/ops.h"
#include "ops/profile.h"

namespace mamba::ops {

void conv1d_silu(const float* x, std::int64_t ldx, std::int64_t L, std::int64_t C, std::int64_t K,
                 const float* w, const float* bias, float* conv_state, float* y) {
  const ProfileScope profile(OpKind::kConv);
  const std::int64_t S = K - 1;  // conv_state width
#pragma omp parallel for schedule(static) num_threads(num_threads()) if (L * C * K >= cpu::kParallelMinWork)
  for (std::int64_t t = 0; t < L; ++t) {
    for (std::int64_t c = 0; c < C; ++c) {
      // Input at window index t + k: from conv_state when t + k < S, else x[t + k − S].
      float acc = bias ? bias[c] : 0.0f;
      for (std::int64_t k = 0; k < K; ++k) {
        const std::int64_t j = t + k;
        const float u = j < S ? conv_state[c * S + j] : x[(j - S) * ldx + c];
        acc += w[c * K + k] * u;
      }
      y[t * C + c] = silu(acc);
    }
  }
  // New conv_state = last S entries of (conv_state ++ x): entry j is window index L + j.
  for (std::int64_t c = 0; c < C; ++c)
    for (std::int64_t j = 0; j < S; ++j) {
      const std::int64_t src = L + j;  // ≥ j: reading ahead of the write, safe in place
      conv_state[c * S + j] = src < S ? conv_state[c * S + src] : x[(src - S) * ldx + c];
    }
}

}  // namespace mamba::ops
