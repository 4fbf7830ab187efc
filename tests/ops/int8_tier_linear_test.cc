// The int8 precision tier's quantized linear (quant_kernels.h §int8 tier): the activation quantizer's
// AVX-512 form bitwise equal to its scalar reference (incl. constant, ±0, overflowing-spread,
// subnormal-spread and non-finite groups); ops::linear on a weight packed for the tier bitwise equal
// to the scalar reference on every dispatch target (odd shapes, strides, bias, every row-tile tail)
// and within the 8-bit activation bound of the fp32 product; batch- and thread-invariant; the
// group sums' blocked layout as defined.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "mamba/quantize.h"
#include "mamba/tensor.h"
#include "ops/cpu/cpu_target.h"
#include "ops/cpu/quant_kernels.h"
#include "ops/ops.h"
#include "ops/ops_test_util.h"
#include "ops/quant_test_util.h"

namespace mamba {
namespace {

using ops::cpu::CpuTarget;
namespace quant = ops::cpu::quant;

using test::QWeight;

/// The scalar definition, row by row.
std::vector<float> reference(const std::vector<float>& x, std::int64_t ldx, std::int64_t M, const QWeight& W, const float* bias,
                             std::int64_t ldy) {
  const std::int64_t N = W.view.shape[0], K = W.view.shape[1], G = K / 32;
  const bool q4 = W.view.dtype == DType::kQ4;
  std::vector<float> y(std::size_t(M * ldy), -7.0f), T(static_cast<std::size_t>(N * G));
  std::vector<float> s(static_cast<std::size_t>(G)), o(static_cast<std::size_t>(G));
  std::vector<std::int8_t> c(static_cast<std::size_t>(K));
  quant::a8_sums_rows(W.codes.data(), W.scales.data(), N, K, q4, T.data());
  for (std::int64_t m = 0; m < M; ++m) {
    quant::quantize_row_a8_ref(x.data() + m * ldx, K, c.data(), s.data(), o.data());
    for (std::int64_t n = 0; n < N; ++n) {
      const float r = quant::dot_a8_ref(c.data(), s.data(), o.data(), W.codes.data() + n * (q4 ? K / 2 : K), W.scales.data() + n * G,
                                        T.data() + n * G, K, q4);
      y[std::size_t(m * ldy + n)] = bias ? r + bias[n] : r;
    }
  }
  return y;
}

class Int8TierLinear : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ops::int8_tier_available()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI: the int8 tier cannot load";
  }
  void TearDown() override { ops::cpu::set_cpu_target_for_test(saved_); }
  CpuTarget saved_ = ops::cpu::cpu_target();
};

