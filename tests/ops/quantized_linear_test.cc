// Quantized-weight linear / embedding (q8, q4): every dispatch target BITWISE equal to the scalar
// reference computation of quant_kernels.h (odd shapes, strides, bias), within the activation-
// quantization error bound of the fp32 product with the dequantized weights, batch- and
// thread-invariant; dequantization round trip within half a step (q8) / one step (q4); non-finite
// inputs propagate.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "mamba/quantize.h"
#include "mamba/tensor.h"
#include "ops/cpu/cpu_target.h"
#include "ops/cpu/quant_kernels.h"
#include "ops/ops.h"
#include "ops/ops_test_util.h"
#include "ops/quant_test_util.h"
#include "ops/ref/ref_ops.h"

namespace mamba {
namespace {

using ops::cpu::CpuTarget;

using test::QWeight;

/// Reference: the scalar definition, rows quantized one by one.
std::vector<float> reference(const std::vector<float>& x, std::int64_t ldx, std::int64_t M, const QWeight& W, const float* bias,
                             std::int64_t ldy) {
  const std::int64_t N = W.view.shape[0], K = W.view.shape[1], G = K / 32;
  const bool q4 = W.view.dtype == DType::kQ4;
  std::vector<float> y(std::size_t(M * ldy), -7.0f);
  std::vector<std::int8_t> xq(static_cast<std::size_t>(K)), xl(static_cast<std::size_t>(K));
  std::vector<float> sx(static_cast<std::size_t>(G));
  for (std::int64_t m = 0; m < M; ++m) {
    ops::cpu::quant::quantize_row_ref(x.data() + m * ldx, K, xq.data(), xl.data(), sx.data());
    for (std::int64_t n = 0; n < N; ++n) {
      const float r = ops::cpu::quant::dot_ref(xq.data(), xl.data(), sx.data(), W.codes.data() + n * (q4 ? K / 2 : K), W.scales.data() + n * G, K, q4);
      y[std::size_t(m * ldy + n)] = bias ? r + bias[n] : r;
    }
  }
  return y;
}

class QuantizedLinear : public ::testing::Test {
 protected:
  void TearDown() override {
    ops::cpu::set_cpu_target_for_test(saved_);
    ops::cpu::set_weight_prefetch_for_test(saved_prefetch_);
  }
  CpuTarget saved_ = ops::cpu::cpu_target();
  bool saved_prefetch_ = ops::cpu::weight_prefetch();
};

TEST_F(QuantizedLinear, DecodeStreamsGiveTheSameBitsWithAndWithoutPrefetch) {
  // One input row (the decode kernels' weight streams, prefetched or not: weight_prefetch()) and a
  // decode batch, at model shapes, on every target, with 2 threads: bitwise the reference.
  std::mt19937 rng(8);
  const int saved_threads = ops::num_threads();
  ops::set_num_threads(2);
  for (bool q4 : {false, true}) {
    for (const auto [M, K, N] : {std::array<std::int64_t, 3>{1, 768, 301}, {1, 1536, 80}, {8, 768, 301}}) {
      QWeight W(N, K, q4, rng);
      Tensor packed = test::pack_for_test(W.view, false);  // the AVX-512 VNNI kernels read the blocked copy
      const std::vector<float> x = test::random_vec(M * K, rng, -2.0f, 2.0f);
      const auto want = reference(x, K, M, W, nullptr, N);
      for (CpuTarget t : ops::cpu::supported_cpu_targets()) {
        ops::cpu::set_cpu_target_for_test(t);
        for (const bool prefetch : {true, false}) {
          ops::cpu::set_weight_prefetch_for_test(prefetch);
          std::vector<float> y(std::size_t(M * N), -7.0f);
          ops::linear(x.data(), K, M, W.view, TensorView(), y.data(), N);
          ASSERT_EQ(std::memcmp(y.data(), want.data(), y.size() * 4), 0)
              << ops::cpu::cpu_target_name(t) << " q4 " << q4 << " M " << M << " K " << K << " N " << N << " prefetch " << prefetch;
        }
      }
    }
  }
  ops::set_num_threads(saved_threads);
}

TEST_F(QuantizedLinear, EveryTargetBitwiseEqualsReferenceAndNearFp32) {
  std::mt19937 rng(5);
  const std::int64_t Ks[] = {32, 64, 96, 256, 288, 800, 1536};
  const std::int64_t Ns[] = {1, 5, 17, 80};
  const std::int64_t Ms[] = {1, 2, 3, 7, 8, 9, 65, 130};
  int cases = 0;
  for (bool q4 : {false, true}) {
    for (std::int64_t K : Ks) {
      for (std::int64_t N : Ns) {
        const std::int64_t M = Ms[std::size_t(cases) % 8];
        const bool with_bias = cases % 2 == 0;
        const std::int64_t ldx = K + (cases % 3), ldy = N + (cases % 4);
        ++cases;
        QWeight W(N, K, q4, rng);
        std::vector<float> x = test::random_vec(M * ldx, rng, -2.0f, 2.0f);
        std::vector<float> bias = test::random_vec(N, rng);
        const auto want = reference(x, ldx, M, W, with_bias ? bias.data() : nullptr, ldy);
        // The fp32 product with the dequantized weights, and the activation-quantization bound:
        // |Δ| ≤ Σ_g (amax_g / 127 / 256) · Σ_{k∈g} |w_k| (≤ one residual step of x per element)
        // + fp32 rounding (≤ 1e-6 · Σ |x·w|).
        for (std::int64_t m = 0; m < M; ++m) {
          for (std::int64_t n = 0; n < N; ++n) {
            double exact = with_bias ? bias[std::size_t(n)] : 0.0, bound = 1e-5;
            for (std::int64_t g = 0; g < K / 32; ++g) {
              double amax = 0, wabs = 0;
              for (std::int64_t k = g * 32; k < g * 32 + 32; ++k) {
                const double xv = x[std::size_t(m * ldx + k)], wv = W.deq[std::size_t(n * K + k)];
                exact += xv * wv;
                amax = std::max(amax, std::fabs(xv));
                wabs += std::fabs(wv);
                bound += 1e-6 * std::fabs(xv * wv);
              }
              bound += amax / 127.0 / 256.0 * wabs * 1.001;
            }
            ASSERT_NEAR(want[std::size_t(m * ldy + n)], exact, bound) << "q4 " << q4 << " K " << K << " N " << N << " m " << m << " n " << n;
          }
        }
        for (CpuTarget t : ops::cpu::supported_cpu_targets()) {
          ops::cpu::set_cpu_target_for_test(t);
          std::vector<float> y(std::size_t(M * ldy), -7.0f);
          ops::linear(x.data(), ldx, M, W.view, with_bias ? TensorView(bias.data(), DType::kF32, Shape{N}) : TensorView(), y.data(), ldy);
          for (std::size_t i = 0; i < y.size(); ++i) {
            ASSERT_EQ(std::memcmp(&y[i], &want[i], 4), 0) << ops::cpu::cpu_target_name(t) << " q4 " << q4 << " M " << M << " K " << K
                                                           << " N " << N << " at " << i << ": " << y[i] << " vs " << want[i];
          }
        }
      }
    }
  }
}

TEST_F(QuantizedLinear, BatchAndThreadInvariant) {
  std::mt19937 rng(11);
  const std::int64_t K = 768, N = 83, M = 130;
  for (bool q4 : {false, true}) {
    QWeight W(N, K, q4, rng);
    const std::vector<float> x = test::random_vec(M * K, rng);
    for (CpuTarget t : ops::cpu::supported_cpu_targets()) {
      ops::cpu::set_cpu_target_for_test(t);
      test::expect_rows_equal_alone(W.view, x, M, std::string(ops::cpu::cpu_target_name(t)) + (q4 ? " q4" : " q8"));
    }
  }
}

TEST_F(QuantizedLinear, DequantizeRoundTripAndEmbedding) {
  std::mt19937 rng(3);
  const std::int64_t N = 9, K = 320;
  std::normal_distribution<float> nd(0.0f, 0.1f);
  for (bool q4 : {false, true}) {
    std::vector<float> w(std::size_t(N * K));
    for (auto& v : w) v = nd(rng);
    const std::int64_t row_bytes = q4 ? K / 2 : K, G = K / 32;
    std::vector<std::uint8_t> codes(std::size_t(N * row_bytes));
    std::vector<float> scales(std::size_t(N * G));
    for (std::int64_t n = 0; n < N; ++n) {
      const Status st = q4 ? quantize_row_q4(w.data() + n * K, K, codes.data() + n * row_bytes, scales.data() + n * G)
                           : quantize_row_q8(w.data() + n * K, K, reinterpret_cast<std::int8_t*>(codes.data()) + n * row_bytes, scales.data() + n * G);
      ASSERT_TRUE(st.ok()) << st.message();
    }
    TensorView v(codes.data(), q4 ? DType::kQ4 : DType::kQ8, Shape{N, K});
    v.scales = scales.data();
    v.group_size = 32;
    const std::vector<std::int32_t> ids = {4, 0, 8, 4};
    std::vector<float> out(ids.size() * std::size_t(K)), out_ref(out.size());
    ops::embedding(v, ids, out.data());
    // The plain reference (ops::ref::load_f32 dequantizes Q8/Q4): the same values, bitwise.
    ops::ref::embedding(v, ids, out_ref.data());
    EXPECT_EQ(0, std::memcmp(out.data(), out_ref.data(), sizeof(float) * out.size())) << "q4 " << q4;
    // ref::linear over the quantized weight is ref::linear over its dequantized copy.
    std::vector<float> deq(std::size_t(N * K));
    std::vector<std::int32_t> all(static_cast<std::size_t>(N));
    for (std::int64_t n = 0; n < N; ++n) all[std::size_t(n)] = std::int32_t(n);
    ops::ref::embedding(v, all, deq.data());
    const std::vector<float> xs = test::random_vec(2 * K, rng);
    std::vector<float> yq(std::size_t(2 * N)), yf(yq.size());
    ops::ref::linear(xs.data(), K, 2, v, TensorView(), yq.data(), N);
    ops::ref::linear(xs.data(), K, 2, TensorView(deq.data(), DType::kF32, Shape{N, K}), TensorView(), yf.data(), N);
    EXPECT_EQ(0, std::memcmp(yq.data(), yf.data(), sizeof(float) * yq.size())) << "q4 " << q4;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      for (std::int64_t k = 0; k < K; ++k) {
        const float orig = w[std::size_t(ids[i] * K + k)], got = out[i * std::size_t(K) + std::size_t(k)];
        const float step = std::fabs(scales[std::size_t(ids[i] * G + k / 32)]);
        // q8: round to nearest step (½ step); q4: the +8 end clamps to +7 (≤ 1 step).
        EXPECT_LE(std::fabs(got - orig), (q4 ? 1.0f : 0.5f) * step * 1.0001f + 1e-9f) << "q4 " << q4 << " id " << ids[i] << " k " << k;
        // Exactly scale · code.
        std::int32_t q;
        if (q4) {
          const std::uint8_t b = codes[std::size_t(ids[i] * row_bytes + k / 2)];
          q = ((k % 2 == 0) ? (b & 0x0F) : (b >> 4)) - 8;
        } else {
          q = reinterpret_cast<const std::int8_t*>(codes.data())[ids[i] * row_bytes + k];
        }
        EXPECT_EQ(got, scales[std::size_t(ids[i] * G + k / 32)] * float(q));
      }
    }
    // q8 codes stay within ±127 (the AVX2 sign trick needs it); q4's largest-magnitude weight is −8.
    if (!q4) {
      for (std::uint8_t c : codes) EXPECT_NE(static_cast<std::int8_t>(c), -128);
    } else {
      // The documented rule exactly: each group's largest-magnitude weight m gives the scale
      // d = m / −8 and code −8 (reconstructed exactly); every other weight rounds to the nearest
      // step (½ step) unless it rounds to +8, which clamps to +7 (a [−7, 7] clamp passed the bound
      // of one step above, and made every group's extreme one step off).
      for (std::int64_t n = 0; n < N; ++n) {
        for (std::int64_t g = 0; g < G; ++g) {
          const float* wg = w.data() + n * K + g * 32;
          std::int64_t at = 0;
          for (std::int64_t k = 1; k < 32; ++k)
            if (std::fabs(wg[k]) > std::fabs(wg[at])) at = k;
          const float d = scales[std::size_t(n * G + g)];
          EXPECT_EQ(d, wg[at] / -8.0f) << "row " << n << " group " << g;
          for (std::int64_t k = 0; k < 32; ++k) {
            const std::uint8_t b = codes[std::size_t(n * row_bytes + (g * 32 + k) / 2)];
            const int q = ((k % 2 == 0) ? (b & 0x0F) : (b >> 4)) - 8;
            if (k == at) {
              EXPECT_EQ(q, -8) << "row " << n << " group " << g;
            }
            if (q == 7 && wg[k] / d > 7.5f) continue;
            EXPECT_LE(std::fabs(d * float(q) - wg[k]), 0.5f * std::fabs(d) * 1.0001f) << "row " << n << " group " << g << " k " << k;
          }
        }
      }
    }
  }
}

// The row quantizers refuse what they cannot encode, naming it: a row length that is no whole
// number of groups (its tail was dropped), a non-finite weight (a NaN reached a float → int cast).
TEST_F(QuantizedLinear, RowQuantizersRefuseBadRows) {
  std::vector<float> w(64, 0.5f);
  std::vector<std::int8_t> c8(64);
  std::vector<std::uint8_t> c4(32);
  std::vector<float> s(2);
  for (std::int64_t K : {std::int64_t(0), std::int64_t(33), std::int64_t(-32)}) {
    const Status a = quantize_row_q8(w.data(), K, c8.data(), s.data()), b = quantize_row_q4(w.data(), K, c4.data(), s.data());
    ASSERT_FALSE(a.ok()) << K;
    ASSERT_FALSE(b.ok()) << K;
    EXPECT_EQ(a.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(a.message(), fmt::format("row length K = {}: expected a positive multiple of 32", K));
    EXPECT_EQ(b.message(), a.message());
  }
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    w[37] = bad;
    const Status a = quantize_row_q8(w.data(), 64, c8.data(), s.data()), b = quantize_row_q4(w.data(), 64, c4.data(), s.data());
    ASSERT_FALSE(a.ok());
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(a.error().code, ErrorCode::kNumerical);
    EXPECT_EQ(a.message(), fmt::format("non-finite weight {} at k = 37: cannot quantize", bad));
    EXPECT_EQ(b.message(), a.message());
  }
}

TEST_F(QuantizedLinear, BlockedLayoutMatchesItsDefinition) {
  // quant_kernels.h §Blocked weights, element by element, incl. the padding rows of the last block.
  std::mt19937 rng(13);
  const std::int64_t N = 19, K = 64, G = K / 32;
  for (bool q4 : {false, true}) {
    QWeight W(N, K, q4, rng);
    std::vector<std::uint8_t> out(static_cast<std::size_t>(ops::cpu::quant::blocked_bytes(N, K, q4)), 0xEE);
    ASSERT_EQ(out.size(), std::size_t(2 * G * (q4 ? 320 : 576)));
    ops::cpu::quant::pack_blocked(W.codes.data(), W.scales.data(), N, K, q4, out.data());
    auto code = [&](std::int64_t n, std::int64_t k) -> int {  // q of the stored layout
      if (n >= N) return 0;
      if (!q4) return reinterpret_cast<const std::int8_t*>(W.codes.data())[n * K + k];
      const std::uint8_t b = W.codes[std::size_t(n * K / 2 + k / 2)];
      return (k % 2 == 0 ? b & 0x0F : b >> 4) - 8;
    };
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t g = 0; g < G; ++g) {
        const std::uint8_t* c = out.data() + (b * G + g) * (q4 ? 320 : 576);
        for (int n = 0; n < 16; ++n) {
          const std::int64_t row = b * 16 + n;
          float scale;
          std::memcpy(&scale, c + (q4 ? 256 : 512) + 4 * n, 4);
          EXPECT_EQ(scale, row < N ? W.scales[std::size_t(row * G + g)] : 0.0f) << "row " << row << " g " << g;
          for (int j = 0; j < (q4 ? 4 : 8); ++j)
            for (int i = 0; i < 4; ++i) {
              const std::uint8_t byte = c[64 * j + 4 * n + i];
              if (q4) {
                ASSERT_EQ(byte & 0x0F, code(row, 32 * g + 8 * j + i) + 8) << "q4 row " << row << " g " << g << " j " << j;
                ASSERT_EQ(byte >> 4, code(row, 32 * g + 8 * j + 4 + i) + 8) << "q4 row " << row << " g " << g << " j " << j;
              } else {
                ASSERT_EQ(byte, code(row, 32 * g + 4 * j + i) + 128) << "q8 row " << row << " g " << g << " j " << j;
              }
            }
        }
      }
  }
}

