// Every shared fixture and model loads and binds; the same weights in different formats
// (HF safetensors, sharded, state-spaces pytorch_model.bin, Python-json config) are identical.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "io/io_test_util.h"
#include "mamba/checkpoint.h"
#include "mamba/weights.h"

namespace mamba {
namespace {

namespace fs = std::filesystem;

struct Loaded {
  Checkpoint ckpt;
  ModelWeights w;
};

Loaded load(const std::string& dir) {
  auto ck = Checkpoint::open(dir);
  EXPECT_TRUE(ck.ok()) << (ck.ok() ? "" : ck.error().message);
  if (!ck.ok()) std::abort();
  Checkpoint c = std::move(ck).value();
  auto w = bind_weights(c);
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message);
  if (!w.ok()) std::abort();
  return Loaded{std::move(c), std::move(w).value()};
}

TEST(FixturesLoad, EveryFixtureAndModelLoadsAndBinds) {
  MAMBA_REQUIRE_SHARED(shared);
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(fs::path(shared) / "fixtures"))
    if (fs::is_regular_file(e.path() / "model" / "config.json")) dirs.push_back(e.path() / "model");
  for (const auto& e : fs::directory_iterator(fs::path(shared) / "models"))
    if (fs::is_regular_file(e.path() / "config.json")) dirs.push_back(e.path());
  ASSERT_GE(dirs.size(), 15u);
  for (const auto& d : dirs) {
    SCOPED_TRACE(d.string());
    auto ck = Checkpoint::open(d.string());
    ASSERT_TRUE(ck.ok()) << ck.error().message;
    auto w = bind_weights(*ck);
    ASSERT_TRUE(w.ok()) << w.error().message;
    const ModelConfig& c = ck->config();
    EXPECT_EQ(w->layers.size(), static_cast<std::size_t>(c.n_layer));
    EXPECT_EQ(w->embedding.shape, (Shape{c.padded_vocab_size(), c.d_model}));
    EXPECT_EQ(w->lm_head.shape, (Shape{c.padded_vocab_size(), c.d_model}));
    if (c.tie_embeddings) EXPECT_EQ(w->lm_head.data, w->embedding.data);
    else EXPECT_NE(w->lm_head.data, w->embedding.data);
    // Every non-empty view points into the checkpoint (stored dtype, no conversion).
    std::size_t bytes = 0;
    for (const auto& t : ck->tensors()) bytes += t.view.nbytes();
    EXPECT_EQ(bytes, ck->weight_bytes());
  }
}

TEST(FixturesLoad, ConfigsOfEachArchitecture) {
  MAMBA_REQUIRE_SHARED(shared);
  {
    Loaded m = load(shared + "/fixtures/mamba1-odd/model");
    const ModelConfig& c = m.ckpt.config();
    EXPECT_EQ(c.arch, Arch::kMamba1);
    EXPECT_EQ(c.d_model, 40);
    EXPECT_EQ(c.d_inner, 120);
    EXPECT_EQ(c.d_state, 5);
    EXPECT_EQ(c.d_conv, 3);
    EXPECT_EQ(c.dt_rank, 3);
    EXPECT_TRUE(c.proj_bias);
    EXPECT_FALSE(c.conv_bias);
    EXPECT_FALSE(c.tie_embeddings);
    EXPECT_DOUBLE_EQ(c.norm_eps, 1e-6);
    EXPECT_TRUE(m.w.layers[0].conv1d_bias.empty());
    EXPECT_EQ(m.w.layers[2].in_proj_bias.shape, (Shape{240}));
    EXPECT_EQ(m.w.layers[1].x_proj.shape, (Shape{13, 120}));
    EXPECT_EQ(m.w.embedding.dtype, DType::kF32);
  }
  {
    Loaded m = load(shared + "/fixtures/falcon-mamba-tiny/model");
    EXPECT_EQ(m.ckpt.config().arch, Arch::kFalconMamba);
    EXPECT_DOUBLE_EQ(m.ckpt.config().mixer_rms_eps, 1e-6);
    EXPECT_EQ(m.ckpt.config().dt_rank, 4);
  }
  {
    Loaded m = load(shared + "/fixtures/mamba2-odd/model");
    const ModelConfig& c = m.ckpt.config();
    EXPECT_EQ(c.arch, Arch::kMamba2);
    EXPECT_EQ(c.d_inner, 96);
    EXPECT_EQ(c.n_heads, 8);
    EXPECT_EQ(c.head_dim, 12);
    EXPECT_EQ(c.n_groups, 4);
    EXPECT_EQ(c.chunk_size, 8);
    EXPECT_EQ(c.d_mlp, 0);
    EXPECT_EQ(c.conv_channels(), 96 + 2 * 4 * 8);
    EXPECT_EQ(c.in_proj_rows(), 264);
    EXPECT_DOUBLE_EQ(c.time_step_min_limit, 0.01);
    EXPECT_DOUBLE_EQ(c.time_step_max_limit, 0.5);
    EXPECT_EQ(m.w.layers[0].gated_norm.shape, (Shape{96}));
    EXPECT_EQ(m.w.layers[0].conv1d_weight.shape, (Shape{160, 1, 3}));
  }
  {
    Loaded m = load(shared + "/fixtures/mamba1-odd-f16/model");
    EXPECT_EQ(m.w.embedding.dtype, DType::kF16);
    EXPECT_EQ(m.w.layers[0].in_proj.dtype, DType::kF16);
  }
  {
    Loaded m = load(shared + "/models/mamba2-books-7m-bpe8k");
    EXPECT_EQ(m.w.embedding.dtype, DType::kBF16);
    EXPECT_EQ(m.ckpt.config().padded_vocab_size(), 8192);
    EXPECT_TRUE(m.ckpt.config().tie_embeddings);
    EXPECT_EQ(m.ckpt.config().state_bytes(), 12 * ((512 + 128) * 3 + 8 * 64 * 64) * 4);
  }
}

