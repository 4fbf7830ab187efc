// ModelConfig::from_json_text: defaults of each format, derived sizes, Python-json floats, errors.
#include <cmath>
#include <gtest/gtest.h>

#include "mamba/config.h"

namespace mamba {
namespace {

ModelConfig parse_ok(const std::string& text) {
  auto r = ModelConfig::from_json_text(text, "config.json");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? r.value() : ModelConfig{};
}

Error parse_err(const std::string& text) {
  auto r = ModelConfig::from_json_text(text, "dir/config.json");
  EXPECT_FALSE(r.ok()) << "expected an error for: " << text;
  return r.ok() ? Error{} : r.error();
}

TEST(Config, HFMambaDefaults) {
  ModelConfig c = parse_ok(R"({"model_type": "mamba", "hidden_size": 768, "num_hidden_layers": 24, "vocab_size": 50280})");
  EXPECT_EQ(c.arch, Arch::kMamba1);
  EXPECT_EQ(c.format, CheckpointFormat::kHF);
  EXPECT_EQ(c.d_state, 16);
  EXPECT_EQ(c.d_conv, 4);
  EXPECT_EQ(c.expand, 2);
  EXPECT_EQ(c.d_inner, 1536);
  EXPECT_EQ(c.dt_rank, 48);  // ceil(768 / 16)
  EXPECT_TRUE(c.conv_bias);
  EXPECT_FALSE(c.proj_bias);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  EXPECT_EQ(c.padded_vocab_size(), 50280);
  EXPECT_EQ(c.in_proj_rows(), 3072);
  EXPECT_EQ(c.conv_channels(), 1536);
  EXPECT_EQ(c.conv_state_elems(), 1536 * 3);
  EXPECT_EQ(c.ssm_state_elems(), 1536 * 16);
  EXPECT_EQ(c.state_bytes(), 24 * (1536 * 3 + 1536 * 16) * 4);
}

TEST(Config, HFMambaAutoRankRoundsUpAndIntermediateSizeWins) {
  ModelConfig c = parse_ok(R"({"model_type": "mamba", "hidden_size": 40, "num_hidden_layers": 1, "vocab_size": 10,
                               "time_step_rank": "auto", "intermediate_size": 100, "eos_token_id": [3, 4]})");
  EXPECT_EQ(c.dt_rank, 3);  // ceil(40/16)
  EXPECT_EQ(c.d_inner, 100);
  EXPECT_EQ(c.eos_token_ids, (std::vector<std::int64_t>{3, 4}));
}

TEST(Config, HFFalconMamba) {
  ModelConfig c = parse_ok(R"({"model_type": "falcon_mamba", "hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 1000,
                               "mixer_rms_eps": 1e-3, "tie_word_embeddings": false})");
  EXPECT_EQ(c.arch, Arch::kFalconMamba);
  EXPECT_DOUBLE_EQ(c.mixer_rms_eps, 1e-3);
  EXPECT_FALSE(c.tie_embeddings);
  ModelConfig d = parse_ok(R"({"model_type": "falcon_mamba", "hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 1000})");
  EXPECT_DOUBLE_EQ(d.mixer_rms_eps, 1e-6);
}

TEST(Config, HFMamba2DefaultsAreMamba2Config) {
  // d_inner = 2·4096 = 8192 = 128 heads × 64: the Codestral-like defaults.
  ModelConfig c = parse_ok(R"({"model_type": "mamba2", "hidden_size": 4096, "num_hidden_layers": 64, "vocab_size": 32768})");
  EXPECT_EQ(c.arch, Arch::kMamba2);
  EXPECT_EQ(c.n_heads, 128);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.n_groups, 8);
  EXPECT_EQ(c.d_state, 128);
  EXPECT_EQ(c.chunk_size, 256);
  EXPECT_EQ(c.d_inner, 8192);
  EXPECT_FALSE(c.tie_embeddings);  // Mamba2Config default
  EXPECT_EQ(c.time_step_min_limit, 0.0);
  EXPECT_TRUE(std::isinf(c.time_step_max_limit));
  EXPECT_EQ(c.conv_channels(), 8192 + 2 * 8 * 128);
  EXPECT_EQ(c.in_proj_rows(), 2 * 8192 + 2 * 8 * 128 + 128);
  EXPECT_EQ(c.ssm_state_elems(), 128 * 64 * 128);
}