TEST_F(Int8TierLinear, QuantizerVectorFormsEqualTheReference) {
  std::mt19937 rng(21);
  const std::int64_t K = 12 * 32;
  std::vector<float> x = test::random_vec(K, rng, -3.0f, 3.0f);
  std::fill(x.begin() + 32, x.begin() + 64, 0.75f);                  // g1: constant
  for (int i = 64; i < 96; ++i) x[std::size_t(i)] = i % 2 ? 0.0f : -0.0f;  // g2: ±0
  x[96] = FLT_MAX;                                                   // g3: a spread over FLT_MAX
  x[97] = -FLT_MAX;
  for (int i = 128; i < 160; ++i) x[std::size_t(i)] = 1.0f + float(i % 3) * 1e-45f;  // g4: spread below FLT_MIN
  for (int i = 160; i < 192; ++i) x[std::size_t(i)] = float(i % 5) * 1e-39f;         // g5: subnormal values
  x[200] = std::nanf("");                                            // g6: NaN
  x[250] = -INFINITY;                                                // g7: −Inf
  x[300] = 1e30f;                                                    // g9: one huge value
  const std::int64_t G = K / 32;
  std::vector<std::int8_t> c0(static_cast<std::size_t>(K)), c1(c0);
  std::vector<float> s0(static_cast<std::size_t>(G)), o0(s0), s1(s0), o1(s0);
  std::vector<std::int32_t> sum(static_cast<std::size_t>(G));
  quant::quantize_row_a8_ref(x.data(), K, c0.data(), s0.data(), o0.data());
  // Spot checks of the definition.
  EXPECT_EQ(s0[1], 0.0f);
  EXPECT_EQ(o0[1], 0.75f);
  EXPECT_EQ(c0[40], -128);
  EXPECT_EQ(std::signbit(o0[2]), false);
  EXPECT_TRUE(std::isfinite(s0[3]) && std::isfinite(o0[3]));
  EXPECT_EQ(c0[96], 127);
  EXPECT_EQ(c0[97], -128);
  EXPECT_EQ(s0[4], 0.0f);
  EXPECT_TRUE(std::isnan(s0[6]) && std::isnan(o0[6]) && std::isnan(s0[7]));
  for (std::int64_t g = 0; g < G; ++g) {
    if (g == 6 || g == 7) continue;
    for (std::int64_t k = g * 32; k < g * 32 + 32; ++k) {  // x ≈ s·c + o within half a step (also for g3's spread of 2·FLT_MAX)
      const double back = double(s0[std::size_t(g)]) * c0[std::size_t(k)] + o0[std::size_t(g)];
      EXPECT_LE(std::fabs(back - x[std::size_t(k)]), 0.5001 * s0[std::size_t(g)] + 1e-6 * std::fabs(x[std::size_t(k)]) + 1e-37)
          << "k " << k;
    }
  }
  auto check = [&](const char* what) {
    for (std::int64_t g = 0; g < G; ++g) {
      ASSERT_EQ(std::memcmp(&s0[std::size_t(g)], &s1[std::size_t(g)], 4), 0) << what << " s, group " << g;
      ASSERT_EQ(std::memcmp(&o0[std::size_t(g)], &o1[std::size_t(g)], 4), 0) << what << " o, group " << g;
      std::int32_t want = 0;
      for (std::int64_t k = g * 32; k < g * 32 + 32; ++k) want += c0[std::size_t(k)];
      ASSERT_EQ(sum[std::size_t(g)], want) << what << " csum, group " << g;
    }
    ASSERT_EQ(std::memcmp(c0.data(), c1.data(), c0.size()), 0) << what;
  };
  // The blocked kernels' quantizer (AVX-512; SetUp skipped CPUs without it), outputs pre-filled with
  // sentinels so that a value it fails to write shows.
  std::fill(c1.begin(), c1.end(), std::int8_t{77});
  std::fill(s1.begin(), s1.end(), -3.0f);
  std::fill(o1.begin(), o1.end(), -3.0f);
  std::fill(sum.begin(), sum.end(), 12345);
  quant::quantize_rows_a8_avx512(x.data(), K, 1, K, c1.data(), s1.data(), o1.data(), sum.data());
  check("avx512");
}

