// State: everything a Mamba sequence carries between tokens (its whole "context").
//
// Per layer l: conv_state[l] fp32 [conv_channels, d_conv − 1] (the last d_conv−1 inputs of the
// depthwise conv, oldest first) and ssm_state[l] fp32 (Mamba-1 [d_inner, d_state];
// Mamba-2 [n_heads, head_dim, d_state]). Zero = a fresh sequence.
#pragma once

#include <cstdint>
#include <vector>

#include "mamba/tensor.h"

namespace mamba {

/// Owned by the caller (Model::new_state()); move-only (its Tensors are): copy it with clone().
/// It does not refer to the Model that made it. Fields: change only through prefill/step, reset()
/// and clone() — a hand-edited position or tensor is checked by prefill/step (kInvalidArgument),
/// not repaired.
struct State {
  std::vector<Tensor> conv_state;  ///< [n_layer] of [conv_channels, d_conv-1]
  std::vector<Tensor> ssm_state;   ///< [n_layer] of Mamba-1 [d_inner, d_state] / Mamba-2 [n_heads, head_dim, d_state]
  std::int64_t position = 0;       ///< tokens consumed so far (SSD chunk alignment)

  /// Zeroes every tensor and the position (reuse a slot for a new sequence).
  void reset();
  /// A deep copy (its own tensors, same position). Throws std::bad_alloc when out of memory.
  State clone() const;
  /// Total bytes of all tensors.
  std::int64_t nbytes() const;
};

}  // namespace mamba