// Prefill pieces: `target` rounded up to the granule (Mamba-2: chunk_size), each ending on the
// absolute grid of that size or at the prompt's end.
TEST(Config, PromptPieceEndsOnTheAbsoluteGrid) {
  ModelConfig m2;
  m2.arch = Arch::kMamba2;
  m2.chunk_size = 256;
  EXPECT_EQ(m2.prompt_piece(0, 5000, 2048), 2048);
  EXPECT_EQ(m2.prompt_piece(100, 5000, 2048), 1948);  // a continued state first reaches the grid
  EXPECT_EQ(m2.prompt_piece(0, 10, 2048), 10);        // the prompt's end
  EXPECT_EQ(m2.prompt_piece(600, 1000, 300), 424);    // 300 → 512: ends at 1024
  EXPECT_EQ(m2.prompt_piece(1024, 1, 300), 1);
  ModelConfig m1;  // Mamba-1: granule 1, the target itself
  m1.arch = Arch::kMamba1;
  EXPECT_EQ(m1.prompt_piece(5, 100, 7), 2);
  EXPECT_EQ(m1.prompt_piece(7, 100, 7), 7);
  EXPECT_EQ(m1.prompt_piece(0, 3, 0), 1);  // a target below 1 is 1
}

TEST(Config, PythonJsonFloatsInEveryForm) {
  const char* base = R"({"model_type": "mamba2", "hidden_size": 32, "num_hidden_layers": 2, "vocab_size": 100,
                         "num_heads": 4, "head_dim": 16, "n_groups": 2, "time_step_limit": %s})";
  for (const char* lim : {"[0.0, Infinity]", "[0.0, \"Infinity\"]", "[0.0, {\"__float__\": \"Infinity\"}]"}) {
    SCOPED_TRACE(lim);
    char buf[512];
    std::snprintf(buf, sizeof buf, base, lim);
    ModelConfig c = parse_ok(buf);
    EXPECT_TRUE(std::isinf(c.time_step_max_limit) && c.time_step_max_limit > 0);
  }
  // Bare tokens inside strings are left alone.
  ModelConfig c = parse_ok(R"({"model_type": "mamba", "hidden_size": 8, "num_hidden_layers": 1, "vocab_size": 5, "note": "Infinity NaN -Infinity"})");
  EXPECT_EQ(c.d_model, 8);
  // NaN in a limit is rejected, not silently used.
  Error e = parse_err(R"({"model_type": "mamba2", "hidden_size": 32, "num_hidden_layers": 2, "vocab_size": 100,
                          "num_heads": 4, "head_dim": 16, "n_groups": 2, "time_step_limit": [NaN, 1.0]})");
  EXPECT_NE(e.message.find("time_step_limit"), std::string::npos) << e.message;
}

TEST(Config, StateSpacesMamba1Defaults) {
  ModelConfig c = parse_ok(R"({"d_model": 768, "n_layer": 24, "vocab_size": 50277})");
  EXPECT_EQ(c.format, CheckpointFormat::kStateSpaces);
  EXPECT_EQ(c.arch, Arch::kMamba1);
  EXPECT_EQ(c.pad_vocab_size_multiple, 8);
  EXPECT_EQ(c.padded_vocab_size(), 50280);
  EXPECT_EQ(c.d_state, 16);
  EXPECT_EQ(c.dt_rank, 48);
  EXPECT_EQ(c.d_inner, 1536);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_TRUE(c.conv_bias);
  EXPECT_FALSE(c.proj_bias);
}

TEST(Config, StateSpacesMamba2Defaults) {
  ModelConfig c = parse_ok(R"({"d_model": 768, "n_layer": 24, "vocab_size": 50277, "pad_vocab_size_multiple": 16,
                               "ssm_cfg": {"layer": "Mamba2"}})");
  EXPECT_EQ(c.arch, Arch::kMamba2);
  EXPECT_EQ(c.padded_vocab_size(), 50288);
  EXPECT_EQ(c.d_state, 128);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.n_heads, 24);
  EXPECT_EQ(c.n_groups, 1);
  EXPECT_EQ(c.chunk_size, 256);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_FALSE(c.norm_before_gate);
}