TEST_F(QuantizedLinear, PackedWeightGivesTheSameBits) {
  // The packed copy (ops::pack_weight_to: what the model reads) against the stored rows, on every target: the
  // blocked kernels read the copy, the others ignore it.
  std::mt19937 rng(17);
  const std::int64_t K = 800, N = 83;
  TensorView f32_view;
  std::vector<float> fw(16 * 32, 0.5f);
  f32_view = TensorView(fw.data(), DType::kF32, Shape{16, 32});
  EXPECT_TRUE(test::pack_for_test(f32_view, false).view().empty());  // float weights are never packed
  EXPECT_EQ(f32_view.packed, nullptr);
  for (bool q4 : {false, true}) {
    QWeight W(N, K, q4, rng);
    TensorView packed_view = W.view;
    const Tensor packed = test::pack_for_test(packed_view, false);
    if (!ops::cpu::quant::blocked_kernels_active()) {
      EXPECT_TRUE(packed.view().empty());
      EXPECT_EQ(packed_view.packed, nullptr);
      GTEST_SKIP() << "this CPU has no AVX-512 VNNI: nothing is packed (the stored rows are read)";
    }
    ASSERT_EQ(packed.numel(), ops::cpu::quant::blocked_bytes(N, K, q4));
    ASSERT_EQ(packed_view.packed, packed.data<std::uint8_t>());
    for (std::int64_t M : {1, 2, 5, 130}) {
      const std::vector<float> x = test::random_vec(M * K, rng, -3.0f, 3.0f);
      const std::vector<float> bias = test::random_vec(N, rng);
      const TensorView bv(const_cast<float*>(bias.data()), DType::kF32, Shape{N});
      const auto want = reference(x, K, M, W, bias.data(), N);
      for (CpuTarget t : ops::cpu::supported_cpu_targets()) {
        ops::cpu::set_cpu_target_for_test(t);
        std::vector<float> y(std::size_t(M * N), -7.0f);
        ops::linear(x.data(), K, M, packed_view, bv, y.data(), N);
        ASSERT_EQ(std::memcmp(y.data(), want.data(), y.size() * 4), 0) << ops::cpu::cpu_target_name(t) << " q4 " << q4 << " M " << M;
      }
    }
  }
}