TEST_F(Int8TierLinear, EveryTargetBitwiseEqualsReferenceAndNearFp32) {
  std::mt19937 rng(23);
  const std::int64_t Ks[] = {32, 64, 96, 256, 288, 800, 1536};
  const std::int64_t Ns[] = {1, 5, 17, 80, 83};
  // Row counts around the kernel's 4-row tiles and its 64-row tasks, and a decode batch.
  const std::int64_t Ms[] = {1, 2, 3, 4, 5, 7, 8, 9, 65, 130};
  int cases = 0;
  for (bool q4 : {false, true}) {
    for (std::int64_t K : Ks) {
      for (std::int64_t N : Ns) {
        const std::int64_t M = Ms[std::size_t(cases) % 10];
        const bool with_bias = cases % 2 == 0;
        const std::int64_t ldx = K + (cases % 3), ldy = N + (cases % 4);
        ++cases;
        QWeight W(N, K, q4, rng, true);
        ASSERT_TRUE(W.view.int8_tier);
        std::vector<float> x = test::random_vec(M * ldx, rng, -2.0f, 2.0f);
        // Every other case, the last row's groups cycle through the quantizer's edge cases: a
        // constant group, ±0, a spread of 2e30, subnormal values, an offset far from 0 (1e4 + U(−1, 1)).
        if (cases % 2 == 1) {
          float* xr = x.data() + (M - 1) * ldx;
          for (std::int64_t g = 0; g < K / 32; ++g)
            for (std::int64_t k = g * 32; k < g * 32 + 32; ++k) {
              float& v = xr[k];
              switch (g % 6) {
                case 0: v = 0.3f; break;
                case 1: v = k % 2 ? 0.0f : -0.0f; break;
                case 2: v = k % 3 == 0 ? 1e30f : k % 3 == 1 ? -1e30f : v * 1e29f; break;
                case 3: v = float(k % 7) * 1e-40f; break;
                case 4: v += 1e4f; break;
                default: break;
              }
            }
        }
        const std::vector<float> bias = test::random_vec(N, rng);
        const auto want = reference(x, ldx, M, W, with_bias ? bias.data() : nullptr, ldy);
        // Against the fp32 product with the dequantized weights: each x within half a step s_g of
        // its code (|Δ| ≤ Σ_g s_g / 2 · Σ_{k∈g} |w_k|), plus fp32 rounding.
        for (std::int64_t m = 0; m < M; ++m) {
          for (std::int64_t n = 0; n < N; ++n) {
            double exact = with_bias ? bias[std::size_t(n)] : 0.0, bound = 1e-5;
            for (std::int64_t g = 0; g < K / 32; ++g) {
              double lo = 1e30, hi = -1e30, wabs = 0;
              for (std::int64_t k = g * 32; k < g * 32 + 32; ++k) {
                const double xv = x[std::size_t(m * ldx + k)], wv = W.deq[std::size_t(n * K + k)];
                exact += xv * wv;
                lo = std::min(lo, xv);
                hi = std::max(hi, xv);
                wabs += std::fabs(wv);
                bound += 1e-6 * std::fabs(xv * wv);
              }
              bound += (hi - lo) / 255.0 / 2.0 * wabs * 1.001;
            }
            ASSERT_NEAR(want[std::size_t(m * ldy + n)], exact, bound) << "q4 " << q4 << " K " << K << " N " << N << " m " << m << " n " << n;
          }
        }
        for (CpuTarget t : ops::cpu::supported_cpu_targets()) {
          ops::cpu::set_cpu_target_for_test(t);
          std::vector<float> y(std::size_t(M * ldy), -7.0f);
          ops::linear(x.data(), ldx, M, W.view, with_bias ? TensorView(const_cast<float*>(bias.data()), DType::kF32, Shape{N}) : TensorView(),
                      y.data(), ldy);
          for (std::int64_t m = 0; m < M; ++m)
            for (std::int64_t n = 0; n < N; ++n) {
              const std::size_t i = std::size_t(m * ldy + n);
              ASSERT_EQ(std::memcmp(&y[i], &want[i], 4), 0) << ops::cpu::cpu_target_name(t) << " q4 " << q4 << " M " << M << " K " << K
                                                             << " N " << N << " m " << m << " n " << n << ": " << y[i] << " vs " << want[i];
            }
        }
      }
    }
  }
}

TEST_F(Int8TierLinear, BatchAndThreadInvariant) {
  std::mt19937 rng(29);
  const std::int64_t K = 768, N = 83, M = 130;
  for (bool q4 : {false, true}) {
    QWeight W(N, K, q4, rng, true);
    test::expect_rows_equal_alone(W.view, test::random_vec(M * K, rng), M, q4 ? "q4" : "q8");
  }
}

TEST_F(Int8TierLinear, NonFiniteInputPropagates) {
  std::mt19937 rng(31);
  const std::int64_t K = 288, N = 5;
  for (bool q4 : {false, true}) {
    QWeight W(N, K, q4, rng, true);
    for (float bad : {std::nanf(""), INFINITY}) {
      std::vector<float> x = test::random_vec(2 * K, rng);
      x[K + 100] = bad;  // row 1
      for (CpuTarget t : ops::cpu::supported_cpu_targets()) {
        ops::cpu::set_cpu_target_for_test(t);
        std::vector<float> y(std::size_t(2 * N));
        ops::linear(x.data(), K, 2, W.view, TensorView(), y.data(), N);
        for (std::int64_t n = 0; n < N; ++n) {
          EXPECT_TRUE(std::isfinite(y[std::size_t(n)])) << ops::cpu::cpu_target_name(t);
          EXPECT_TRUE(std::isnan(y[std::size_t(N + n)])) << ops::cpu::cpu_target_name(t);
        }
      }
    }
  }
}