TEST(Config, RequiredKeysAreNamed) {
  Error e = parse_err(R"({"model_type": "mamba", "num_hidden_layers": 2, "vocab_size": 10})");
  EXPECT_EQ(e.code, ErrorCode::kNotFound);
  EXPECT_NE(e.message.find("hidden_size"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("dir/config.json"), std::string::npos) << e.message;
  e = parse_err(R"({"model_type": "mamba2", "hidden_size": 32, "vocab_size": 10})");
  EXPECT_NE(e.message.find("num_hidden_layers"), std::string::npos) << e.message;
  e = parse_err(R"({"n_layer": 2, "vocab_size": 10})");
  EXPECT_EQ(e.code, ErrorCode::kNotFound);
  EXPECT_NE(e.message.find("\"d_model\""), std::string::npos) << e.message;
  e = parse_err(R"({"d_model": 2, "n_layer": 2})");
  EXPECT_NE(e.message.find("vocab_size"), std::string::npos) << e.message;
  e = parse_err(R"({"architectures": ["x"]})");
  EXPECT_NE(e.message.find("d_model"), std::string::npos) << e.message;
}

TEST(Config, InconsistentOrUnsupportedConfigs) {
  Error e = parse_err(R"({"model_type": "mamba2", "hidden_size": 32, "num_hidden_layers": 2, "vocab_size": 10,
                          "num_heads": 5, "head_dim": 16, "n_groups": 1})");
  EXPECT_EQ(e.code, ErrorCode::kInvalidArgument);
  EXPECT_NE(e.message.find("n_heads (5)"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("d_inner = 64"), std::string::npos) << e.message;
  // d_inner comes from hidden_size: a wrong hidden_size must be named among the suspects.
  EXPECT_NE(e.message.find("d_inner = 64 (expand 2 · hidden_size 32): one of num_heads, head_dim, expand and hidden_size is wrong"),
            std::string::npos) << e.message;
  // state-spaces derives n_heads = d_inner / headdim: a headdim that does not divide is named as such.
  e = parse_err(R"({"d_model": 32, "n_layer": 2, "vocab_size": 10, "ssm_cfg": {"layer": "Mamba2", "headdim": 7, "ngroups": 1}})");
  EXPECT_EQ(e.code, ErrorCode::kInvalidArgument);
  EXPECT_NE(e.message.find("ssm_cfg.headdim = 7 does not divide d_inner = 64"), std::string::npos) << e.message;
  e = parse_err(R"({"model_type": "llama", "hidden_size": 32, "num_hidden_layers": 2, "vocab_size": 10})");
  EXPECT_EQ(e.code, ErrorCode::kUnsupported);
  EXPECT_NE(e.message.find("llama"), std::string::npos);
  e = parse_err(R"({"d_model": 32, "n_layer": 2, "vocab_size": 10, "ssm_cfg": {"layer": "Mamba3"}})");
  EXPECT_EQ(e.code, ErrorCode::kUnsupported);
  e = parse_err(R"({"model_type": "mamba", "hidden_size": -1, "num_hidden_layers": 2, "vocab_size": 10})");
  EXPECT_EQ(e.code, ErrorCode::kInvalidArgument);
  e = parse_err(R"({"model_type": "mamba", "hidden_size": "big", "num_hidden_layers": 2, "vocab_size": 10})");
  EXPECT_EQ(e.code, ErrorCode::kFormat);
  e = parse_err(R"({"model_type": "mamba", "hidden_size": 8, "num_hidden_layers": 2, "vocab_size": 10, "state_size": 0})");
  EXPECT_NE(e.message.find("d_state"), std::string::npos);
  // chunk_size shapes no tensor, but sizes the prompt pieces: a huge one made one piece of a whole text.
  const std::string m2 = R"({"model_type": "mamba2", "hidden_size": 32, "num_hidden_layers": 2, "vocab_size": 10, "num_heads": 1, "head_dim": 64, "n_groups": 1, )";
  e = parse_err(m2 + R"("chunk_size": 16777216})");
  EXPECT_EQ(e.code, ErrorCode::kInvalidArgument);
  EXPECT_NE(e.message.find("chunk_size = 16777216: exceeds the limit 4096"), std::string::npos) << e.message;
  EXPECT_EQ(parse_ok(m2 + R"("chunk_size": 4096})").chunk_size, 4096);
  e = parse_err("{\"model_type\": \"mamba\", ");
  EXPECT_EQ(e.code, ErrorCode::kFormat);
  EXPECT_NE(e.message.find("dir/config.json"), std::string::npos);
}

TEST(Config, ActivationOtherThanSiluIsRefused) {
  // HF: hidden_act; state-spaces: ssm_cfg.activation. SiLU is what every Mamba block computes; any
  // other value must not load as if it were SiLU.
  const std::string hf = R"({"model_type": "mamba", "hidden_size": 8, "num_hidden_layers": 2, "vocab_size": 10, )";
  for (const char* ok : {R"("silu")", R"("swish")", "null"}) parse_ok(hf + "\"hidden_act\": " + ok + "}");
  for (const char* bad : {R"("gelu")", R"("relu")", R"("bogus")", "1"}) {
    Error e = parse_err(hf + "\"hidden_act\": " + bad + "}");
    EXPECT_EQ(e.code, ErrorCode::kUnsupported) << bad;
    EXPECT_NE(e.message.find(std::string("\"hidden_act\" = ") + bad), std::string::npos) << e.message;
  }
  Error e = parse_err(R"({"d_model": 32, "n_layer": 2, "vocab_size": 10, "ssm_cfg": {"layer": "Mamba2", "activation": "swish2"}})");
  EXPECT_EQ(e.code, ErrorCode::kUnsupported);
  EXPECT_NE(e.message.find("ssm_cfg: \"activation\" = \"swish2\""), std::string::npos) << e.message;
  parse_ok(R"({"d_model": 32, "n_layer": 2, "vocab_size": 10, "ssm_cfg": {"activation": "silu"}})");
  e = parse_err(R"({"d_model": 32, "n_layer": 2, "vocab_size": 10, "ssm_cfg": {"layer": "Mamba2", "D_has_hdim": true}})");
  EXPECT_EQ(e.code, ErrorCode::kUnsupported);
  EXPECT_NE(e.message.find("D_has_hdim"), std::string::npos) << e.message;
}

TEST(Config, FloatFieldsMustBeFiniteAsFloat32) {
  // 1e300 is a finite double but +inf as the float32 the kernels use; 1e-50 is 0 as float32.
  const std::string base = R"({"model_type": "mamba", "hidden_size": 8, "num_hidden_layers": 2, "vocab_size": 10, )";
  Error e = parse_err(base + R"("layer_norm_epsilon": 1e300})");
  EXPECT_EQ(e.code, ErrorCode::kInvalidArgument);
  EXPECT_NE(e.message.find("layer_norm_epsilon = 1e+300"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("float32"), std::string::npos) << e.message;
  e = parse_err(base + R"("layer_norm_epsilon": 1e-50})");
  EXPECT_NE(e.message.find("layer_norm_epsilon"), std::string::npos) << e.message;
  e = parse_err(R"({"d_model": 8, "n_layer": 2, "vocab_size": 10, "norm_epsilon": 1e300})");
  EXPECT_NE(e.message.find("norm_epsilon = 1e+300"), std::string::npos) << e.message;
  e = parse_err(R"({"model_type": "falcon_mamba", "hidden_size": 8, "num_hidden_layers": 2, "vocab_size": 10, "mixer_rms_eps": 1e39})");
  EXPECT_NE(e.message.find("mixer_rms_eps = 1e+39"), std::string::npos) << e.message;
  e = parse_err(R"({"model_type": "mamba2", "hidden_size": 32, "num_hidden_layers": 2, "vocab_size": 10, "num_heads": 4,
                    "head_dim": 16, "n_groups": 1, "time_step_limit": [1e300, 1e301]})");
  EXPECT_NE(e.message.find("time_step_limit[0] = 1e+300"), std::string::npos) << e.message;
  // An infinite (or float-overflowing) max limit means "no clamp" and stays valid.
  parse_ok(R"({"model_type": "mamba2", "hidden_size": 32, "num_hidden_layers": 2, "vocab_size": 10, "num_heads": 4,
               "head_dim": 16, "n_groups": 1, "time_step_limit": [0.0, 1e300]})");
  parse_ok(base + R"("layer_norm_epsilon": 1e-30})");
}

