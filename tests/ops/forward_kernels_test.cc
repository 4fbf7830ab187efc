// The dispatched forward-pass kernels (src/ops/cpu/kernels.h: vector exp, softplus, SiLU, GEMM,
// Mamba-1 scan, SSD, conv1d) on EVERY target this CPU supports, against the reference ops: odd
// sizes (channels not a multiple of the vector width, N not a multiple of 8/16), L = 1,
// L < d_conv − 1, mid-chunk SSD positions, n_groups 1/2/4; and the batched ops (one region for a
// decode step of several sequences) bitwise equal to per-sequence calls, for 1 and 2 threads.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ops/cpu/cpu_target.h"
#include "ops/cpu/kernels.h"
#include "ops/ops.h"
#include "ops/ref/ref_ops.h"
#include "ops_test_util.h"

namespace mamba {
namespace {

using ops::cpu::CpuTarget;
using test::for_each_target;
using test::max_abs_diff;
using test::random_vec;

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

/// Distance in units in the last place between two finite floats of the same sign.
std::int64_t ulp_distance(float a, float b) {
  std::int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::llabs(std::int64_t(ia) - std::int64_t(ib));
}

TEST(VectorExp, AtMostTwoUlpAndEdgeCases) {
  std::vector<float> x;
  for (float v = -86.6f; v < 88.7f; v += 0.00731f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-8f, -1e-8f, 0.5f, -0.5f, 88.72f, -86.59f}) x.push_back(v);
  for_each_target([&] {
    std::vector<float> y(x.size());
    ops::cpu::cpu_kernels().exp_row(x.data(), y.data(), static_cast<std::int64_t>(x.size()));
    std::int64_t worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float want = static_cast<float>(std::exp(static_cast<double>(x[i])));
      worst = std::max(worst, ulp_distance(y[i], want));
    }
    EXPECT_LE(worst, 2);
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> edge = {-1000.0f, -88.0f, 89.0f, 1000.0f, -inf, inf, std::nanf("")}, out(edge.size());
    ops::cpu::cpu_kernels().exp_row(edge.data(), out.data(), static_cast<std::int64_t>(edge.size()));
    EXPECT_EQ(out[0], 0.0f);
    EXPECT_EQ(out[1], 0.0f);  // below −86.6: 0 (true value < 2.6e−38)
    EXPECT_EQ(out[2], inf);
    EXPECT_EQ(out[3], inf);
    EXPECT_EQ(out[4], 0.0f);
    EXPECT_EQ(out[5], inf);
    EXPECT_TRUE(std::isnan(out[6]));
  });
}

TEST(SumExp, MatchesTheDoubleSumOnEveryTarget) {
  // ops::sum_exp (log-softmax's normaliser) against std::exp in double: relative error ≤ 4e-6
  // (fp32 lane sums of ≤ 64 terms per block), rows of every tail length, logits spread like a
  // model's (N(0, 3), a few large), shift = the maximum and a shift below it (terms > 1).
  std::mt19937 rng(77);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (const std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{7}, std::int64_t{16}, std::int64_t{17},
                               std::int64_t{255}, std::int64_t{257}, std::int64_t{1023}, std::int64_t{50280}}) {
    std::vector<float> x(static_cast<std::size_t>(n));
    for (auto& v : x) v = normal(rng);
    if (n > 3) x[3] = 25.0f;
    const float mx = n > 0 ? *std::max_element(x.begin(), x.end()) : 0.0f;
    for (const float shift : {mx, mx - 10.0f}) {
      const double want = ops::ref::sum_exp(x.data(), shift, n);
      for_each_target([&] {
        const double got = ops::sum_exp(x.data(), shift, n);
        if (n == 0) EXPECT_EQ(got, 0.0);
        else EXPECT_NEAR(got / want, 1.0, 4e-6) << "n " << n << " shift " << shift;
      });
    }
  }
}

// The scan's decay 2^(dt·fl(A·log2 e)): the two fp32 products and fl(log2 e) (relative 0.11·2⁻²³) put
// up to 1.12·|x|·2⁻²³ of relative error into 2^x (x = dt·A: the same order as the rounding of dt·A
// itself, which every fp32 scan has); the polynomial with its fp32 steps ≤ 1.44·2⁻²³ (1.62 without
// FMA), reached only at |r| = ½, i.e. |x| ≥ ½ — bound
// 1.5·2⁻²³ + 1.15·|x|·2⁻²³ (simd.h vexp2_nonpos); below 2⁻¹²⁵ it stays in [0, 2⁻¹²⁵].
TEST(ScanDecay, WithinTheProductRoundingOfExp) {
  std::mt19937 rng(11);
  std::vector<float> dt, A;
  for (int i = 0; i < 20000; ++i) {  // x = dt·A over [−100, 0], log-spread so small |x| are covered
    dt.push_back(std::exp(std::uniform_real_distribution<float>(-12.0f, 2.0f)(rng)));
    A.push_back(-std::exp(std::uniform_real_distribution<float>(-6.0f, 3.9f)(rng)));
  }
  for (float v : {0.0f, 1e-30f, 1.0f}) {  // x = 0 and tiny |x|: exactly or nearly 1
    dt.push_back(v);
    A.push_back(-1.0f);
  }
  dt.push_back(1e30f);  // far below the range: clamped, not 0·inf
  A.push_back(-1e30f);
  for_each_target([&] {
    std::vector<float> out(dt.size());
    ops::cpu::cpu_kernels().scan_decay_row(dt.data(), A.data(), out.data(), static_cast<std::int64_t>(dt.size()));
    double worst = 0.0;  // relative error in units of the bound
    for (std::size_t i = 0; i < dt.size(); ++i) {
      const double x = double(dt[i]) * double(A[i]), want = std::exp(x);
      if (want < 0x1p-125) {
        EXPECT_GE(out[i], 0.0f) << i;
        EXPECT_LE(out[i], 0x1p-125f) << i;
        continue;
      }
      const double bound = 1.5 * 0x1p-23 + 1.15 * std::fabs(x) * 0x1p-23;
      worst = std::max(worst, std::fabs(out[i] - want) / want / bound);
    }
    EXPECT_LE(worst, 1.0);
    EXPECT_GT(worst, 0.05);  // the bound is not vacuous: errors come within 20× of it
    EXPECT_EQ(out[dt.size() - 4], 1.0f);  // exp(0)
  });
}

