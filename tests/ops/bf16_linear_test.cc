// The bf16 precision tier of ops::linear (src/ops/cpu/bf16_dot.h): every dispatch target bitwise
// equal to the tier's definition computed here from the weights' own values (odd shapes, strides,
// bias, F32 / BF16 / F16 weights, denormals), within the bf16 rounding bound of the exact product,
// batch- and thread-invariant, non-finite inputs propagate.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "mamba/tensor.h"
#include "ops/cpu/cpu_target.h"
#include "ops/ops.h"
#include "ops/ops_test_util.h"

namespace mamba {
namespace {

using ops::cpu::CpuTarget;

/// A weight [N, K] of `dtype` from random values, with its values as fp32.
struct FWeight {
  std::vector<std::uint8_t> bytes;
  std::vector<float> values;
  TensorView view;
  FWeight(std::int64_t N, std::int64_t K, DType dtype, std::mt19937& rng) {
    values = test::random_vec(N * K, rng, -0.5f, 0.5f);
    bytes.resize(dtype_bytes(dtype, std::size_t(N * K)));
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (dtype == DType::kF32) {
        std::memcpy(bytes.data() + 4 * i, &values[i], 4);
        continue;
      }
      const std::uint16_t h = dtype == DType::kBF16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
      values[i] = dtype == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
    view = TensorView(bytes.data(), dtype, Shape{N, K});
  }
};

/// bf16(v) of the tier (a denormal v is ±0 first, then RNE), then the dot product's DAZ.
float daz_bf16(float v) {
  if (std::fabs(v) < FLT_MIN) v = std::copysign(0.0f, v);
  const float b = bf16_to_f32(f32_to_bf16(v));
  return std::fabs(b) < FLT_MIN ? std::copysign(0.0f, b) : b;
}
float ftz(float v) { return std::fabs(v) < FLT_MIN ? std::copysign(0.0f, v) : v; }

/// The tier's definition (bf16_dot.h), straight from the fp32 values.
float tier_dot(const float* x, const float* w, std::int64_t K) {
  float r = 0.0f;
  for (std::int64_t p = 0; p < (K + 1) / 2; ++p) {
    if (2 * p + 1 < K) r = ftz(std::fma(daz_bf16(w[2 * p + 1]), daz_bf16(x[2 * p + 1]), r));
    else r = ftz(std::fma(0.0f, 0.0f, r));
    r = ftz(std::fma(daz_bf16(w[2 * p]), daz_bf16(x[2 * p]), r));
  }
  return r;
}

class Bf16Linear : public ::testing::Test {
 protected:
  void TearDown() override {
    ops::cpu::set_cpu_target_for_test(saved_);
    ops::cpu::set_weight_prefetch_for_test(saved_prefetch_);
  }
  CpuTarget saved_ = ops::cpu::cpu_target();
  bool saved_prefetch_ = ops::cpu::weight_prefetch();
};

TEST_F(Bf16Linear, DecodeStreamsGiveTheSameBitsWithAndWithoutPrefetch) {
  // Decode rows (1 and 8: the streaming tiles, prefetched or not as weight_prefetch() says) at a
  // model shape, 2 threads: bitwise the definition either way.
  if (!ops::bf16_tier_available()) GTEST_SKIP() << "this CPU has no AVX-512 BF16: the tier's kernel does not run here";
  std::mt19937 rng(23);
  const std::int64_t K = 770, N = 301;
  FWeight W(N, K, DType::kBF16, rng);
  TensorView packed_view = W.view;
  const Tensor packed = test::pack_for_test(packed_view, true);
  const int saved_threads = ops::num_threads();
  ops::set_num_threads(2);
  for (const std::int64_t M : {1, 8}) {
    const std::vector<float> x = test::random_vec(M * K, rng, -2.0f, 2.0f);
    std::vector<float> want(std::size_t(M * N));
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t n = 0; n < N; ++n) want[std::size_t(m * N + n)] = tier_dot(x.data() + m * K, W.values.data() + n * K, K);
    for (const bool prefetch : {true, false}) {
      ops::cpu::set_weight_prefetch_for_test(prefetch);
      std::vector<float> y(std::size_t(M * N), -7.0f);
      ops::linear(x.data(), K, M, packed_view, TensorView(), y.data(), N);
      ASSERT_EQ(std::memcmp(y.data(), want.data(), y.size() * 4), 0) << "M " << M << " prefetch " << prefetch;
    }
  }
  ops::set_num_threads(saved_threads);
}

TEST_F(Bf16Linear, EveryTargetBitwiseEqualsTheDefinitionAndNearFp32) {
  std::mt19937 rng(21);
  const std::int64_t Ks[] = {1, 2, 47, 64, 770};
  const std::int64_t Ns[] = {1, 17, 83};
  const std::int64_t Ms[] = {1, 2, 5, 7, 13, 130};
  const DType dtypes[] = {DType::kF32, DType::kBF16, DType::kF16};
  int cases = 0;
  for (std::int64_t K : Ks) {
    for (std::int64_t N : Ns) {
      const std::int64_t M = Ms[std::size_t(cases) % 6];
      const DType dt = dtypes[std::size_t(cases) % 3];
      const bool with_bias = cases % 2 == 0;
      const std::int64_t ldx = K + cases % 3, ldy = N + cases % 4;
      ++cases;
      FWeight W(N, K, dt, rng);
      TensorView packed_view = W.view;
      const Tensor packed = test::pack_for_test(packed_view, true);
      ASSERT_NE(packed_view.packed, nullptr);
      std::vector<float> x = test::random_vec(M * ldx, rng, -2.0f, 2.0f);
      if (K > 3) {
        x[2] = 3e-39f;                          // a denormal: zero in the tier
        x[3] = std::nextafter(FLT_MIN, 0.0f);  // the largest denormal: plain RNE would give FLT_MIN
      }
      const std::vector<float> bias = test::random_vec(N, rng);
      std::vector<float> want(std::size_t(M * ldy), -7.0f);
      for (std::int64_t m = 0; m < M; ++m)
        for (std::int64_t n = 0; n < N; ++n) {
          const float r = tier_dot(x.data() + m * ldx, W.values.data() + n * K, K);
          want[std::size_t(m * ldy + n)] = with_bias ? r + bias[std::size_t(n)] : r;
          // Near the fp32 product: x and w each within 2^-8 relative (bf16 RNE), sum roundings ≤ K·2^-24.
          double exact = with_bias ? bias[std::size_t(n)] : 0.0, mag = 0.0;
          for (std::int64_t k = 0; k < K; ++k) {
            exact += double(x[std::size_t(m * ldx + k)]) * W.values[std::size_t(n * K + k)];
            mag += std::fabs(double(x[std::size_t(m * ldx + k)]) * W.values[std::size_t(n * K + k)]);
          }
          ASSERT_NEAR(want[std::size_t(m * ldy + n)], exact, mag * (1.0 / 128 + double(K) / (1 << 23)) + 1e-6) << "K " << K << " N " << N;
        }
      const TensorView bv = with_bias ? TensorView(const_cast<float*>(bias.data()), DType::kF32, Shape{N}) : TensorView();
      for (CpuTarget t : ops::cpu::supported_cpu_targets()) {
        ops::cpu::set_cpu_target_for_test(t);
        std::vector<float> y(std::size_t(M * ldy), -7.0f);
        ops::linear(x.data(), ldx, M, packed_view, bv, y.data(), ldy);
        for (std::size_t i = 0; i < y.size(); ++i)
          ASSERT_EQ(std::memcmp(&y[i], &want[i], 4), 0) << ops::cpu::cpu_target_name(t) << " " << dtype_name(dt) << " M " << M << " K " << K
                                                         << " N " << N << " at " << i << ": " << y[i] << " vs " << want[i];
      }
    }
  }
}

TEST_F(Bf16Linear, SoftplusEpilogueEqualsLinearThenSoftplusClamp) {
  // ops::linear_softplus (Mamba-1's Δ): fused into the tier's kernel where linear_fuses_softplus,
  // two ops elsewhere; bitwise linear() then softplus_clamp(lo 0, hi +inf) on every target, M (the
  // decode tiles up to 8 rows, the prefill ones beyond), odd N, with pre-activations past the
  // softplus's x > 20 branch, far below 0, and NaN. The bitwise comparison tests the fused kernel only
  // on CPUs with AVX-512 BF16 (elsewhere, and for the unpacked weight, linear_softplus is those two
  // ops); the range checks hold everywhere.
  std::mt19937 rng(5);
  const float inf = std::numeric_limits<float>::infinity();
  int cases = 0;
  for (std::int64_t M : {1, 2, 5, 8, 9, 40})
    for (std::int64_t N : {1, 17, 80, 301}) {
      const std::int64_t K = cases % 2 ? 48 : 7, ldx = K + cases % 3, ldy = N + cases % 4;
      ++cases;
      FWeight W(N, K, cases % 3 ? DType::kBF16 : DType::kF32, rng);
      TensorView packed_view = W.view;
      const Tensor packed = test::pack_for_test(packed_view, true);
      const std::vector<float> x = test::random_vec(M * ldx, rng, -3.0f, 3.0f);
      std::vector<float> bias = test::random_vec(N, rng, -4.0f, 4.0f);
      bias[0] = 30.0f;  // → x itself
      if (N > 2) bias[1] = -90.0f;  // → ~e^−86.6 (vexp's clamp), not negative
      if (N > 3) bias[2] = std::numeric_limits<float>::quiet_NaN();
      const TensorView bv(bias.data(), DType::kF32, Shape{N});
      for (CpuTarget t : ops::cpu::supported_cpu_targets()) {
        ops::cpu::set_cpu_target_for_test(t);
        for (const TensorView* w : {&packed_view, &W.view}) {  // the tier's copy, and the exact tier
          std::vector<float> want(std::size_t(M * ldy), -7.0f), got(want);
          ops::linear(x.data(), ldx, M, *w, bv, want.data(), ldy);
          ops::softplus_clamp(want.data(), ldy, M, N, nullptr, 0.0f, inf);
          ops::linear_softplus(x.data(), ldx, M, *w, bv, got.data(), ldy);
          for (std::size_t i = 0; i < got.size(); ++i)
            ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0)
                << ops::cpu::cpu_target_name(t) << (w == &packed_view ? " packed" : " exact") << " M " << M << " N " << N
                << " at " << i << ": " << got[i] << " vs " << want[i];
          if (N > 3)
            for (std::int64_t m = 0; m < M; ++m) {
              ASSERT_GT(got[std::size_t(m * ldy)], 20.0f);
              ASSERT_GE(got[std::size_t(m * ldy + 1)], 0.0f);
              ASSERT_LT(got[std::size_t(m * ldy + 1)], 1e-30f);
              ASSERT_TRUE(std::isnan(got[std::size_t(m * ldy + 2)]));
            }
        }
        EXPECT_EQ(ops::linear_fuses_softplus(packed_view), t == CpuTarget::kAvx512 && ops::bf16_tier_available());
        EXPECT_FALSE(ops::linear_fuses_softplus(W.view));
      }
    }
}