TEST(Config, EosTokenIdMustBeInTheVocabulary) {
  const std::string base = R"({"model_type": "mamba", "hidden_size": 8, "num_hidden_layers": 2, "vocab_size": 10, )";
  for (const char* bad : {"1000000000", "-3", "10", "[0, 12]"}) {
    Error e = parse_err(base + "\"eos_token_id\": " + bad + "}");
    EXPECT_EQ(e.code, ErrorCode::kInvalidArgument) << bad;
    EXPECT_NE(e.message.find("eos_token_id = "), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("vocab_size = 10"), std::string::npos) << e.message;
  }
  Error e = parse_err(base + R"("eos_token_id": -3})");
  EXPECT_NE(e.message.find("eos_token_id = -3"), std::string::npos) << e.message;
  EXPECT_EQ(parse_ok(base + R"("eos_token_id": [0, 9]})").eos_token_ids, (std::vector<std::int64_t>{0, 9}));
}

TEST(Config, LayerNormParsesAndIsRecorded) {
  ModelConfig c = parse_ok(R"({"d_model": 32, "n_layer": 2, "vocab_size": 10, "rms_norm": false})");
  EXPECT_FALSE(c.rms_norm);  // refused by bind_weights (see bad_input_test)
}

}  // namespace
}  // namespace mamba