// softplus against log1p(exp(x)) in double over the range where it is a normal float: relative
// error ≤ 8e−7 (≈ 5 ulp at the top of a binade; measured ≤ 2.7e−7 on AVX-512), x > 20 → x exactly.
TEST(VectorSoftplus, RelativeErrorOverTheRange) {
  std::vector<float> x;
  for (float v = -86.0f; v < 30.0f; v += 0.000917f) x.push_back(v);
  for_each_target([&] {
    std::vector<float> y = x;
    ops::cpu::cpu_kernels().softplus_clamp_row(y.data(), nullptr, static_cast<std::int64_t>(y.size()), 0.0f, INFINITY);
    double worst = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (x[i] > 20.0f) {
        ASSERT_EQ(y[i], x[i]);
        continue;
      }
      const double want = std::log1p(std::exp(double(x[i])));
      worst = std::max(worst, std::fabs(y[i] - want) / want);
    }
    EXPECT_LE(worst, 8e-7);
    EXPECT_GT(worst, 1e-8);  // the sweep does reach the rounding level (the bound is not vacuous)
  });
}

TEST(VectorSoftplus, ClampKeepsNaN) {
  // A NaN Δ must reach the state and the logits (the forward pass then reports non-finite logits)
  // as in the reference and PyTorch's clamp: the clamp once mapped it to lo (Δ = 0: the channel
  // silently skipped that token).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for_each_target([&] {
    for (const auto& [lo, hi] : {std::pair{0.0f, INFINITY}, std::pair{1e-3f, 0.1f}}) {
      std::vector<float> d = {nan, -nan, 0.5f, 30.0f, -30.0f}, dr = d;
      ops::softplus_clamp(d.data(), 5, 1, 5, nullptr, lo, hi);
      ops::ref::softplus_clamp(dr.data(), 5, 1, 5, nullptr, lo, hi);
      EXPECT_TRUE(std::isnan(d[0]) && std::isnan(d[1])) << d[0] << " " << d[1];
      EXPECT_TRUE(std::isnan(dr[0]) && std::isnan(dr[1]));
      for (int i = 2; i < 5; ++i) {
        EXPECT_GE(d[i], lo);
        EXPECT_LE(d[i], hi);
        EXPECT_NEAR(d[i], dr[i], 2e-7f * std::max(1.0f, std::fabs(dr[i])));
      }
    }
  });
}

TEST(VectorSoftplusSilu, MatchReferenceOnEveryTarget) {
  std::mt19937 rng(3);
  const std::int64_t M = 3, n = 37, ld = 41;
  auto d0 = random_vec(M * ld, rng, -40, 40);
  d0[1] = 25.0f; d0[2] = 20.0f; d0[3] = -90.0f; d0[4] = 0.0f; d0[5] = 1e-7f; d0[6] = -17.0f;
  auto bias = random_vec(n, rng);
  auto z = random_vec(M * ld, rng, -100, 100), x = random_vec(M * ld, rng);
  for_each_target([&] {
    for (const float* b : {static_cast<const float*>(bias.data()), static_cast<const float*>(nullptr)}) {
      auto d = d0, dr = d0;
      ops::softplus_clamp(d.data(), ld, M, n, b, 0.0f, INFINITY);
      ops::ref::softplus_clamp(dr.data(), ld, M, n, b, 0.0f, INFINITY);
      for (std::int64_t i = 0; i < M * ld; ++i)  // relative: tiny softplus values stay accurate
        EXPECT_NEAR(d[i], dr[i], 2e-7 * std::max(1.0f, std::fabs(dr[i]))) << i;
    }
    std::vector<float> o(M * ld), orf(M * ld);
    ops::silu_mul(z.data(), ld, x.data(), ld, M, n, o.data(), ld);
    ops::ref::silu_mul(z.data(), ld, x.data(), ld, M, n, orf.data(), ld);
    EXPECT_LE(max_abs_diff(o.data(), orf.data(), M * ld), 1e-5);
  });
}

TEST(Gemm, MatchesDoubleOnOddShapes) {
  std::mt19937 rng(5);
  for (auto [M, n, K] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{1, 1, 1}, {3, 5, 7}, {7, 33, 19},
                         {16, 64, 128}, {13, 47, 0}}) {
    const std::int64_t lda = K + 3, ldb = n + 2, ldc = n + 5;
    auto A = random_vec(M * lda, rng), B = random_vec(std::max<std::int64_t>(K, 1) * ldb, rng);
    auto C0 = random_vec(M * ldc, rng);
    for_each_target([&] {
      for (bool acc : {false, true}) {
        auto C = C0;
        ops::cpu::cpu_kernels().gemm(M, n, K, A.data(), lda, B.data(), ldb, C.data(), ldc, {.accumulate = acc});
        for (std::int64_t i = 0; i < M; ++i)
          for (std::int64_t j = 0; j < n; ++j) {
            double want = acc ? C0[i * ldc + j] : 0.0;
            for (std::int64_t k = 0; k < K; ++k) want += double(A[i * lda + k]) * B[k * ldb + j];
            EXPECT_NEAR(C[i * ldc + j], want, 1e-5) << M << "x" << n << "x" << K << " at " << i << "," << j;
          }
        for (std::int64_t i = 0; i < M; ++i)  // columns past n untouched
          for (std::int64_t j = n; j < ldc; ++j) EXPECT_EQ(C[i * ldc + j], C0[i * ldc + j]);
        // gemm_at: the same product from A stored transposed ([K, M], ld M + 1): bitwise equal.
        std::vector<float> At(std::max<std::int64_t>(K, 1) * (M + 1));
        for (std::int64_t i = 0; i < M; ++i)
          for (std::int64_t k = 0; k < K; ++k) At[k * (M + 1) + i] = A[i * lda + k];
        auto Ct = C0;
        ops::cpu::cpu_kernels().gemm_at(M, n, K, At.data(), M + 1, B.data(), ldb, Ct.data(), ldc, {.accumulate = acc});
        EXPECT_TRUE(bitwise_equal(Ct, C));
      }
    });
  }
}

