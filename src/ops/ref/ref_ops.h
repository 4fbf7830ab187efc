// Reference ops: the same signatures and semantics as src/ops/ops.h, written as the plainest
// possible loops (reductions in double, the SSD as the sequential recurrence). Slow on purpose:
// they are the oracle every backend's parity test compares against, never used by models.
#pragma once

#include "ops/ops.h"

namespace mamba::ops::ref {

/// Element i of a F32/BF16/F16 tensor as float (any other dtype: 0).
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
void selective_scan(const SelectiveScanArgs& a);
/// The sequential recurrence, token by token (chunk_states written at the same chunk ends as the
/// chunked backends: after every token whose absolute position + 1 is a multiple of Q, and after
/// the last token).
void ssd(const SsdArgs& a);

}  // namespace mamba::ops::ref