TEST_F(Bf16Linear, ConvEpilogueEqualsLinearThenConv1dSilu) {
  // ops::linear_conv_silu (Mamba-1's u, Mamba-2's xBC): the causal conv + SiLU over a column range
  // in the tier's kernel where linear_fuses_conv_silu (d_conv 4), else the ops in turn; bitwise
  // linear() then conv1d_silu on a copy of the raw columns, and the same conv_state after, on every
  // target: M from 1 (shorter than the window) to past several 8-row tiles (fused from 9 rows on),
  // column ranges that start and end inside a 16-column block or fill the output, with and without
  // biases, a prompt cut in two calls (the window carried through conv_state; a first part of 5
  // rows runs unfused, the rest fused), on 1 and 4 threads (the large cases split the blocks, never
  // a block's rows: a weight of 5 blocks on 4 threads would take a row split without the conv).
  std::mt19937 rng(11);
  int cases = 0;
  struct Range { std::int64_t N, col0, C; };
  const int saved_threads = ops::num_threads();
  for (int threads : {1, 4})
  for (std::int64_t M : {1, 2, 3, 8, 9, 40, 100})
    for (const Range r : {Range{48, 0, 48}, Range{70, 5, 37}, Range{301, 16, 250}, Range{96, 32, 64}})
      for (std::int64_t K : {4, 3}) {
        ops::set_num_threads(threads);
        const std::int64_t k_in = (cases / 2) % 2 ? 48 : 7, ldx = k_in + cases % 3, ldy = r.N + cases % 4;
        const bool with_bias = cases % 3 != 0, with_conv_bias = cases % 5 != 0;
        ++cases;
        FWeight W(r.N, k_in, cases % 3 ? DType::kBF16 : DType::kF32, rng);
        TensorView packed_view = W.view;
        const Tensor packed = test::pack_for_test(packed_view, true);
        const std::vector<float> x = test::random_vec(M * ldx, rng, -2.0f, 2.0f);
        std::vector<float> bias = test::random_vec(r.N, rng, -1.0f, 1.0f);
        const TensorView bv = with_bias ? TensorView(bias.data(), DType::kF32, Shape{r.N}) : TensorView();
        const std::vector<float> w = test::random_vec(r.C * K, rng, -1.0f, 1.0f);  // [C, K]
        std::vector<float> wT(w.size());
        for (std::int64_t c = 0; c < r.C; ++c)
          for (std::int64_t k = 0; k < K; ++k) wT[std::size_t(k * r.C + c)] = w[std::size_t(c * K + k)];
        const std::vector<float> conv_bias = test::random_vec(r.C, rng, -1.0f, 1.0f);
        const float* cb = with_conv_bias ? conv_bias.data() : nullptr;
        const std::vector<float> state0 = test::random_vec(r.C * (K - 1), rng, -2.0f, 2.0f);
        for (CpuTarget t : ops::cpu::supported_cpu_targets()) {
          ops::cpu::set_cpu_target_for_test(t);
          for (const TensorView* wv : {&packed_view, &W.view}) {  // the tier's copy, and the exact tier
            const char* what = wv == &packed_view ? " packed" : " exact";
            // want: linear, then conv1d_silu over a copy of the raw columns, copied back.
            std::vector<float> want(std::size_t(M * ldy), -7.0f), want_state = state0;
            ops::linear(x.data(), ldx, M, *wv, bv, want.data(), ldy);
            std::vector<float> raw(std::size_t(M * r.C)), conv_out(raw.size());
            for (std::int64_t m = 0; m < M; ++m)
              for (std::int64_t c = 0; c < r.C; ++c) raw[std::size_t(m * r.C + c)] = want[std::size_t(m * ldy + r.col0 + c)];
            ops::conv1d_silu(raw.data(), r.C, M, r.C, K, w.data(), cb, want_state.data(), conv_out.data());
            for (std::int64_t m = 0; m < M; ++m)
              for (std::int64_t c = 0; c < r.C; ++c) want[std::size_t(m * ldy + r.col0 + c)] = conv_out[std::size_t(m * r.C + c)];
            // got: in one call, and cut after row M / 3 (two calls chained through conv_state).
            for (std::int64_t cut : {std::int64_t{0}, M / 3, std::min<std::int64_t>(5, M - 1)}) {
              std::vector<float> got(std::size_t(M * ldy), -7.0f), state = state0;
              const ops::ConvSiluColumns conv{r.col0, r.C, K, wT.data(), cb, state.data()};
              if (cut > 0) ops::linear_conv_silu(x.data(), ldx, cut, *wv, bv, got.data(), ldy, conv);
              ops::linear_conv_silu(x.data() + cut * ldx, ldx, M - cut, *wv, bv, got.data() + cut * ldy, ldy, conv);
              for (std::size_t i = 0; i < got.size(); ++i)
                ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0)
                    << ops::cpu::cpu_target_name(t) << what << " M " << M << " N " << r.N << " col0 " << r.col0 << " C "
                    << r.C << " K " << K << " cut " << cut << " at " << i << ": " << got[i] << " vs " << want[i];
              ASSERT_EQ(std::memcmp(state.data(), want_state.data(), state.size() * 4), 0)
                  << ops::cpu::cpu_target_name(t) << what << " conv_state, M " << M << " cut " << cut;
            }
          }
          EXPECT_EQ(ops::linear_fuses_conv_silu(packed_view, K, M),
                    K == 4 && M > 8 && t == CpuTarget::kAvx512 && ops::bf16_tier_available());
          EXPECT_FALSE(ops::linear_fuses_conv_silu(W.view, K, M));
        }
      }
  ops::set_num_threads(saved_threads);
}