TEST(Gemm, ColumnsDoNotDependOnTheTileWidth) {
  // 64 columns go through the AVX-512 target's 6 × 4-vector tile, 32 through the 6 × 2-vector one:
  // every C element must be the same FMA chain over k (bitwise), on every target.
  std::mt19937 rng(23);
  for (auto [M, K] : {std::pair<std::int64_t, std::int64_t>{16, 128}, {5, 64}, {13, 7}}) {
    const std::int64_t ldc = 64 + 3;
    auto A = random_vec(M * K, rng), B = random_vec(K * 64, rng), C0 = random_vec(M * ldc, rng);
    for_each_target([&] {
      for (bool acc : {false, true}) {
        auto wide = C0, narrow = C0;
        ops::cpu::cpu_kernels().gemm(M, 64, K, A.data(), K, B.data(), 64, wide.data(), ldc, {.accumulate = acc});
        for (std::int64_t j0 : {0, 32})
          ops::cpu::cpu_kernels().gemm(M, 32, K, A.data(), K, B.data() + j0, 64, narrow.data() + j0, ldc, {.accumulate = acc});
        EXPECT_TRUE(bitwise_equal(wide, narrow)) << M << "x64x" << K << (acc ? " accumulate" : "");
      }
    });
  }
}

TEST(Gemm, BetaAndRowScaleEqualTheSeparatePasses) {
  // C = (beta·C + A·B) · row_scale in one call must be bitwise: scale C by beta (one rounding),
  // the plain accumulating gemm, then scale each row (one rounding) — what the SSD ran before
  // folding its decays into the GEMM. Shapes through both tiles (64 columns: the 4-vector tile on
  // AVX-512) and ragged ones, rows past a tile's 6, gemm and gemm_at, every target.
  std::mt19937 rng(29);
  for (auto [M, n, K] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{64, 64, 128}, {13, 64, 64}, {7, 33, 19},
                         {1, 5, 3}, {9, 80, 0}}) {
    const std::int64_t lda = K + 1, ldb = n + 3, ldc = n + 2;
    auto A = random_vec(M * lda, rng), B = random_vec(std::max<std::int64_t>(K, 1) * ldb, rng);
    auto C0 = random_vec(M * ldc, rng), rs = random_vec(M, rng, 0.0f, 1.0f);
    std::vector<float> At(std::max<std::int64_t>(K, 1) * M);
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t k = 0; k < K; ++k) At[k * M + i] = A[i * lda + k];
    for_each_target([&] {
      const auto& kern = ops::cpu::cpu_kernels();
      for (bool acc : {false, true})
        for (float beta : {1.0f, 0.37f, 0.0f})
          for (const float* row_scale : {static_cast<const float*>(nullptr), static_cast<const float*>(rs.data())}) {
            auto want = C0;
            for (std::int64_t i = 0; i < M; ++i)
              for (std::int64_t j = 0; j < n; ++j) want[i * ldc + j] *= beta;
            kern.gemm(M, n, K, A.data(), lda, B.data(), ldb, want.data(), ldc, {.accumulate = acc});
            if (row_scale != nullptr)
              for (std::int64_t i = 0; i < M; ++i)
                for (std::int64_t j = 0; j < n; ++j) want[i * ldc + j] *= row_scale[i];
            const ops::cpu::GemmOut out{.accumulate = acc, .beta = beta, .row_scale = row_scale};
            auto got = C0, got_t = C0;
            kern.gemm(M, n, K, A.data(), lda, B.data(), ldb, got.data(), ldc, out);
            kern.gemm_at(M, n, K, At.data(), M, B.data(), ldb, got_t.data(), ldc, out);
            const std::string what = fmt::format("{}x{}x{} acc {} beta {} row_scale {}", M, n, K, acc, beta,
                                                 row_scale != nullptr);
            EXPECT_TRUE(bitwise_equal(got, want)) << what;
            EXPECT_TRUE(bitwise_equal(got_t, want)) << what;
          }
    });
  }
}

struct ScanData {
  std::int64_t L, E, N, ld, ldbc;
  std::vector<float> u, z, dt, A, B, C, D, h0;
  ScanData(std::int64_t L_, std::int64_t E_, std::int64_t N_, std::mt19937& rng)
      : L(L_), E(E_), N(N_), ld(E_ + 3), ldbc(N_ + 2) {
    u = random_vec(L * ld, rng); z = random_vec(L * ld, rng, -3, 3);
    dt = random_vec(L * ld, rng, 0.001f, 1.5f);
    A = random_vec(E * N, rng, -8.0f, -0.05f);
    B = random_vec(L * ldbc, rng); C = random_vec(L * ldbc, rng); D = random_vec(E, rng);
    h0 = random_vec(E * N, rng);
  }
  /// decode_step: by default every one-token call is a decode step (the one-token kernel).
  ops::SelectiveScanArgs args(float* h, float* y, bool with_d, bool with_z, int decode_step = -1) const {
    return {L, E, N, u.data(), ld, dt.data(), ld, A.data(), B.data(), ldbc, C.data(), ldbc,
            with_d ? D.data() : nullptr, with_z ? z.data() : nullptr, ld, h, y, ld,
            decode_step < 0 ? L == 1 : decode_step == 1};
  }
};

