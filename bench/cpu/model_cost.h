// What one model costs per decode step and per prefill token: bytes read, matmul shapes and flops.
// bench_cpu derives its decode ceilings and GEMM fractions from these figures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mamba/checkpoint.h"
#include "mamba/status.h"
#include "mamba/weights.h"

namespace mamba::bench {

/// One projection kind (nn.Linear y = x·Wᵀ): W is [N, K] in the checkpoint's dtype.
struct Projection {
  std::string name;          ///< "in_proj", "x_proj", "dt_proj", "out_proj", "lm_head"
  std::int64_t K = 0, N = 0; ///< input and output features
  std::int64_t count = 0;    ///< how many the model has (n_layer; 1 for lm_head)
  std::vector<TensorView> weights;  ///< [count] the bound weights (layer order), for ops::linear timing
  std::vector<TensorView> biases;   ///< [count] (empty views when absent)
  bool per_prefill_token = true;    ///< false for lm_head: prefill asks only the last token's logits
  double weight_bytes = 0;          ///< stored bytes of one weight (a quantized one's codes and scales)
};

/// Per-model costs. Bytes are stored bytes (dtype as in the files, incl. quantization scales).
struct ModelCost {
  std::vector<Projection> projections;  ///< per-layer kinds first, then lm_head
  /// Bytes every decode step reads whatever the batch: every bound weight except an untied
  /// embedding table (a tied table is the lm_head and is counted once); projections in their
  /// stored dtype (quantized ones: codes and scales), the small per-layer tensors (norms, conv,
  /// A_log, D, dt bias) at 4 bytes per element, as the model reads its fp32 copies of them.
  double step_weight_bytes = 0;
  /// Extra bytes per sequence per step: the embedding row of an untied table (0 when tied: the row
  /// is part of the lm_head already streamed that step).
  double row_bytes = 0;
  double state_bytes = 0;    ///< one sequence's fp32 state (conv + ssm, all layers)
  double matmul_params = 0;  ///< Σ count·K·N over projections incl. lm_head (decode: 2 flops each per token)
  std::string weight_dtype;  ///< dtype of the in_proj weights ("BF16", "F32", "Q8", ...)
  bool quantized = false;    ///< in_proj stored as kQ8/kQ4

  /// Bytes one decode step of `batch` sequences reads and writes: weights + batch·(row + 2·state)
  /// (the state is read and written).
  double decode_bytes(int batch) const { return step_weight_bytes + batch * (row_bytes + 2.0 * state_bytes); }
  /// Matmul flops of a prefill of `tokens` tokens returning the last logits only.
  double prefill_flops(std::int64_t tokens) const;
};

/// Computes the costs from an open checkpoint and its bound weights (bind_weights(ckpt)).
ModelCost model_cost(const Checkpoint& ckpt, const ModelWeights& w);

}  // namespace mamba::bench