TEST_F(Bf16Linear, DenormalActivationsAreZero) {
  // bf16(v) takes a denormal v as ±0 before rounding: the largest denormal would round up to
  // FLT_MIN (normal) otherwise, visible here through a large weight.
  std::vector<float> w = {0.0f, 0.0f, 0.0f, 1e30f};
  TensorView W(w.data(), DType::kF32, Shape{1, 4});
  const Tensor packed = test::pack_for_test(W, true);
  for (CpuTarget t : ops::cpu::supported_cpu_targets()) {
    ops::cpu::set_cpu_target_for_test(t);
    for (const float v : {std::nextafter(FLT_MIN, 0.0f), FLT_MIN}) {
      const float x[4] = {0.0f, 0.0f, 0.0f, v};
      float y = -7.0f;
      ops::linear(x, 4, 1, W, TensorView(), &y, 1);
      const float want = v < FLT_MIN ? 0.0f : bf16_to_f32(f32_to_bf16(1e30f)) * FLT_MIN;
      EXPECT_EQ(y, want) << ops::cpu::cpu_target_name(t) << " x = " << v;
    }
  }
}

TEST_F(Bf16Linear, BatchAndThreadInvariant) {
  if (!ops::bf16_tier_available()) GTEST_SKIP() << "this CPU has no AVX-512 BF16: the tier's kernel does not run here";
  std::mt19937 rng(23);
  const std::int64_t K = 768, N = 83, M = 130;
  FWeight W(N, K, DType::kBF16, rng);
  const Tensor packed = test::pack_for_test(W.view, true);
  test::expect_rows_equal_alone(W.view, test::random_vec(M * K, rng), M, "bf16 tier");
}

TEST_F(Bf16Linear, NonFiniteInputPropagatesAndOtherDtypesAreNotPacked) {
  std::mt19937 rng(29);
  const std::int64_t K = 96, N = 20;
  FWeight W(N, K, DType::kF32, rng);
  const Tensor packed = test::pack_for_test(W.view, true);
  for (float bad : {std::nanf(""), INFINITY}) {
    std::vector<float> x = test::random_vec(K, rng);
    x[33] = bad;
    for (CpuTarget t : ops::cpu::supported_cpu_targets()) {
      ops::cpu::set_cpu_target_for_test(t);
      std::vector<float> y(static_cast<std::size_t>(N));
      ops::linear(x.data(), K, 1, W.view, TensorView(), y.data(), N);
      for (float v : y) EXPECT_FALSE(std::isfinite(v)) << ops::cpu::cpu_target_name(t);
    }
  }
  std::vector<std::int32_t> ints(64);
  TensorView iv(ints.data(), DType::kI32, Shape{8, 8});
  EXPECT_TRUE(test::pack_for_test(iv, true).view().empty());
  EXPECT_EQ(iv.packed, nullptr);
}

}  // namespace
}  // namespace mamba