TEST(SelectiveScanKernel, MatchesReferenceOnEveryTarget) {
  std::mt19937 rng(7);
  for (auto [L, E, N] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{1, 1, 1}, {1, 37, 16}, {9, 67, 5},
                         {20, 130, 17}, {5, 16, 16}}) {
    const ScanData d(L, E, N, rng);
    for (bool with_d : {true, false})
      for (bool with_z : {true, false}) {
        auto hr = d.h0;
        std::vector<float> yr(L * d.ld);
        ops::ref::selective_scan(d.args(hr.data(), yr.data(), with_d, with_z));
        for_each_target([&] {
          for (int decode_step : {0, 1}) {
            if (decode_step == 1 && L != 1) continue;
            auto h = d.h0;
            std::vector<float> y(L * d.ld);
            ops::selective_scan(d.args(h.data(), y.data(), with_d, with_z, decode_step));
            EXPECT_LE(max_abs_diff(h.data(), hr.data(), E * N), 1e-5) << "L" << L << " E" << E << " N" << N << " decode " << decode_step;
            for (std::int64_t t = 0; t < L; ++t) EXPECT_LE(max_abs_diff(y.data() + t * d.ld, yr.data() + t * d.ld, E), 1e-5);
          }
        });
      }
  }
}

TEST(SelectiveScanKernel, BatchEqualsPerSequenceForAnyThreadCount) {
  std::mt19937 rng(9);
  std::vector<ScanData> seqs;
  for (std::int64_t L : {1, 1, 3, 1, 2}) seqs.emplace_back(L, 141, 16, rng);  // 141 channels: 3 blocks + tail
  for_each_target([&] {
    std::vector<std::vector<float>> h1, y1;
    for (const ScanData& d : seqs) {
      h1.push_back(d.h0);
      y1.emplace_back(d.L * d.ld);
      ops::selective_scan(d.args(h1.back().data(), y1.back().data(), true, true));
    }
    const int saved = ops::num_threads();
    for (int threads : {1, 2}) {
      ops::set_num_threads(threads);
      std::vector<std::vector<float>> h2, y2;
      std::vector<ops::SelectiveScanArgs> args;
      for (const ScanData& d : seqs) {
        h2.push_back(d.h0);
        y2.emplace_back(d.L * d.ld);
      }
      for (std::size_t i = 0; i < seqs.size(); ++i) args.push_back(seqs[i].args(h2[i].data(), y2[i].data(), true, true));
      ops::selective_scan_batch(args);
      for (std::size_t i = 0; i < seqs.size(); ++i) {
        EXPECT_TRUE(bitwise_equal(h1[i], h2[i])) << "sequence " << i << ", " << threads << " threads";
        EXPECT_TRUE(bitwise_equal(y1[i], y2[i])) << "sequence " << i << ", " << threads << " threads";
      }
    }
    ops::set_num_threads(saved);
  });
}

TEST(SelectiveScanKernel, OneTokenPrefillIsBitwiseTheFirstRowOfALongerCall) {
  // A prompt split leaving a one-token piece must give the unsplit result (decode_step false);
  // only a decode step may take the one-token kernel.
  std::mt19937 rng(21);
  for (std::int64_t N : {16, 5}) {
    const ScanData d(7, 53, N, rng);
    for_each_target([&] {
      auto h_long = d.h0, h_one = d.h0;
      std::vector<float> y_long(d.L * d.ld), y_one(d.ld);
      ops::selective_scan(d.args(h_long.data(), y_long.data(), true, true));
      ops::SelectiveScanArgs one = d.args(h_one.data(), y_one.data(), true, true);
      one.L = 1;
      one.decode_step = false;
      ops::selective_scan(one);
      // Then tokens 1..6 from the state after token 0: the same final state and rows as the long call.
      ops::SelectiveScanArgs rest = d.args(h_one.data(), y_one.data(), true, true);
      std::vector<float> y_rest((d.L - 1) * d.ld);
      rest.L = d.L - 1;
      rest.u += d.ld; rest.dt += d.ld; rest.B += d.ldbc; rest.C += d.ldbc; rest.z += d.ld;
      rest.y = y_rest.data();
      ops::selective_scan(rest);
      EXPECT_EQ(0, std::memcmp(y_one.data(), y_long.data(), sizeof(float) * std::size_t(d.E))) << "N " << N;
      EXPECT_EQ(0, std::memcmp(y_rest.data(), y_long.data() + d.ld, sizeof(float) * std::size_t((d.L - 1) * d.ld - 3)))
          << "N " << N;
      EXPECT_TRUE(bitwise_equal(h_one, h_long)) << "N " << N;
    });
  }
}

TEST(SelectiveScanKernel, DecodeChannelAloneEqualsChannelInABlock) {
  // One token, d_state 16: the AVX-512 target runs 16 channels at a time with their row sums
  // reduced together (hsum16x16), the others one or four at a time; a channel's y and state must
  // not depend on which path took it (bitwise), on every target.
  std::mt19937 rng(13);
  const ScanData d(1, 37, 16, rng);  // 37 channels: two blocks of 16, then 4 + 1
  for_each_target([&] {
    auto h = d.h0;
    std::vector<float> y(d.ld);
    ops::selective_scan(d.args(h.data(), y.data(), true, true));
    for (std::int64_t e = 0; e < d.E; ++e) {
      std::vector<float> h1(d.h0.begin() + e * d.N, d.h0.begin() + (e + 1) * d.N), y1(1);
      ops::SelectiveScanArgs one = d.args(h1.data(), y1.data(), true, true);
      one.E = 1;
      one.u += e; one.dt += e; one.A += e * d.N; one.D += e; one.z += e;
      ops::selective_scan(one);
      EXPECT_EQ(0, std::memcmp(&y1[0], &y[std::size_t(e)], sizeof(float))) << "channel " << e << ": " << y1[0] << " vs " << y[std::size_t(e)];
      EXPECT_EQ(0, std::memcmp(h1.data(), h.data() + e * d.N, sizeof(float) * std::size_t(d.N))) << "channel " << e;
    }
  });
}

