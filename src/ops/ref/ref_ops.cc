#include "ops/ref/ref_ops.h"

#include <cmath>
#include <limits>
#include <vector>

namespace mamba::ops::ref {

float load_f32(const TensorView& t, std::int64_t i) {
  switch (t.dtype) {
    case DType::kF32: return static_cast<const float*>(t.data)[i];
    case DType::kBF16: return bf16_to_f32(static_cast<const std::uint16_t*>(t.data)[i]);
    case DType::kF16: return f16_to_f32(static_cast<const std::uint16_t*>(t.data)[i]);
    case DType::kQ8:
    case DType::kQ4: {
      // Weight (n, k) = scale[n, k / group_size] · q[n, k] (TensorView's quantized layout).
      const std::int64_t K = t.shape[1], n = i / K, k = i % K;
      const std::int64_t s = n * (K / t.group_size) + k / t.group_size;
      const float scale = t.scale_dtype == DType::kF16 ? f16_to_f32(static_cast<const std::uint16_t*>(t.scales)[s])
                                                       : static_cast<const float*>(t.scales)[s];
      int q;
      if (t.dtype == DType::kQ8) {
        q = static_cast<const std::int8_t*>(t.data)[i];
      } else {
        const std::uint8_t b = static_cast<const std::uint8_t*>(t.data)[n * (K / 2) + k / 2];
        q = (k % 2 == 0 ? (b & 0x0F) : (b >> 4)) - 8;
      }
      return scale * static_cast<float>(q);
    }
    default: return std::numeric_limits<float>::quiet_NaN();
  }
}

void linear(const float* x, std::int64_t ldx, std::int64_t M, const TensorView& W, const TensorView& bias,
            float* y, std::int64_t ldy) {
  const std::int64_t n_out = W.shape[0], K = W.shape[1];
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < n_out; ++n) {
      double acc = bias.empty() ? 0.0 : load_f32(bias, n);
      for (std::int64_t k = 0; k < K; ++k) acc += double(x[m * ldx + k]) * load_f32(W, n * K + k);
      y[m * ldy + n] = static_cast<float>(acc);
    }
}

void embedding(const TensorView& table, std::span<const std::int32_t> ids, float* out) {
  const std::int64_t d = table.shape[1];
  for (std::size_t i = 0; i < ids.size(); ++i)
    for (std::int64_t j = 0; j < d; ++j) out[std::int64_t(i) * d + j] = load_f32(table, ids[i] * d + j);
}

void rms_norm(const float* x, std::int64_t ldx, std::int64_t M, std::int64_t D, const float* w, float eps,
              float* y, std::int64_t ldy) {
  for (std::int64_t m = 0; m < M; ++m) {
    double ss = 0;
    for (std::int64_t i = 0; i < D; ++i) ss += double(x[m * ldx + i]) * x[m * ldx + i];
    const double r = 1.0 / std::sqrt(ss / double(D) + eps);
    for (std::int64_t i = 0; i < D; ++i) y[m * ldy + i] = float(x[m * ldx + i] * r * (w ? w[i] : 1.0f));
  }
}

void gated_rms_norm(float* y, std::int64_t ldy, const float* z, std::int64_t ldz, std::int64_t M,
                    std::int64_t E, std::int64_t G, const float* w, float eps) {
  const std::int64_t gs = E / G;
  std::vector<double> v(static_cast<std::size_t>(E));
  for (std::int64_t m = 0; m < M; ++m) {
    for (std::int64_t i = 0; i < E; ++i) {
      const double zi = z[m * ldz + i];
      v[i] = y[m * ldy + i] * (zi / (1.0 + std::exp(-zi)));
    }
    for (std::int64_t g = 0; g < G; ++g) {
      double ss = 0;
      for (std::int64_t i = g * gs; i < (g + 1) * gs; ++i) ss += v[i] * v[i];
      const double r = 1.0 / std::sqrt(ss / double(gs) + eps);
      for (std::int64_t i = g * gs; i < (g + 1) * gs; ++i) y[m * ldy + i] = float(v[i] * r * w[i]);
    }
  }
}

void conv1d_silu(const float* x, std::int64_t ldx, std::int64_t L, std::int64_t C, std::int64_t K,
                 const float* w, const float* bias, float* conv_state, float* y) {
  // window = conv_state (K−1 oldest inputs) ++ x, per channel.
  for (std::int64_t c = 0; c < C; ++c) {
    std::vector<double> u(static_cast<std::size_t>(K - 1 + L));
    for (std::int64_t k = 0; k < K - 1; ++k) u[k] = conv_state[c * (K - 1) + k];
    for (std::int64_t t = 0; t < L; ++t) u[K - 1 + t] = x[t * ldx + c];
    for (std::int64_t t = 0; t < L; ++t) {
      double acc = bias ? bias[c] : 0.0;
      for (std::int64_t k = 0; k < K; ++k) acc += double(w[c * K + k]) * u[t + k];
      y[t * C + c] = float(acc / (1.0 + std::exp(-acc)));
    }
    for (std::int64_t k = 0; k < K - 1; ++k) conv_state[c * (K - 1) + k] = float(u[L + k]);
  }
}

