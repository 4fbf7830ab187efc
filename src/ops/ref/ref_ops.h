// Reference ops: the same signatures and semantics as src/ops/ops.h, written as the plainest
// possible loops (reductions in double, the SSD as the sequential recurrence). Slow on purpose:
// they are the oracle every backend's parity test compares against, never used by models.
#pragma once

#include "ops/ops.h"

namespace mamba::ops::ref {

/// Element i (row-major flat index) of a F32/BF16/F16 tensor as float; of a Q8/Q4 weight [N, K] its
/// dequantized value scale[n, k / group_size] · q[n, k] (TensorView's quantized layout). Any other
/// dtype gives NaN, so a parity test fed a dtype the oracle does not know fails instead of passing
/// on zeros.
float load_f32(const TensorView& t, std::int64_t i);

void linear(const float* x, std::int64_t ldx, std::int64_t M, const TensorView& W, const TensorView& bias,
            float* y, std::int64_t ldy);
void embedding(const TensorView& table, std::span<const std::int32_t> ids, float* out);
void rms_norm(const float* x, std::int64_t ldx, std::int64_t M, std::int64_t D, const float* w, float eps,
              float* y, std::int64_t ldy);
void gated_rms_norm(float* y, std::int64_t ldy, const float* z, std::int64_t ldz, std::int64_t M,
                    std::int64_t E, std::int64_t G, const float* w, float eps);
void conv1d_silu(const float* x, std::int64_t ldx, std::int64_t L, std::int64_t C, std::int64_t K,
                 const float* w, const float* bias, float* conv_state, float* y);
void softplus_clamp(float* dt, std::int64_t lddt, std::int64_t M, std::int64_t n, const float* bias, float lo,
                    float hi);
void silu_mul(const float* z, std::int64_t ldz, const float* x, std::int64_t ldx, std::int64_t M, std::int64_t n,
              float* out, std::int64_t ldo);
void add_rms_norm(float* h, const float* r, std::int64_t M, std::int64_t D, const float* w, float eps, float* y);
/// Σ_i exp(double(x[i]) − shift), in order, in double.
double sum_exp(const float* x, float shift, std::int64_t n);
/// out[i] = float(exp(double(fl(x[i] − shift)))).
void exp_shifted(const float* x, float shift, float* out, std::int64_t n);
/// The first index of the maximum of x[0, n), n ≥ 1, by a plain loop (all −inf → 0).
std::int64_t argmax(const float* x, std::int64_t n);
/// The first index i with x[i] NaN or ±inf, or −1, by a plain loop.
std::int64_t find_non_finite(const float* x, std::int64_t n);
void selective_scan(const SelectiveScanArgs& a);
/// The sequential recurrence, token by token (chunk_states written at the same chunk ends as the
/// chunked backends: after every token whose absolute position + 1 is a multiple of Q, and after
/// the last token).
void ssd(const SsdArgs& a);

}  // namespace mamba::ops::ref