namespace mamba {
namespace {

// HF's mixers and mamba_ssm's Mamba take int(expand · d_model): a fractional expand is a real
// config (e.g. a Mamba-2 with expand 1.5, hidden_size 512, 12 heads of 64).
TEST(Config, FractionalExpandTruncatesAsPython) {
  ModelConfig m2 = parse_ok(R"({"model_type": "mamba2", "hidden_size": 512, "num_hidden_layers": 2, "vocab_size": 10,
                                "expand": 1.5, "num_heads": 12, "head_dim": 64, "n_groups": 1})");
  EXPECT_DOUBLE_EQ(m2.expand, 1.5);
  EXPECT_EQ(m2.d_inner, 768);
  // int(0.29 * 100) = 28 in Python (0.29 · 100 = 28.999999999999996): the same truncation here.
  ModelConfig m1 = parse_ok(R"({"model_type": "mamba", "hidden_size": 100, "num_hidden_layers": 1, "vocab_size": 10, "expand": 0.29})");
  EXPECT_EQ(m1.d_inner, 28);
  ModelConfig ss = parse_ok(R"({"d_model": 64, "n_layer": 1, "vocab_size": 10, "ssm_cfg": {"expand": 1.5}})");
  EXPECT_EQ(ss.d_inner, 96);
  ModelConfig ss2 = parse_ok(R"({"d_model": 64, "n_layer": 1, "vocab_size": 10,
                                 "ssm_cfg": {"layer": "Mamba2", "expand": 1.5, "headdim": 16, "d_ssm": 64}})");
  EXPECT_EQ(ss2.d_inner, 64);
  EXPECT_EQ(ss2.d_mlp, 32);  // 96 − 64
  // Whole-number expand written as a float, as json.dump writes 2.0.
  EXPECT_EQ(parse_ok(R"({"model_type": "mamba", "hidden_size": 8, "num_hidden_layers": 1, "vocab_size": 10, "expand": 2.0})").d_inner, 16);
  // Not a positive number: named with the value.
  for (const char* bad : {"0", "-1.5", "\"two\"", "true", "\"nan\""}) {
    Error e = parse_err(std::string(R"({"model_type": "mamba", "hidden_size": 8, "num_hidden_layers": 1, "vocab_size": 10, "expand": )") + bad + "}");
    EXPECT_NE(e.message.find("\"expand\""), std::string::npos) << bad << ": " << e.message;
  }
  Error e = parse_err(R"({"model_type": "mamba", "hidden_size": 8, "num_hidden_layers": 1, "vocab_size": 10, "expand": 0})");
  EXPECT_EQ(e.code, ErrorCode::kInvalidArgument);
  EXPECT_NE(e.message.find("expected a positive number"), std::string::npos) << e.message;
  // A positive expand whose width truncates to 0 is a zero d_inner.
  e = parse_err(R"({"model_type": "mamba", "hidden_size": 8, "num_hidden_layers": 1, "vocab_size": 10, "expand": 0.1})");
  EXPECT_NE(e.message.find("d_inner"), std::string::npos) << e.message;
}

TEST(Config, HugeSizesAreRejectedNotOverflowed) {
  auto r = ModelConfig::from_json_text(R"({"model_type": "mamba2", "hidden_size": 8388608, "num_hidden_layers": 4096,
      "vocab_size": 16777216, "num_heads": 8388608, "head_dim": 2, "n_groups": 8388608, "state_size": 16777216, "conv_kernel": 16777216})",
                                       "config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("too large"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace mamba