TEST(SelectiveScanKernel, FusedSoftplusEqualsTheSeparatePassOnEveryTarget) {
  // dt_softplus: the scan takes Δ = softplus(dt) itself (Mamba-1's forward pass). Bitwise what
  // softplus_clamp(lo = 0, hi = inf) and then the scan give, in prefill and in the one-token kernel
  // (300 channels: more than one of its 256-channel pieces), with dt over both softplus branches
  // (x > 20 → x) and far below 0; dt itself untouched; the reference within 1e-5 relative.
  std::mt19937 rng(23);
  for (auto [L, E, N] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{1, 300, 16}, {1, 37, 5}, {9, 67, 16},
                         {20, 130, 17}}) {
    ScanData d(L, E, N, rng);
    d.dt = random_vec(L * d.ld, rng, -30.0f, 25.0f);
    std::vector<float> dt_sp = d.dt;
    ops::ref::softplus_clamp(dt_sp.data(), d.ld, L, E, nullptr, 0.0f, std::numeric_limits<float>::infinity());
    auto hr = d.h0, hr_sep = d.h0;
    std::vector<float> yr(L * d.ld), yr_sep(L * d.ld);
    ops::SelectiveScanArgs ref = d.args(hr.data(), yr.data(), true, true);
    ref.dt_softplus = true;
    ops::ref::selective_scan(ref);
    ops::SelectiveScanArgs ref_sep = d.args(hr_sep.data(), yr_sep.data(), true, true);
    ref_sep.dt = dt_sp.data();
    ops::ref::selective_scan(ref_sep);
    EXPECT_TRUE(bitwise_equal(hr, hr_sep));
    EXPECT_TRUE(bitwise_equal(yr, yr_sep));
    for_each_target([&] {
      for (int decode_step : {0, 1}) {
        if (decode_step == 1 && L != 1) continue;
        SCOPED_TRACE(testing::Message() << "L" << L << " E" << E << " N" << N << " decode " << decode_step);
        std::vector<float> dt_sep = d.dt;
        ops::softplus_clamp(dt_sep.data(), d.ld, L, E, nullptr, 0.0f, std::numeric_limits<float>::infinity());
        auto h_sep = d.h0, h = d.h0;
        std::vector<float> y_sep(L * d.ld), y(L * d.ld);
        ops::SelectiveScanArgs sep = d.args(h_sep.data(), y_sep.data(), true, true, decode_step);
        sep.dt = dt_sep.data();
        ops::selective_scan(sep);
        const std::vector<float> dt_before = d.dt;
        ops::SelectiveScanArgs fused = d.args(h.data(), y.data(), true, true, decode_step);
        fused.dt_softplus = true;
        ops::selective_scan(fused);
        EXPECT_TRUE(bitwise_equal(h, h_sep));
        EXPECT_TRUE(bitwise_equal(y, y_sep));
        EXPECT_TRUE(bitwise_equal(d.dt, dt_before));
        double worst = 0;
        for (std::size_t i = 0; i < y.size(); ++i)
          worst = std::max(worst, std::abs(double(y[i]) - yr[i]) / std::max(1.0, std::abs(double(yr[i]))));
        for (std::size_t i = 0; i < h.size(); ++i)
          worst = std::max(worst, std::abs(double(h[i]) - hr[i]) / std::max(1.0, std::abs(double(hr[i]))));
        EXPECT_LE(worst, 1e-5);
      }
    });
  }
}

TEST(Conv1dKernel, MatchesReferenceAndBatchIsBitwisePerSequence) {
  std::mt19937 rng(11);
  // Every conv width the decode kernel specialises (d_conv 2–4) and one it runs generically.
  for (const std::int64_t K : {2, 3, 4, 5}) {
    SCOPED_TRACE(testing::Message() << "d_conv " << K);
    const std::int64_t C = 45, ldx = C + 6;
    auto w = random_vec(C * K, rng), b = random_vec(C, rng);
    std::vector<float> wT(C * K);
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t k = 0; k < K; ++k) wT[k * C + c] = w[c * K + k];
    const std::vector<std::int64_t> lens = {1, 2, 1, 17, 3};  // L < K − 1, L = K − 1, longer than a row block
    std::vector<std::vector<float>> xs, st0;
    for (std::int64_t L : lens) {
      xs.push_back(random_vec(L * ldx, rng, -4, 4));
      st0.push_back(random_vec(C * (K - 1), rng));
    }
    for_each_target([&] {
      std::vector<std::vector<float>> st1, y1;
      for (std::size_t i = 0; i < lens.size(); ++i) {
        auto sr = st0[i];
        std::vector<float> yr(lens[i] * C);
        ops::ref::conv1d_silu(xs[i].data(), ldx, lens[i], C, K, w.data(), b.data(), sr.data(), yr.data());
        st1.push_back(st0[i]);
        y1.emplace_back(lens[i] * C);
        ops::conv1d_silu(xs[i].data(), ldx, lens[i], C, K, w.data(), b.data(), st1.back().data(), y1.back().data());
        EXPECT_LE(max_abs_diff(y1.back().data(), yr.data(), lens[i] * C), 2e-6) << "L=" << lens[i];
        EXPECT_TRUE(bitwise_equal(st1.back(), sr));
      }
      const int saved = ops::num_threads();
      for (int threads : {1, 2}) {
        ops::set_num_threads(threads);
        std::vector<std::vector<float>> st2 = st0, y2;
        std::vector<ops::Conv1dSeq> seqs;
        for (std::size_t i = 0; i < lens.size(); ++i) y2.emplace_back(lens[i] * C);
        for (std::size_t i = 0; i < lens.size(); ++i)
          seqs.push_back({xs[i].data(), lens[i], st2[i].data(), y2[i].data()});
        ops::conv1d_silu_batch(seqs, ldx, C, K, wT.data(), b.data());
        for (std::size_t i = 0; i < lens.size(); ++i) {
          EXPECT_TRUE(bitwise_equal(y1[i], y2[i])) << "sequence " << i;
          EXPECT_TRUE(bitwise_equal(st1[i], st2[i])) << "sequence " << i;
        }
        // A decode batch (every sequence one token: the transpose-free path) gives the same values.
        std::vector<std::vector<float>> st3 = {st0[0], st0[2]}, y3(2, std::vector<float>(C));
        const std::vector<ops::Conv1dSeq> dec = {{xs[0].data(), 1, st3[0].data(), y3[0].data()},
                                                 {xs[2].data(), 1, st3[1].data(), y3[1].data()}};
        ops::conv1d_silu_batch(dec, ldx, C, K, wT.data(), b.data());
        EXPECT_TRUE(bitwise_equal(y3[0], y1[0]) && bitwise_equal(y3[1], y1[2]));
        EXPECT_TRUE(bitwise_equal(st3[0], st1[0]) && bitwise_equal(st3[1], st1[2]));
      }
      ops::set_num_threads(saved);
    });
  }
}

