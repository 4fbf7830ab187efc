// The gated-MLP prefix of a state-spaces Mamba-2 layer (d_ssm < expand·d_model; mamba_ssm
// Mamba2.forward: z0, x0, z, xBC, dt = split(in_proj(u), [d_mlp, d_mlp, d_ssm, d_ssm + 2·G·N, H]),
// then out_proj(cat([silu(z0) · x0, y]))) against a plain computation. No fixture has d_mlp > 0 and
// mamba_ref.py leaves the branch out, so a model computing silu(x0) · z0 passed every other test.
// The SSM branch is switched off by zero out_proj columns for y: each token's logits are then the
// MLP branch of its own embedding, computed here in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "mamba/model.h"

namespace mamba {
namespace {

constexpr std::int64_t kD = 8, kMlp = 8, kSsm = 8, kV = 16, kRows = 2 * kMlp + 2 * kSsm + 2 * 2 + 2;

test::StTensor tensor(const std::string& name, std::vector<std::int64_t> shape, const std::vector<float>& v) {
  return test::StTensor{name, "F32", std::move(shape), std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float))};
}

double rms_scale(const std::vector<double>& x, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  return 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
}

TEST(Mamba2GatedMlp, PrefixIsSiluZ0TimesX0BeforeY) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  auto random = [&](std::int64_t n) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v) x = u(rng);
    return v;
  };
  const auto emb = random(kV * kD), norm = random(kD), in_proj = random(kRows * kD), norm_f = random(kD);
  auto out_proj = random(kD * (kMlp + kSsm));
  for (std::int64_t r = 0; r < kD; ++r)
    for (std::int64_t c = kMlp; c < kMlp + kSsm; ++c) out_proj[std::size_t(r * (kMlp + kSsm) + c)] = 0.0f;  // y's columns
  const std::string p = "backbone.layers.0.";
  test::TempDir dir;
  dir.write("config.json", R"({"d_model": 8, "n_layer": 1, "vocab_size": 16,
    "ssm_cfg": {"layer": "Mamba2", "d_state": 2, "d_conv": 2, "headdim": 4, "ngroups": 1, "d_ssm": 8}})");
  dir.write("model.safetensors",
            test::make_safetensors({tensor("backbone.embedding.weight", {kV, kD}, emb), tensor(p + "norm.weight", {kD}, norm),
                                    tensor(p + "mixer.in_proj.weight", {kRows, kD}, in_proj),
                                    tensor(p + "mixer.conv1d.weight", {kSsm + 4, 1, 2}, random((kSsm + 4) * 2)),
                                    tensor(p + "mixer.conv1d.bias", {kSsm + 4}, random(kSsm + 4)),
                                    tensor(p + "mixer.dt_bias", {2}, random(2)), tensor(p + "mixer.A_log", {2}, random(2)),
                                    tensor(p + "mixer.D", {2}, random(2)), tensor(p + "mixer.norm.weight", {kSsm}, random(kSsm)),
                                    tensor(p + "mixer.out_proj.weight", {kD, kMlp + kSsm}, out_proj),
                                    tensor("backbone.norm_f.weight", {kD}, norm_f)}));
  auto model = Model::load(dir.path());
  ASSERT_TRUE(model.ok()) << model.error().message;
  Model& m = **model;
  ASSERT_EQ(m.config().d_mlp, kMlp);
  const double eps = m.config().norm_eps;

  const std::vector<std::int32_t> ids = {3, 7, 1, 12, 3};
  const std::int64_t W = m.logits_width();
  std::vector<float> prefill(ids.size() * static_cast<std::size_t>(W)), stepped(prefill.size());
  State s = m.new_state();
  ASSERT_TRUE(m.prefill(ids, s, LogitsMode::kAll, prefill.data()).ok());
  State one = m.new_state();
  for (std::size_t t = 0; t < ids.size(); ++t) {
    State* states[] = {&one};
    const Status st = t == 0 ? m.prefill({&ids[0], 1}, one, LogitsMode::kLast, stepped.data())
                             : m.step({&ids[t], 1}, states, stepped.data() + t * std::size_t(W));
    ASSERT_TRUE(st.ok()) << st.message();
  }
  for (std::size_t t = 0; t < ids.size(); ++t) {
    // x = emb[id]; h = RMSNorm(x)·w; z0, x0 = in_proj rows [0, d_mlp), [d_mlp, 2·d_mlp) · h;
    // out = out_proj[:, :d_mlp] · (silu(z0) · x0); logits = emb · (RMSNorm(x + out)·w_f).
    std::vector<double> x(kD), h(kD), mlp(kMlp), r(kD);
    for (std::int64_t i = 0; i < kD; ++i) x[std::size_t(i)] = emb[std::size_t(ids[t] * kD + i)];
    const double sx = rms_scale(x, eps);
    for (std::int64_t i = 0; i < kD; ++i) h[std::size_t(i)] = x[std::size_t(i)] * sx * norm[std::size_t(i)];
    for (std::int64_t j = 0; j < kMlp; ++j) {
      double z0 = 0, x0 = 0;
      for (std::int64_t i = 0; i < kD; ++i) {
        z0 += double(in_proj[std::size_t(j * kD + i)]) * h[std::size_t(i)];
        x0 += double(in_proj[std::size_t((kMlp + j) * kD + i)]) * h[std::size_t(i)];
      }
      mlp[std::size_t(j)] = z0 / (1.0 + std::exp(-z0)) * x0;
    }
    for (std::int64_t i = 0; i < kD; ++i) {
      double o = 0;
      for (std::int64_t j = 0; j < kMlp; ++j) o += double(out_proj[std::size_t(i * (kMlp + kSsm) + j)]) * mlp[std::size_t(j)];
      r[std::size_t(i)] = x[std::size_t(i)] + o;
    }
    const double sr = rms_scale(r, eps);
    for (std::int64_t v = 0; v < kV; ++v) {
      double want = 0;
      for (std::int64_t i = 0; i < kD; ++i) want += double(emb[std::size_t(v * kD + i)]) * r[std::size_t(i)] * sr * norm_f[std::size_t(i)];
      EXPECT_NEAR(prefill[t * std::size_t(W) + std::size_t(v)], want, 1e-5) << "token " << t << ", logit " << v;
      EXPECT_NEAR(stepped[t * std::size_t(W) + std::size_t(v)], want, 1e-5) << "token " << t << " decoded, logit " << v;
    }
  }
}

}  // namespace
}  // namespace mamba