TEST_F(Int8TierLinear, GroupSumsLayoutMatchesItsDefinition) {
  std::mt19937 rng(37);
  const std::int64_t N = 19, K = 96, G = K / 32;
  for (bool q4 : {false, true}) {
    QWeight W(N, K, q4, rng, true);
    std::vector<float> rows(std::size_t(N * G)), blocked(static_cast<std::size_t>(quant::a8_sums_bytes(N, K) / 4), -1.0f);
    ASSERT_EQ(blocked.size(), std::size_t(2 * G * 16));
    quant::a8_sums_rows(W.codes.data(), W.scales.data(), N, K, q4, rows.data());
    quant::pack_a8_sums(W.codes.data(), W.scales.data(), N, K, q4, blocked.data());
    for (std::int64_t n = 0; n < 32; ++n)
      for (std::int64_t g = 0; g < G; ++g) {
        float want = 0.0f;
        if (n < N) {
          std::int32_t S = 0;
          for (std::int64_t k = g * 32; k < g * 32 + 32; ++k) S += std::int32_t(std::lround(W.deq[std::size_t(n * K + k)] / W.scales[std::size_t(n * G + g)]));
          if (W.scales[std::size_t(n * G + g)] == 0.0f) S = 0;
          want = W.scales[std::size_t(n * G + g)] * float(S);
          EXPECT_EQ(rows[std::size_t(n * G + g)], want) << "row " << n << " g " << g;
        }
        EXPECT_EQ(blocked[std::size_t((n / 16 * G + g) * 16 + n % 16)], want) << "q4 " << q4 << " row " << n << " g " << g;
      }
    // The copy is the blocked codes followed by these sums.
    ASSERT_EQ(W.packed.numel(), quant::blocked_bytes(N, K, q4) + quant::a8_sums_bytes(N, K));
    EXPECT_EQ(std::memcmp(W.packed.data<std::uint8_t>() + quant::blocked_bytes(N, K, q4), blocked.data(), blocked.size() * 4), 0);
  }
}

TEST_F(Int8TierLinear, WeightsWhoseGroupSumsOverflowStayExact) {
  // T = sw·Σq of a group of 32 weights of 2e37 is 2e37/127 · 32·127 > FLT_MAX: no int8 copy (the
  // model then packs the exact tier's); one such group among normal ones is enough.
  const std::int64_t N = 17, K = 64;
  std::vector<float> w(std::size_t(N * K), 0.01f);
  std::vector<std::int8_t> codes(std::size_t(N * K));
  std::vector<float> scales(std::size_t(N * 2));
  for (std::int64_t n = 0; n < N; ++n) {
    if (n == 16)
      for (std::int64_t k = 32; k < 64; ++k) w[std::size_t(n * K + k)] = 2e37f;
    ASSERT_TRUE(quantize_row_q8(w.data() + n * K, K, codes.data() + n * K, scales.data() + n * 2).ok());
  }
  TensorView v(codes.data(), DType::kQ8, Shape{N, K});
  v.scales = scales.data();
  v.group_size = 32;
  EXPECT_GT(ops::pack_weight_bytes(v), 0);
  EXPECT_EQ(ops::pack_weight_int8_bytes(v), 0);
  w[std::size_t(16 * K + 40)] = 0.01f;  // still 31 of them: T overflows as well
  ASSERT_TRUE(quantize_row_q8(w.data() + 16 * K, K, codes.data() + 16 * K, scales.data() + 32).ok());
  EXPECT_EQ(ops::pack_weight_int8_bytes(v), 0);
  std::fill(w.begin() + 16 * K + 32, w.end(), 1e30f);  // large but T finite
  ASSERT_TRUE(quantize_row_q8(w.data() + 16 * K, K, codes.data() + 16 * K, scales.data() + 32).ok());
  EXPECT_EQ(ops::pack_weight_int8_bytes(v), ops::pack_weight_bytes(v) + quant::a8_sums_bytes(N, K));
}

}  // namespace
}  // namespace mamba