// Same weights in two checkpoints: every bound view has the same dtype, shape and bytes.
void expect_same_weights(const std::string& a_dir, const std::string& b_dir) {
  SCOPED_TRACE(a_dir + " vs " + b_dir);
  Loaded a = load(a_dir), b = load(b_dir);
  auto va = test::all_views(a.w), vb = test::all_views(b.w);
  ASSERT_EQ(va.size(), vb.size());
  for (std::size_t i = 0; i < va.size(); ++i) {
    SCOPED_TRACE(va[i].first);
    EXPECT_EQ(va[i].second.empty(), vb[i].second.empty());
    EXPECT_EQ(va[i].second.dtype, vb[i].second.dtype);
    EXPECT_EQ(va[i].second.shape, vb[i].second.shape);
    EXPECT_TRUE(test::view_bytes(va[i].second) == test::view_bytes(vb[i].second));
  }
}

TEST(FixturesLoad, SameWeightsAcrossFormats) {
  MAMBA_REQUIRE_SHARED(shared);
  const std::string f = shared + "/fixtures/";
  expect_same_weights(f + "mamba1-tiny/model", f + "mamba1-tiny-ssm/model");
  expect_same_weights(f + "mamba1-tiny/model", f + "mamba1-tiny-sharded/model");
  expect_same_weights(f + "mamba2-tiny/model", f + "mamba2-tiny-ssm/model");
  expect_same_weights(f + "mamba2-tiny/model", f + "mamba2-tiny-pyjson/model");
}

// A bias the config asks for but the weights lack is named by the key of this checkpoint's own
// config.json (state-spaces: ssm_cfg.bias, not HF's use_bias, which that file does not have).
TEST(FixturesLoad, StateSpacesMissingBiasNamesItsConfigKey) {
  MAMBA_REQUIRE_SHARED(shared);
  test::TempDir d;
  const std::string src = shared + "/fixtures/mamba1-tiny-ssm/model";
  std::ifstream in(src + "/config.json");
  nlohmann::json cfg = nlohmann::json::parse(in);
  cfg["ssm_cfg"]["bias"] = true;
  d.write("config.json", cfg.dump());
  std::filesystem::create_symlink(src + "/pytorch_model.bin", d.path() + "/pytorch_model.bin");
  auto ck = Checkpoint::open(d.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  auto w = bind_weights(*ck);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message.find("in_proj.bias"), std::string::npos) << w.error().message;
  EXPECT_NE(w.error().message.find("the config says ssm_cfg.bias = true"), std::string::npos) << w.error().message;
}

