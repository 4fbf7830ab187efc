// ModelWeights: every tensor the architecture needs, bound by name from a Checkpoint and checked
// for presence, dtype (F32/BF16/F16; Q8/Q4 for the projections and embedding/lm_head of a
// quantized checkpoint, README §Quantized weights) and shape before any compute. One table per architecture
// (src/io/weights.cc) drives binding, validation and `mamba-cli inspect`.
//
// Views point into the Checkpoint's mappings (stored dtype, no copies): the Checkpoint must
// outlive the ModelWeights. Shapes below use the symbols of docs/GLOSSARY.md:
//   d = d_model, E = d_inner, N = d_state, K = d_conv, R = dt_rank, H = n_heads, G = n_groups,
//   C = conv channels (Mamba-1: E; Mamba-2: E + 2·G·N), V = padded vocab, M = d_mlp.
#pragma once

#include <vector>

#include "mamba/checkpoint.h"
#include "mamba/config.h"
#include "mamba/status.h"
#include "mamba/tensor.h"

namespace mamba {

/// One residual block. Absent optional tensors are empty views (data == nullptr).
struct LayerWeights {
  TensorView norm;            ///< [d]        block RMSNorm weight ("layers.i.norm.weight")
  TensorView in_proj;         ///< [2E, d] (Mamba-1) | [2M + 2E + 2GN + H, d] (Mamba-2)
  TensorView in_proj_bias;    ///< [rows of in_proj] or empty (HF use_bias / state-spaces bias)
  TensorView conv1d_weight;   ///< [C, 1, K]  depthwise
  TensorView conv1d_bias;     ///< [C] or empty (use_conv_bias false)
  TensorView out_proj;        ///< [d, E + M]
  TensorView out_proj_bias;   ///< [d] or empty
  TensorView A_log;           ///< Mamba-1 [E, N]; Mamba-2 [H]
  TensorView D;               ///< Mamba-1 [E];    Mamba-2 [H]
  // Mamba-1 / Falcon-Mamba only
  TensorView x_proj;          ///< [R + 2N, E]   columns of the output: [dt (R) | B (N) | C (N)]
  TensorView dt_proj;         ///< [E, R]
  TensorView dt_proj_bias;    ///< [E]
  // Mamba-2 only
  TensorView dt_bias;         ///< [H]
  TensorView gated_norm;      ///< [E]  grouped gated RMSNorm weight ("mixer.norm.weight")
};

struct ModelWeights {
  TensorView embedding;  ///< [V, d]  ("backbone.embeddings.weight" HF / "backbone.embedding.weight" state-spaces)
  TensorView norm_f;     ///< [d]
  TensorView lm_head;    ///< [V, d]  = embedding when tied; "lm_head.weight" when untied
  std::vector<LayerWeights> layers;  ///< [n_layer]
};

/// Binds and validates every tensor of `ckpt` for its config's architecture. Also fills
/// config-derived facts that only the tensors reveal (Mamba-2 d_mlp from in_proj rows) into
/// `ckpt.mutable_config()`. Errors (kNotFound / kShape) name the file, the tensor, the expected
/// and the actual shape or dtype; untied config without lm_head.weight → kNotFound; a tensor of a
/// layer ≥ the config's n_layer (num_hidden_layers) → kShape naming the first such tensor (the
/// model would silently run without those layers); a config with rms_norm = false (LayerNorm
/// blocks) → kUnsupported.
Result<ModelWeights> bind_weights(Checkpoint& ckpt);

}  // namespace mamba