TEST_F(QuantizedLinear, ActivationQuantizersBitwiseEqualTheReference) {
  // Step 1 (quant_kernels.h) by the AVX2 and AVX-512 quantizers against the scalar reference, on
  // random groups and on the edge cases, one group each: zeros, ±0, a single value, values so small
  // that 256·127/amax overflows (amax 2.1e-36, 3.4e-37, subnormal: inv = 0, the group contributes
  // nothing; before, the reference's codes were undefined and the targets disagreed), just above
  // that bound, huge values, NaN and Inf.
  std::mt19937 rng(31);
  const std::int64_t K = 15 * 32;
  std::vector<float> x = test::random_vec(K, rng, -2.0f, 2.0f);
  auto fill = [&](std::int64_t g, auto f) {
    for (std::int64_t i = 0; i < 32; ++i) x[std::size_t(g * 32 + i)] = f(i);
  };
  fill(0, [](std::int64_t) { return 0.0f; });
  fill(1, [](std::int64_t i) { return i % 2 ? -0.0f : 0.0f; });
  fill(2, [](std::int64_t i) { return i == 7 ? -3.0f : 0.0f; });
  fill(3, [](std::int64_t i) { return float(i - 10) * 1e-37f; });
  fill(4, [](std::int64_t i) { return float(i - 20) * 1.7e-38f; });
  fill(5, [](std::int64_t i) { return float(i - 5) * 1e-45f; });
  fill(6, [](std::int64_t i) { return float(i - 3) * 4e-36f; });
  fill(7, [](std::int64_t i) { return float(i - 16) * 2e37f; });
  fill(8, [](std::int64_t i) { return i == 31 ? std::nanf("") : 1.0f; });
  fill(9, [](std::int64_t i) { return i == 0 ? -INFINITY : 1.0f; });
  std::vector<std::int8_t> q0(std::size_t(K), 0), l0(std::size_t(K), 0), q1(std::size_t(K), 0), l1(std::size_t(K), 0);
  std::vector<float> s0(std::size_t(K / 32)), s1(std::size_t(K / 32));
  std::vector<std::int32_t> xsum(std::size_t(K / 32));
  ops::cpu::quant::quantize_row_ref(x.data(), K, q0.data(), l0.data(), s0.data());
  for (std::int64_t g : {3, 4, 5}) {  // below the bound: all codes 0
    for (std::int64_t k = g * 32; k < g * 32 + 32; ++k) ASSERT_TRUE(q0[std::size_t(k)] == 0 && l0[std::size_t(k)] == 0) << k;
  }
  EXPECT_EQ(q0[2 * 32 + 7], -127);
  EXPECT_NE(l0[6 * 32 + 4], 0);  // 4e-36 · 1: above the bound, quantized as usual
  EXPECT_TRUE(std::isnan(s0[8]) && std::isnan(s0[9]));
  auto check = [&](const char* what) {
    ASSERT_EQ(std::memcmp(q0.data(), q1.data(), q0.size()), 0) << what;
    ASSERT_EQ(std::memcmp(l0.data(), l1.data(), l0.size()), 0) << what;
    ASSERT_EQ(std::memcmp(s0.data(), s1.data(), s0.size() * 4), 0) << what;
  };
  std::fill(q1.begin(), q1.end(), std::int8_t{77});
  std::fill(l1.begin(), l1.end(), std::int8_t{77});
  if (ops::cpu::cpu_target() < CpuTarget::kAvx2) GTEST_SKIP() << "this CPU has no AVX2: only the reference ran";
  ops::cpu::quant::quantize_rows_avx2(x.data(), K, 1, K, q1.data(), l1.data(), s1.data());
  check("avx2");
  if (!ops::cpu::quant::blocked_kernels_active()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI: the AVX-512 quantizer is not used";
  std::fill(q1.begin(), q1.end(), std::int8_t{77});
  std::fill(l1.begin(), l1.end(), std::int8_t{77});
  std::fill(xsum.begin(), xsum.end(), 12345);
  ops::cpu::quant::quantize_rows_avx512(x.data(), K, 1, K, q1.data(), l1.data(), s1.data(), xsum.data());
  check("avx512");
  for (std::int64_t g = 0; g < K / 32; ++g) {
    std::int32_t want = 0;
    for (std::int64_t k = g * 32; k < g * 32 + 32; ++k) want += 256 * q0[std::size_t(k)] + l0[std::size_t(k)];
    EXPECT_EQ(xsum[std::size_t(g)], want) << "group " << g;
  }
}

TEST_F(QuantizedLinear, NonFiniteInputPropagates) {
  std::mt19937 rng(7);
  const std::int64_t K = 288, N = 5;
  for (bool q4 : {false, true}) {
    QWeight W(N, K, q4, rng);
    for (float bad : {std::nanf(""), INFINITY}) {
      std::vector<float> x = test::random_vec(K, rng);
      x[100] = bad;
      for (CpuTarget t : ops::cpu::supported_cpu_targets()) {
        ops::cpu::set_cpu_target_for_test(t);
        std::vector<float> y(static_cast<std::size_t>(N));
        ops::linear(x.data(), K, 1, W.view, TensorView(), y.data(), N);
        for (float v : y) EXPECT_TRUE(std::isnan(v)) << ops::cpu::cpu_target_name(t);
      }
    }
  }
}

}  // namespace
}  // namespace mamba
