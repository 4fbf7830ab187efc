// Parity of every CPU op with its plain reference (src/ops/ref), on every CPU target this machine
// supports (test::for_each_target), on random shapes incl. odd sizes, and the batch-invariance
// property of linear.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ops/ops.h"
#include "ops/ref/ref_ops.h"
#include "ops_test_util.h"

namespace mamba {
namespace {

using test::max_abs_diff;
using test::random_vec;

struct LinearCase { std::int64_t M, K, N; DType dtype; bool bias; };
void PrintTo(const LinearCase& c, std::ostream* os) {
  *os << "M" << c.M << "_K" << c.K << "_N" << c.N << "_" << dtype_name(c.dtype) << (c.bias ? "_bias" : "");
}

class LinearParity : public ::testing::TestWithParam<LinearCase> {};

TEST_P(LinearParity, MatchesReferenceAndIsBatchInvariant) {
  test::for_each_target([&] {
    const auto c = GetParam();
    std::mt19937 rng(static_cast<unsigned>(c.M * 131 + c.K * 7 + c.N));
    const std::int64_t ldx = c.K + 3, ldy = c.N + 5;  // strided rows
    auto x = random_vec(c.M * ldx, rng);
    auto wf = random_vec(c.N * c.K, rng);
    auto bf = random_vec(c.N, rng);
    std::vector<float> w_round, b_round;
    std::vector<std::uint16_t> wh, bh;
    TensorView W, B;
    if (c.dtype == DType::kF32) {
      W = TensorView(wf.data(), DType::kF32, {c.N, c.K});
      B = TensorView(bf.data(), DType::kF32, {c.N});
    } else {
      wh = test::to_half(wf, c.dtype, w_round);
      bh = test::to_half(bf, c.dtype, b_round);
      W = TensorView(wh.data(), c.dtype, {c.N, c.K});
      B = TensorView(bh.data(), c.dtype, {c.N});
    }
    if (!c.bias) B = TensorView();

    std::vector<float> y(static_cast<std::size_t>(c.M * ldy), -7.0f), yr(y);
    ops::linear(x.data(), ldx, c.M, W, B, y.data(), ldy);
    ops::ref::linear(x.data(), ldx, c.M, W, B, yr.data(), ldy);
    for (std::int64_t m = 0; m < c.M; ++m)
      EXPECT_LE(max_abs_diff(y.data() + m * ldy, yr.data() + m * ldy, c.N), 2e-6 * c.K) << "row " << m;
    EXPECT_EQ(y[c.N], -7.0f) << "wrote past the row (ldy padding)";

    // Batch invariance: each row alone (M = 1) gives bitwise the same output as within the batch.
    for (std::int64_t m = 0; m < c.M; ++m) {
      std::vector<float> y1(static_cast<std::size_t>(c.N));
      ops::linear(x.data() + m * ldx, ldx, 1, W, B, y1.data(), c.N);
      ASSERT_EQ(0, std::memcmp(y1.data(), y.data() + m * ldy, sizeof(float) * std::size_t(c.N))) << "row " << m;
    }
    // Thread count does not change results.
    std::vector<float> y_1t(y.size(), -7.0f);
    const int saved = ops::num_threads();
    ops::set_num_threads(1);
    ops::linear(x.data(), ldx, c.M, W, B, y_1t.data(), ldy);
    ops::set_num_threads(saved);
    EXPECT_EQ(0, std::memcmp(y_1t.data(), y.data(), sizeof(float) * y.size()));
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearParity,
                         ::testing::Values(LinearCase{1, 1, 1, DType::kF32, true},
                                           LinearCase{5, 7, 3, DType::kF32, true},
                                           LinearCase{3, 33, 17, DType::kBF16, true},
                                           LinearCase{9, 64, 130, DType::kF16, false},
                                           LinearCase{17, 129, 67, DType::kF32, false},
                                           LinearCase{40, 256, 300, DType::kBF16, true},
                                           LinearCase{2, 1000, 41, DType::kF16, true}));

TEST(Embedding, MatchesReference) {
  test::for_each_target([&] {
    std::mt19937 rng(3);
    for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
      const std::int64_t V = 37, d = 13;
      auto tf = random_vec(V * d, rng);
      std::vector<float> rounded;
      std::vector<std::uint16_t> th;
      TensorView T;
      if (dt == DType::kF32) {
        T = TensorView(tf.data(), dt, {V, d});
      } else {
        th = test::to_half(tf, dt, rounded);
        T = TensorView(th.data(), dt, {V, d});
      }
      const std::vector<std::int32_t> ids = {0, 36, 5, 5, 17};
      std::vector<float> out(ids.size() * d), outr(out.size());
      ops::embedding(T, ids, out.data());
      ops::ref::embedding(T, ids, outr.data());
      EXPECT_EQ(0.0, max_abs_diff(out.data(), outr.data(), std::int64_t(out.size())));
      EXPECT_EQ(out[1 * d + 2], dt == DType::kF32 ? tf[36 * d + 2] : rounded[36 * d + 2]);
    }
  });
}

TEST(RmsNorm, MatchesReferenceWithAndWithoutWeight) {
  test::for_each_target([&] {
    std::mt19937 rng(5);
    for (std::int64_t D : {1, 7, 32, 259}) {
      const std::int64_t M = 6, ld = D + 2;
      auto x = random_vec(M * ld, rng, -3, 3);
      auto w = random_vec(D, rng);
      for (const float* wp : {static_cast<const float*>(w.data()), static_cast<const float*>(nullptr)}) {
        std::vector<float> y(M * ld), yr(M * ld);
        ops::rms_norm(x.data(), ld, M, D, wp, 1e-5f, y.data(), ld);
        ops::ref::rms_norm(x.data(), ld, M, D, wp, 1e-5f, yr.data(), ld);
        for (std::int64_t m = 0; m < M; ++m) EXPECT_LE(max_abs_diff(y.data() + m * ld, yr.data() + m * ld, D), 2e-6);
      }
      // In place (Falcon-Mamba's dt/B/C norms run in place on x_proj's output).
      std::vector<float> xi = x, yr(M * ld);
      ops::ref::rms_norm(x.data(), ld, M, D, nullptr, 1e-6f, yr.data(), ld);
      ops::rms_norm(xi.data(), ld, M, D, nullptr, 1e-6f, xi.data(), ld);
      for (std::int64_t m = 0; m < M; ++m) EXPECT_LE(max_abs_diff(xi.data() + m * ld, yr.data() + m * ld, D), 2e-6);
    }
  });
}

// The residual add fused with the next norm: h is the plain sum (bitwise), y the norm of it — the
// same values as the add followed by rms_norm, and within 2e-6 of the reference; 600 rows take the
// threaded path.
TEST(AddRmsNorm, AddsResidualThenNormalises) {
  test::for_each_target([&] {
    std::mt19937 rng(6);
    for (auto [M, D] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {5, 7}, {3, 259}, {600, 768}}) {
      auto h = random_vec(M * D, rng, -3, 3), r = random_vec(M * D, rng, -3, 3), w = random_vec(D, rng);
      auto hr = h, sum = h;
      for (std::int64_t i = 0; i < M * D; ++i) sum[i] += r[i];
      std::vector<float> y(M * D), yr(M * D), y_unfused(M * D);
      ops::add_rms_norm(h.data(), r.data(), M, D, w.data(), 1e-5f, y.data());
      ops::ref::add_rms_norm(hr.data(), r.data(), M, D, w.data(), 1e-5f, yr.data());
      ops::rms_norm(sum.data(), D, M, D, w.data(), 1e-5f, y_unfused.data(), D);
      EXPECT_EQ(0.0, max_abs_diff(h.data(), sum.data(), M * D)) << M << "x" << D;
      EXPECT_EQ(0.0, max_abs_diff(hr.data(), sum.data(), M * D)) << M << "x" << D;
      EXPECT_EQ(0.0, max_abs_diff(y.data(), y_unfused.data(), M * D)) << M << "x" << D;
      for (std::int64_t m = 0; m < M; ++m) EXPECT_LE(max_abs_diff(y.data() + m * D, yr.data() + m * D, D), 2e-6);
    }
  });
}

TEST(GatedRmsNorm, MatchesReferencePerGroup) {
  test::for_each_target([&] {
    std::mt19937 rng(7);
    for (std::int64_t G : {1, 2, 4}) {
      const std::int64_t M = 5, E = 12 * G, ldy = E + 1, ldz = E + 9;
      auto y0 = random_vec(M * ldy, rng, -2, 2);
      auto z = random_vec(M * ldz, rng, -3, 3);
      auto w = random_vec(E, rng);
      auto y = y0, yr = y0;
      ops::gated_rms_norm(y.data(), ldy, z.data(), ldz, M, E, G, w.data(), 1e-5f);
      ops::ref::gated_rms_norm(yr.data(), ldy, z.data(), ldz, M, E, G, w.data(), 1e-5f);
      EXPECT_LE(max_abs_diff(y.data(), yr.data(), M * ldy), 3e-6) << "G=" << G;
    }
    // Grouping matters: G = 2 differs from G = 1 on the same data.
    const std::int64_t E = 8;
    std::vector<float> y1 = {1, 2, 3, 4, 10, 20, 30, 40}, y2 = y1, z(E, 5.0f), w(E, 1.0f);
    ops::gated_rms_norm(y1.data(), E, z.data(), E, 1, E, 1, w.data(), 1e-5f);
    ops::gated_rms_norm(y2.data(), E, z.data(), E, 1, E, 2, w.data(), 1e-5f);
    EXPECT_NEAR(y2[0], y2[4], 1e-5);  // each group normalised on its own: same pattern, same values
    EXPECT_GT(std::fabs(y1[0] - y2[0]), 0.1);
  });
}

// A row whose mean square overflows fp32 (|x| ~ 1e21: x² ~ 1e42) is normalised to its RMS, as
// the float64 reference does; fp32's rsqrt(inf) = 0 had made it all zeros (constant logits, no
// error). Rows near fp32's largest values (3e38) too.
TEST(RmsNorm, HugeRowsNormaliseInsteadOfVanishing) {
  test::for_each_target([&] {
    for (float scale : {1e21f, 1e30f, 3e38f}) {
      const std::int64_t D = 37;
      std::vector<float> x(D), w(D, 1.5f), y(D), yr(D);
      for (std::int64_t i = 0; i < D; ++i) x[i] = scale * (i % 3 == 0 ? -1.0f : 0.5f + 0.01f * float(i)) / (scale > 1e38f ? 2.0f : 1.0f);
      ops::rms_norm(x.data(), D, 1, D, w.data(), 1e-5f, y.data(), D);
      ops::ref::rms_norm(x.data(), D, 1, D, w.data(), 1e-5f, yr.data(), D);
      EXPECT_LE(max_abs_diff(y.data(), yr.data(), D), 2e-6) << scale;
      EXPECT_GT(std::fabs(y[0]), 0.5f) << scale;
      if (scale > 1e38f) continue;  // the gate's y·silu(z) itself overflows fp32 there
      const std::int64_t G = 2, E = 2 * D;
      std::vector<float> g(E), z(E, 4.0f), wg(E, 1.0f);
      for (std::int64_t i = 0; i < E; ++i) g[i] = x[i % D];
      auto gr = g;
      ops::gated_rms_norm(g.data(), E, z.data(), E, 1, E, G, wg.data(), 1e-5f);
      ops::ref::gated_rms_norm(gr.data(), E, z.data(), E, 1, E, G, wg.data(), 1e-5f);
      EXPECT_LE(max_abs_diff(g.data(), gr.data(), E), 3e-6) << scale;
      EXPECT_GT(std::fabs(g[0]), 0.5f) << scale;
    }
  });
}

TEST(Conv1d, MatchesReferenceAndContinuesFromState) {
  test::for_each_target([&] {
    std::mt19937 rng(11);
    for (std::int64_t K : {2, 3, 4}) {
      for (std::int64_t L : {1, 2, 3, 5, 16}) {
        const std::int64_t C = 19, ldx = C + 4;
        auto x = random_vec(L * ldx, rng);
        auto w = random_vec(C * K, rng);
        auto b = random_vec(C, rng);
        auto st0 = random_vec(C * (K - 1), rng);
        for (const float* bp : {static_cast<const float*>(b.data()), static_cast<const float*>(nullptr)}) {
          auto st = st0, str = st0;
          std::vector<float> y(L * C), yr(L * C);
          ops::conv1d_silu(x.data(), ldx, L, C, K, w.data(), bp, st.data(), y.data());
          ops::ref::conv1d_silu(x.data(), ldx, L, C, K, w.data(), bp, str.data(), yr.data());
          EXPECT_LE(max_abs_diff(y.data(), yr.data(), L * C), 1e-6) << "K=" << K << " L=" << L;
          EXPECT_EQ(0.0, max_abs_diff(st.data(), str.data(), C * (K - 1)));
        }
        // Token by token from the same state equals the block.
        auto st_blk = st0, st_tok = st0;
        std::vector<float> yb(L * C), yt(L * C);
        ops::conv1d_silu(x.data(), ldx, L, C, K, w.data(), b.data(), st_blk.data(), yb.data());
        for (std::int64_t t = 0; t < L; ++t)
          ops::conv1d_silu(x.data() + t * ldx, ldx, 1, C, K, w.data(), b.data(), st_tok.data(), yt.data() + t * C);
        EXPECT_EQ(0.0, max_abs_diff(yb.data(), yt.data(), L * C));
        EXPECT_EQ(0.0, max_abs_diff(st_blk.data(), st_tok.data(), C * (K - 1)));
      }
    }
  });
}

TEST(Elementwise, SoftplusClampSiluMul) {
  test::for_each_target([&] {
    std::mt19937 rng(13);
    const std::int64_t M = 4, n = 11, ld = 15;
    auto dt0 = random_vec(M * ld, rng, -30, 30);
    dt0[0] = 25.0f;  // > 20: identity branch
    auto bias = random_vec(n, rng);
    for (auto [lo, hi] : {std::pair<float, float>{0.0f, INFINITY}, {0.01f, 0.5f}}) {
      auto dt = dt0, dtr = dt0;
      ops::softplus_clamp(dt.data(), ld, M, n, bias.data(), lo, hi);
      ops::ref::softplus_clamp(dtr.data(), ld, M, n, bias.data(), lo, hi);
      EXPECT_LE(max_abs_diff(dt.data(), dtr.data(), M * ld), 2e-6);
      for (std::int64_t m = 0; m < M; ++m)
        for (std::int64_t i = 0; i < n; ++i) {
          EXPECT_GE(dt[m * ld + i], lo);
          EXPECT_LE(dt[m * ld + i], hi);
        }
    }
    {  // the formula's corners: identity past 20, log 2 at 0, tiny values kept (log1p)
      std::vector<float> v{25.0f, 0.0f, -30.0f};
      ops::softplus_clamp(v.data(), 3, 1, 3, nullptr, 0.0f, std::numeric_limits<float>::infinity());
      EXPECT_FLOAT_EQ(v[0], 25.0f);
      EXPECT_NEAR(v[1], std::log(2.0f), 1e-7);
      EXPECT_NEAR(v[2], std::exp(-30.0f), 1e-6 * std::exp(-30.0f));
    }

    auto z = random_vec(M * ld, rng, -5, 5), x = random_vec(M * ld, rng);
    std::vector<float> o(M * ld), orf(M * ld);
    ops::silu_mul(z.data(), ld, x.data(), ld, M, n, o.data(), ld);
    ops::ref::silu_mul(z.data(), ld, x.data(), ld, M, n, orf.data(), ld);
    EXPECT_LE(max_abs_diff(o.data(), orf.data(), M * ld), 1e-6);

  });
}

TEST(SelectiveScan, MatchesReferenceAndSplits) {
  test::for_each_target([&] {
    std::mt19937 rng(17);
    for (auto [L, E, N] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{1, 3, 1}, {7, 10, 5}, {33, 64, 16}}) {
      const std::int64_t ld = E + 2, ldbc = N + 3;
      auto u = random_vec(L * ld, rng), z = random_vec(L * ld, rng, -3, 3);
      auto dt = random_vec(L * ld, rng, 0.001f, 1.0f);
      auto A = random_vec(E * N, rng, -4.0f, -0.05f);
      auto B = random_vec(L * ldbc, rng), C = random_vec(L * ldbc, rng), D = random_vec(E, rng);
      auto h0 = random_vec(E * N, rng);
      auto h = h0, hr = h0;
      std::vector<float> y(L * ld), yr(L * ld);
      ops::SelectiveScanArgs a{L, E, N, u.data(), ld, dt.data(), ld, A.data(), B.data(), ldbc, C.data(), ldbc,
                               D.data(), z.data(), ld, h.data(), y.data(), ld};
      ops::selective_scan(a);
      auto ar = a;
      ar.ssm_state = hr.data();
      ar.y = yr.data();
      ops::ref::selective_scan(ar);
      EXPECT_LE(max_abs_diff(h.data(), hr.data(), E * N), 1e-5);
      for (std::int64_t t = 0; t < L; ++t) EXPECT_LE(max_abs_diff(y.data() + t * ld, yr.data() + t * ld, E), 1e-5);

      // Split anywhere: bitwise the same (the scan is sequential per channel).
      if (L > 2) {
        auto hs = h0;
        std::vector<float> ys(L * ld);
        const std::int64_t cut = L / 2;
        for (auto [t0, n] : {std::pair{std::int64_t{0}, cut}, {cut, L - cut}}) {
          ops::SelectiveScanArgs s = a;
          s.L = n;
          s.u += t0 * ld; s.dt += t0 * ld; s.B += t0 * ldbc; s.C += t0 * ldbc; s.z += t0 * ld;
          s.ssm_state = hs.data();
          s.y = ys.data() + t0 * ld;
          ops::selective_scan(s);
        }
        EXPECT_EQ(0, std::memcmp(hs.data(), h.data(), sizeof(float) * E * N));
        for (std::int64_t t = 0; t < L; ++t)
          EXPECT_EQ(0, std::memcmp(ys.data() + t * ld, y.data() + t * ld, sizeof(float) * E));
      }
    }
  });
}

}  // namespace
}  // namespace mamba