struct SsdCase { std::int64_t L, H, P, N, G, Q, position; };

struct SsdData {
  SsdCase c;
  std::int64_t ldx, lddt, ldbc, ldy;
  std::vector<float> x, dt, A, B, C, D, h0;
  SsdData(const SsdCase& c_, std::mt19937& rng)
      : c(c_), ldx(c_.H * c_.P + 3), lddt(c_.H + 1), ldbc(c_.G * c_.N + 2), ldy(c_.H * c_.P + 1) {
    x = random_vec(c.L * ldx, rng); dt = random_vec(c.L * lddt, rng, 0.01f, 0.6f);
    A = random_vec(c.H, rng, -3.0f, -0.1f);
    B = random_vec(c.L * ldbc, rng); C = random_vec(c.L * ldbc, rng); D = random_vec(c.H, rng);
    h0 = random_vec(c.H * c.P * c.N, rng);
  }
  ops::SsdArgs args(float* h, float* y, float* chunk_states = nullptr) const {
    ops::SsdArgs a;
    a.L = c.L; a.H = c.H; a.P = c.P; a.N = c.N; a.G = c.G; a.Q = c.Q; a.position = c.position;
    a.x = x.data(); a.ldx = ldx; a.dt = dt.data(); a.lddt = lddt; a.A = A.data();
    a.B = B.data(); a.ldb = ldbc; a.C = C.data(); a.ldc = ldbc; a.D = D.data();
    a.ssm_state = h; a.y = y; a.ldy = ldy; a.chunk_states = chunk_states;
    return a;
  }
};

/// One SSD call on d from its initial state: the chunked op on the current target, or (reference)
/// the float64 recurrence. Outputs y, the state after each chunk (cs) and the final state (h).
struct SsdOutputs {
  std::vector<float> h, y, cs;
};
SsdOutputs run_ssd(const SsdData& d, bool reference) {
  const SsdCase& c = d.c;
  const std::int64_t S = c.H * c.P * c.N, n_chunks = ops::ssd_num_chunks(c.position, c.L, c.Q);
  SsdOutputs o{d.h0, std::vector<float>(c.L * d.ldy), std::vector<float>(n_chunks * S)};
  const ops::SsdArgs a = d.args(o.h.data(), o.y.data(), o.cs.data());
  if (reference) ops::ref::ssd(a);
  else ops::ssd(a);
  return o;
}

// One row of W: f ·= dA below the diagonal, w = cb·f up to it, zeros to the strip's end; a decayed
// f below FLT_MIN becomes exactly 0 (subnormal operands slow Intel cores ~10×), NaN stays NaN.
// 17 decayed columns: a whole vector and a scalar tail on every width.
TEST(SsdKernels, DecayRowFlushesSubnormalsAndZeroFillsTheStrip) {
  const float tiny = 1.5f * std::numeric_limits<float>::min();  // · 0.5 → subnormal
  for_each_target([&] {
    std::vector<float> f(24), cb(24), w(24, -7.0f);
    for (int j = 0; j < 17; ++j) f[j] = j % 2 ? 1.0f + j : tiny;
    f[5] = std::numeric_limits<float>::quiet_NaN();
    f[17] = 0.25f;  // the diagonal: Δ_i, not decayed
    for (int j = 0; j < 24; ++j) cb[j] = 2.0f + j;
    ops::cpu::cpu_kernels().ssd_decay_row(w.data(), f.data(), cb.data(), 0.5f, 17, 18, 24);
    for (int j = 0; j < 17; ++j) {
      if (j == 5) {
        EXPECT_TRUE(std::isnan(f[j]) && std::isnan(w[j]));
        continue;
      }
      const float want = j % 2 ? 0.5f * (1.0f + j) : 0.0f;
      EXPECT_EQ(f[j], want) << j;
      EXPECT_EQ(w[j], cb[j] * want) << j;
    }
    EXPECT_EQ(f[17], 0.25f);
    EXPECT_EQ(w[17], cb[17] * 0.25f);
    for (int j = 18; j < 24; ++j) EXPECT_EQ(w[j], 0.0f) << j;
  });
}

