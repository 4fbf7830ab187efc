// Hooks from the generic CPU ops (linear, embedding) into the quantized-weight kernels
// (weights of dtype kQ8 / kQ4 written by `mamba-cli quantize`; layout in README §Quantized weights).
#pragma once

#include <cstdint>
#include <span>

#include "mamba/tensor.h"

namespace mamba::ops::cpu {

/// ops::linear for W.dtype ∈ {kQ8, kQ4}: same contract as ops::linear (x [M, K] fp32 (ldx), y
/// [M, Nout] fp32 (ldy), bias optional); W's quantization parameters travel in the TensorView.
void linear_quantized(const float* x, std::int64_t ldx, std::int64_t M, const TensorView& W,
                      const TensorView& bias, float* y, std::int64_t ldy);

/// ops::embedding for a kQ8 / kQ4 table: out[i, :] = dequantized table row ids[i].
void embedding_quantized(const TensorView& table, std::span<const std::int32_t> ids, float* out);

}  // namespace mamba::ops::cpu