TEST(FixturesLoad, StateSpacesConfigsMatchHF) {
  MAMBA_REQUIRE_SHARED(shared);
  const std::string f = shared + "/fixtures/";
  Loaded hf = load(f + "mamba2-tiny/model"), ss = load(f + "mamba2-tiny-ssm/model"), py = load(f + "mamba2-tiny-pyjson/model");
  for (const Loaded* m : {&ss, &py}) {
    const ModelConfig &a = hf.ckpt.config(), &b = m->ckpt.config();
    EXPECT_EQ(a.arch, b.arch);
    EXPECT_EQ(a.d_model, b.d_model);
    EXPECT_EQ(a.d_inner, b.d_inner);
    EXPECT_EQ(a.n_heads, b.n_heads);
    EXPECT_EQ(a.head_dim, b.head_dim);
    EXPECT_EQ(a.n_groups, b.n_groups);
    EXPECT_EQ(a.chunk_size, b.chunk_size);
    EXPECT_EQ(a.padded_vocab_size(), b.padded_vocab_size());
    EXPECT_EQ(a.tie_embeddings, b.tie_embeddings);
    EXPECT_EQ(a.time_step_max_limit, b.time_step_max_limit);
    EXPECT_TRUE(std::isinf(b.time_step_max_limit));
  }
  EXPECT_EQ(ss.ckpt.config().format, CheckpointFormat::kStateSpaces);
  EXPECT_EQ(ss.ckpt.config().vocab_size, 50277);
  EXPECT_EQ(ss.ckpt.config().padded_vocab_size(), 50280);
  Loaded ss1 = load(f + "mamba1-tiny-ssm/model");
  EXPECT_EQ(ss1.ckpt.config().arch, Arch::kMamba1);
  EXPECT_EQ(ss1.ckpt.config().dt_rank, 2);  // auto = ceil(32 / 16)
  EXPECT_EQ(ss1.ckpt.config().d_inner, 64);
}

TEST(FixturesLoad, Bf16PickleWithTiedHeadSharingTheEmbeddingStorage) {
  MAMBA_REQUIRE_SHARED(shared);
  const std::string f = shared + "/fixtures/";
  Loaded bf = load(f + "mamba2-tiny-ssm-bf16/model"), ref = load(f + "mamba2-tiny/model");
  const TensorEntry* emb = bf.ckpt.find("backbone.embedding.weight");
  const TensorEntry* head = bf.ckpt.find("lm_head.weight");
  ASSERT_NE(emb, nullptr);
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(emb->view.data, head->view.data);  // one storage, mapped once, no copy
  EXPECT_EQ(bf.w.lm_head.data, bf.w.embedding.data);
  // Values: bf16 rounding of the fp32 fixture.
  auto vb = test::all_views(bf.w), vr = test::all_views(ref.w);
  ASSERT_EQ(vb.size(), vr.size());
  std::size_t checked = 0;
  for (std::size_t i = 0; i < vb.size(); ++i) {
    if (vr[i].second.empty()) continue;
    SCOPED_TRACE(vb[i].first);
    ASSERT_EQ(vb[i].second.dtype, DType::kBF16);
    ASSERT_EQ(vb[i].second.shape, vr[i].second.shape);
    const auto* b = vb[i].second.as<const std::uint16_t>();
    const auto* r = vr[i].second.as<const float>();
    for (std::int64_t k = 0; k < vr[i].second.numel(); ++k) {
      ASSERT_EQ(b[k], f32_to_bf16(r[k])) << "element " << k;
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000000u);
}

TEST(FixturesLoad, PickleStoragesAreMappedInPlace) {
  MAMBA_REQUIRE_SHARED(shared);
  Loaded m = load(shared + "/fixtures/mamba1-tiny-ssm/model");
  // lm_head.weight in this pickle is the same tensor object as the embedding (memo reference).
  const TensorEntry* emb = m.ckpt.find("backbone.embedding.weight");
  const TensorEntry* head = m.ckpt.find("lm_head.weight");
  ASSERT_NE(emb, nullptr);
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(emb->view.data, head->view.data);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(emb->view.data) % 64, 0u);  // torch aligns storages to 64 bytes
}

}  // namespace
}  // namespace mamba