TEST(SsdKernels, ChunkedMatchesRecurrenceOnEveryTarget) {
  std::mt19937 rng(13);
  for (const SsdCase& c : {SsdCase{1, 2, 3, 4, 1, 4, 0}, SsdCase{19, 4, 5, 9, 2, 4, 1}, SsdCase{23, 8, 3, 6, 4, 8, 5},
                           SsdCase{70, 4, 17, 33, 1, 32, 7}, SsdCase{40, 6, 64, 20, 2, 64, 63},
                           SsdCase{37, 3, 5, 128, 1, 256, 0}}) {
    const SsdData d(c, rng);
    const SsdOutputs ref = run_ssd(d, /*reference=*/true);
    for_each_target([&] {
      const SsdOutputs got = run_ssd(d, false);
      const std::vector<float>& y = got.y;
      // fmt, not std::string operator+: GCC 12 warns falsely (-Wrestrict) on that chain once inlined.
      const std::string where = fmt::format("L{} N{} G{}", c.L, c.N, c.G);
      for (std::int64_t t = 0; t < c.L; ++t)
        EXPECT_LE(max_abs_diff(y.data() + t * d.ldy, ref.y.data() + t * d.ldy, c.H * c.P), 3e-5) << where << " t" << t;
      EXPECT_LE(max_abs_diff(got.cs.data(), ref.cs.data(), std::int64_t(ref.cs.size())), 3e-5) << where;
      EXPECT_LE(max_abs_diff(got.h.data(), ref.h.data(), std::int64_t(ref.h.size())), 3e-5) << where;
      // Row i of a chunk does not depend on the chunk's length: a prefix gives bitwise its rows.
      const std::int64_t Lp = c.L / 2 + 1;
      auto hp = d.h0;
      std::vector<float> yp(c.L * d.ldy);
      ops::SsdArgs ap = d.args(hp.data(), yp.data());
      ap.L = Lp;
      ops::ssd(ap);
      EXPECT_EQ(0, std::memcmp(yp.data(), y.data(), sizeof(float) * std::size_t((Lp - 1) * d.ldy + c.H * c.P)))
          << where << " prefix " << Lp;
    });
  }
}

// Strong decays (Δ·A down to −48 per token) over long chunks: the chunk's running sum S of Δ·A
// reaches thousands, so exp(S_i − S_j) taken as a difference of two such sums lost most of its
// digits (one ulp of |S| ≈ 3e-4 in the exponent). Chunk sizes that are not multiples of 64 (100,
// 1000) once ran as chunks of their full length. The decays are now products of the per-token
// decays (one rounding per step, like the recurrence; flushed to 0 below FLT_MIN) and chunks are at
// most 64 tokens, so the error stays at the recurrence's rounding; the state at
// each multiple of Q is still reported, and a split there is still bitwise the unsplit call.
TEST(SsdKernels, StrongDecaysAndLongChunkSizesStayAtRecurrencePrecision) {
  std::mt19937 rng(29);
  for (const SsdCase& c : {SsdCase{300, 4, 8, 16, 2, 1000, 0}, SsdCase{250, 4, 8, 16, 1, 100, 37},
                           SsdCase{200, 2, 16, 32, 2, 256, 5}, SsdCase{150, 2, 4, 8, 1, 97, 90}}) {
    SsdData d(c, rng);
    d.dt = random_vec(c.L * d.lddt, rng, 0.01f, 3.0f);
    d.A = random_vec(c.H, rng, -16.0f, -8.0f);
    const SsdOutputs ref = run_ssd(d, /*reference=*/true);
    for_each_target([&] {
      const SsdOutputs got = run_ssd(d, false);
      const std::vector<float>&h = got.h, &y = got.y;
      const std::string where = fmt::format("L{} Q{} pos{}", c.L, c.Q, c.position);
      double worst = 0;
      for (std::int64_t t = 0; t < c.L; ++t)
        worst = std::max(worst, double(max_abs_diff(y.data() + t * d.ldy, ref.y.data() + t * d.ldy, c.H * c.P)));
      EXPECT_LE(worst, 2e-5) << where;
      EXPECT_LE(max_abs_diff(got.cs.data(), ref.cs.data(), std::int64_t(ref.cs.size())), 2e-5) << where;
      // Split at the first absolute multiple of Q inside the call: bitwise the unsplit call.
      const std::int64_t cut = (c.position / c.Q + 1) * c.Q - c.position;
      if (cut < c.L) {
        auto hs = d.h0;
        std::vector<float> ys(c.L * d.ldy);
        ops::SsdArgs a1 = d.args(hs.data(), ys.data());
        a1.L = cut;
        ops::ssd(a1);
        ops::SsdArgs a2 = d.args(hs.data(), ys.data() + cut * d.ldy);
        a2.L = c.L - cut; a2.position = c.position + cut;
        a2.x += cut * d.ldx; a2.dt += cut * d.lddt; a2.B += cut * d.ldbc; a2.C += cut * d.ldbc;
        ops::ssd(a2);
        EXPECT_TRUE(bitwise_equal(hs, h)) << where;
        EXPECT_TRUE(bitwise_equal(ys, y)) << where;
      }
    });
  }
}

TEST(SsdKernels, DecodeBatchMatchesRecurrenceAndIsBitwisePerSequence) {
  std::mt19937 rng(17);
  for (std::int64_t G : {1, 2, 4}) {
    std::vector<SsdData> seqs;
    for (std::int64_t pos : {0, 5, 255, 256, 1000}) seqs.emplace_back(SsdCase{1, 8, 12, 19, G, 256, pos}, rng);
    for_each_target([&] {
      std::vector<std::vector<float>> h1, y1;
      for (const SsdData& d : seqs) {
        auto hr = d.h0;
        std::vector<float> yr(d.ldy);
        ops::ref::ssd(d.args(hr.data(), yr.data()));
        h1.push_back(d.h0);
        y1.emplace_back(d.ldy);
        const ops::SsdArgs a = d.args(h1.back().data(), y1.back().data());
        ops::ssd_decode_batch({&a, 1});
        EXPECT_LE(max_abs_diff(y1.back().data(), yr.data(), d.ldy), 1e-5) << "G" << G;
        EXPECT_LE(max_abs_diff(h1.back().data(), hr.data(), std::int64_t(hr.size())), 1e-5) << "G" << G;
      }
      const int saved = ops::num_threads();
      for (int threads : {1, 2}) {
        ops::set_num_threads(threads);
        std::vector<std::vector<float>> h2, y2;
        for (const SsdData& d : seqs) {
          h2.push_back(d.h0);
          y2.emplace_back(d.ldy);
        }
        std::vector<ops::SsdArgs> args;
        for (std::size_t i = 0; i < seqs.size(); ++i) args.push_back(seqs[i].args(h2[i].data(), y2[i].data()));
        ops::ssd_decode_batch(args);
        for (std::size_t i = 0; i < seqs.size(); ++i) {
          EXPECT_TRUE(bitwise_equal(h1[i], h2[i])) << "sequence " << i << ", " << threads << " threads";
          EXPECT_TRUE(bitwise_equal(y1[i], y2[i])) << "sequence " << i << ", " << threads << " threads";
        }
      }
      ops::set_num_threads(saved);
    });
  }
}

