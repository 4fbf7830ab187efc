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
/// and clone(). prefill/step check what they can (kInvalidArgument, nothing changed): the tensor
/// count, shapes and dtypes, and a negative or overflowing position; a position that disagrees with
/// the tensors' contents cannot be told (it moves Mamba-2's chunk grid), and non-finite values in
/// a hand-edited tensor show as the step's kNumerical, after the state advanced.
struct State {
  State() = default;
  State(State&&) noexcept = default;
  State& operator=(State&&) noexcept = default;
  State(const State&) = delete;  ///< (a copy would be silent megabytes: clone() says it)
  State& operator=(const State&) = delete;

  std::vector<Tensor> conv_state;  ///< [n_layer] of [conv_channels, d_conv-1]
  std::vector<Tensor> ssm_state;   ///< [n_layer] of Mamba-1 [d_inner, d_state] / Mamba-2 [n_heads, head_dim, d_state]
  std::int64_t position = 0;       ///< tokens consumed so far (SSD chunk alignment)

  /// Zeroes every tensor and the position (reuse a slot for a new sequence).
  void reset();
  /// A deep copy (its own tensors, same position). Throws std::bad_alloc when out of memory.
  State clone() const;
  /// Copies `from`'s tensor contents and position into this state's own tensors, allocating
  /// nothing (the server's preallocated slots: a sequence that shares another's prompt takes its
  /// state after it). Returns false, changing nothing, unless both hold the same number of tensors
  /// with the same byte sizes (states of one model do).
  bool copy_from(const State& from);
  /// Total bytes of all tensors.
  std::int64_t nbytes() const;
};

}  // namespace mamba