void softplus_clamp(float* dt, std::int64_t lddt, std::int64_t M, std::int64_t n, const float* bias, float lo,
                    float hi) {
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t i = 0; i < n; ++i) {
      const double v = double(dt[m * lddt + i]) + (bias ? bias[i] : 0.0f);
      double s = v > 20.0 ? v : std::log1p(std::exp(v));
      s = s < lo ? lo : (s > hi ? hi : s);
      dt[m * lddt + i] = float(s);
    }
}

void silu_mul(const float* z, std::int64_t ldz, const float* x, std::int64_t ldx, std::int64_t M, std::int64_t n,
              float* out, std::int64_t ldo) {
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t i = 0; i < n; ++i) {
      const double zi = z[m * ldz + i];
      out[m * ldo + i] = float(zi / (1.0 + std::exp(-zi)) * x[m * ldx + i]);
    }
}

void add_rms_norm(float* h, const float* r, std::int64_t M, std::int64_t D, const float* w, float eps, float* y) {
  for (std::int64_t i = 0; i < M * D; ++i) h[i] += r[i];
  rms_norm(h, D, M, D, w, eps, y, D);
}

double sum_exp(const float* x, float shift, std::int64_t n) {
  double s = 0.0;
  for (std::int64_t i = 0; i < n; ++i) s += std::exp(double(x[i]) - double(shift));
  return s;
}

void exp_shifted(const float* x, float shift, float* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(std::exp(static_cast<double>(x[i] - shift)));
}

std::int64_t argmax(const float* x, std::int64_t n) {
  std::int64_t best = 0;
  for (std::int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

std::int64_t find_non_finite(const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return i;
  return -1;
}

void selective_scan(const SelectiveScanArgs& a) {
  for (std::int64_t e = 0; e < a.E; ++e) {
    std::vector<double> h(a.ssm_state + e * a.N, a.ssm_state + (e + 1) * a.N);
    for (std::int64_t t = 0; t < a.L; ++t) {
      double dt = a.dt[t * a.lddt + e];
      if (a.dt_softplus) dt = float(dt > 20.0 ? dt : std::log1p(std::exp(dt)));  // as softplus_clamp
      const double u = a.u[t * a.ldu + e];
      double y = 0;
      for (std::int64_t n = 0; n < a.N; ++n) {
        h[n] = std::exp(dt * a.A[e * a.N + n]) * h[n] + dt * u * a.B[t * a.ldb + n];
        y += h[n] * a.C[t * a.ldc + n];
      }
      if (a.D) y += a.D[e] * u;
      if (a.z) {
        const double z = a.z[t * a.ldz + e];
        y *= z / (1.0 + std::exp(-z));
      }
      a.y[t * a.ldy + e] = float(y);
    }
    for (std::int64_t n = 0; n < a.N; ++n) a.ssm_state[e * a.N + n] = float(h[n]);
  }
}

void ssd(const SsdArgs& a) {
  const std::int64_t state_elems = a.H * a.P * a.N, heads_per_group = a.H / a.G;
  std::vector<double> h(a.ssm_state, a.ssm_state + state_elems);
  std::int64_t chunk = 0;
  for (std::int64_t t = 0; t < a.L; ++t) {
    for (std::int64_t hd = 0; hd < a.H; ++hd) {
      const std::int64_t g = hd / heads_per_group;
      const double dt = a.dt[t * a.lddt + hd], decay = std::exp(dt * a.A[hd]);
      for (std::int64_t p = 0; p < a.P; ++p) {
        const double xv = a.x[t * a.ldx + hd * a.P + p];
        double* hp = &h[(hd * a.P + p) * a.N];
        double y = 0;
        for (std::int64_t n = 0; n < a.N; ++n) {
          hp[n] = decay * hp[n] + dt * xv * a.B[t * a.ldb + g * a.N + n];
          y += hp[n] * a.C[t * a.ldc + g * a.N + n];
        }
        if (a.D) y += a.D[hd] * xv;
        a.y[t * a.ldy + hd * a.P + p] = float(y);
      }
    }
    const bool chunk_end = (a.position + t + 1) % a.Q == 0 || t == a.L - 1;
    if (chunk_end && a.chunk_states) {
      for (std::int64_t i = 0; i < state_elems; ++i) a.chunk_states[chunk * state_elems + i] = float(h[i]);
    }
    if (chunk_end) ++chunk;
  }
  for (std::int64_t i = 0; i < state_elems; ++i) a.ssm_state[i] = float(h[i]);
}

}  // namespace mamba::ops::ref