TEST(SsdKernels, ThreadCountDoesNotChangeChunkedResults) {
  std::mt19937 rng(19);
  const SsdData d(SsdCase{300, 8, 16, 128, 4, 48, 5}, rng);  // 40 (chunk, group) items, chunks < Q
  for_each_target([&] {
    const int saved = ops::num_threads();
    std::vector<float> ref_h, ref_y;
    for (int threads : {1, 2, 3}) {
      ops::set_num_threads(threads);
      auto h = d.h0;
      std::vector<float> y(d.c.L * d.ldy);
      ops::ssd(d.args(h.data(), y.data()));
      if (threads == 1) {
        ref_h = h;
        ref_y = y;
      } else {
        EXPECT_TRUE(bitwise_equal(h, ref_h));
        EXPECT_TRUE(bitwise_equal(y, ref_y));
      }
    }
    ops::set_num_threads(saved);
  });
}

TEST(GatedRmsNormKernel, MatchesReferenceOnEveryTarget) {
  std::mt19937 rng(23);
  for (std::int64_t G : {1, 2, 4}) {
    const std::int64_t M = 3, E = 13 * G, ldy = E + 1, ldz = E + 9;
    auto y0 = random_vec(M * ldy, rng, -2, 2), z = random_vec(M * ldz, rng, -30, 30), w = random_vec(E, rng);
    auto yr = y0;
    ops::ref::gated_rms_norm(yr.data(), ldy, z.data(), ldz, M, E, G, w.data(), 1e-5f);
    for_each_target([&] {
      auto y = y0;
      ops::gated_rms_norm(y.data(), ldy, z.data(), ldz, M, E, G, w.data(), 1e-5f);
      EXPECT_LE(max_abs_diff(y.data(), yr.data(), M * ldy), 3e-6) << "G=" << G;
    });
  }
}

TEST(LogitsScan, ArgmaxIsTheFirstMaximalIndexLikeAPlainLoop) {
  std::mt19937 rng(17);
  for (std::int64_t n : {1, 7, 1023, 1024, 1025, 50280}) {
    std::vector<float> x = random_vec(n, rng, -30.0f, 30.0f);
    EXPECT_EQ(ops::argmax(x.data(), n), ops::ref::argmax(x.data(), n)) << "n " << n;
    // The maximum twice, in two blocks and then inside one: the first one wins.
    for (auto [a, b] : {std::pair<std::int64_t, std::int64_t>{n / 3, n - 1}, {n - 2, n - 1}, {0, n / 2}}) {
      if (a < 0 || a >= b) continue;
      std::vector<float> y = x;
      y[std::size_t(a)] = y[std::size_t(b)] = 99.0f;
      EXPECT_EQ(ops::argmax(y.data(), n), a) << "n " << n << ", maxima at " << a << " and " << b;
    }
    std::vector<float> ninf(std::size_t(n), -std::numeric_limits<float>::infinity());
    EXPECT_EQ(ops::argmax(ninf.data(), n), 0) << "all -inf, n " << n;
    ninf[std::size_t(n - 1)] = -1e30f;
    EXPECT_EQ(ops::argmax(ninf.data(), n), n - 1) << "one finite at the end, n " << n;
  }
}

TEST(LogitsScan, FindNonFiniteReturnsTheFirstNanOrInf) {
  std::mt19937 rng(19);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (std::int64_t n : {1, 1024, 1025, 5000}) {
    std::vector<float> x = random_vec(n, rng, -1e30f, 1e30f);
    EXPECT_EQ(ops::find_non_finite(x.data(), n), -1) << "n " << n;
    for (float bad : {nan, inf, -inf})
      for (std::int64_t at : {std::int64_t(0), n / 2, n - 1}) {
        std::vector<float> y = x;
        y[std::size_t(at)] = bad;
        if (at + 1 < n) y[std::size_t(n - 1)] = nan;  // a later one must not win
        EXPECT_EQ(ops::find_non_finite(y.data(), n), at) << "n " << n << ", " << bad << " at " << at;
        EXPECT_EQ(ops::ref::find_non_finite(y.data(), n), at) << "n " << n << ", " << bad << " at " << at;
      }
  }
}

// The sampler's softmax terms (ops::exp_shifted) on every target: within 2 ulp of the reference's
// fp32 rounding of exp(x − shift) in double, in place too, and exactly 0 far below the shift.
TEST(LogitsScan, ExpShiftedWithinTwoUlpOnEveryTarget) {
  std::mt19937 rng(29);
  for (std::int64_t n : {1, 15, 17, 1000}) {
    std::vector<float> x = random_vec(n, rng, -40.0f, 10.0f);
    x[0] = 10.0f;  // the shift itself: exp(0) = 1
    if (n > 1) x[std::size_t(n - 1)] = -200.0f;  // underflows to 0
    std::vector<float> want(x.size());
    ops::ref::exp_shifted(x.data(), 10.0f, want.data(), n);
    for_each_target([&] {
      std::vector<float> out(x.size()), in_place = x;
      ops::exp_shifted(x.data(), 10.0f, out.data(), n);
      ops::exp_shifted(in_place.data(), 10.0f, in_place.data(), n);
      for (std::int64_t i = 0; i < n; ++i) {
        EXPECT_LE(ulp_distance(out[std::size_t(i)], want[std::size_t(i)]), 2) << "n " << n << " at " << i << ": " << out[std::size_t(i)];
        EXPECT_EQ(out[std::size_t(i)], in_place[std::size_t(i)]) << "n " << n << " at " << i;
      }
      EXPECT_EQ(out[0], 1.0f);
      if (n > 1) {
        EXPECT_EQ(out[std::size_t(n - 1)], 0.0f);
      }
    });
  }
}

}  // namespace
}  // namespace mamba
