// The int8 precision tier (LoadOptions::precision = kInt8) on q8 / q4 copies of the embedded model
// against the same copies' exact tier over the reference ppl window: teacher-forced top-1 agreement
// ≥ 99% and perplexity within ±0.5% (issue 5's bounds for a faster tier); within the tier, batched
// decode steps bitwise equal single-sequence steps and a prefill's last logits are near (same argmax)
// those of the same prompt stepped token by token; clear errors for a float checkpoint and a CPU without AVX-512
// VNNI. The 16M shared models: tests/models_slow/int8_tier_16m_test.cc.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "common/test_util.h"
#include "mamba/checkpoint.h"
#include "mamba/weights.h"
#include "models/mamba_model.h"
#include "models/quantized_check.h"
#include "ops/cpu/cpu_target.h"
#include "ops/ops.h"

namespace mamba {
namespace {

std::string embedded_dir() { return test::source_dir() + "/models/mamba2-books-7m-bpe8k"; }

#define MAMBA_REQUIRE_INT8_TIER()                                                                      \
  do {                                                                                                 \
    if (!ops::int8_tier_available()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI: the int8 tier cannot load"; \
  } while (0)

void check(QuantType type) {
  const auto r = test::compare_quantized_precision(embedded_dir(), type, Precision::kInt8);
  EXPECT_GE(r.top1_agreement, 0.99);
  EXPECT_LE(r.ppl_quant, r.ppl_orig * 1.005);
  EXPECT_GE(r.ppl_quant, r.ppl_orig * 0.995);
  EXPECT_GT(r.ppl_orig, 0);
  EXPECT_NE(r.ppl_quant, r.ppl_orig);  // the tier computes differently (not silently the exact path)
}

TEST(Int8Tier, AppliesToQuantizedProjectionsExceptLmHead) {
  MAMBA_REQUIRE_INT8_TIER();
  const test::QuantizedCopy copy(embedded_dir(), QuantType::kQ8);
  auto ckpt = Checkpoint::open(copy.dir());
  ASSERT_TRUE(ckpt.ok()) << ckpt.error().message;
  auto w = bind_weights(*ckpt);
  ASSERT_TRUE(w.ok()) << w.error().message;
  const Tensor packed = models::pack_projections(*w, Precision::kInt8);  // as Model::load does
  for (std::size_t l = 0; l < w->layers.size(); ++l) {
    EXPECT_TRUE(w->layers[l].in_proj.int8_tier) << "layer " << l;
    EXPECT_TRUE(w->layers[l].out_proj.int8_tier) << "layer " << l;
  }
  EXPECT_EQ(w->lm_head.dtype, DType::kQ8);
  EXPECT_NE(w->lm_head.packed, nullptr);
  EXPECT_FALSE(w->lm_head.int8_tier);
  // The exact tier packs the same weights without the tier's sums.
  auto w2 = bind_weights(*ckpt);
  ASSERT_TRUE(w2.ok());
  const Tensor packed2 = models::pack_projections(*w2, Precision::kExact);
  EXPECT_FALSE(w2->layers[0].in_proj.int8_tier);
  EXPECT_LT(packed2.numel(), packed.numel());
}

TEST(Int8Tier, EmbeddedQ8Top1AgreementAndPerplexity) {
  MAMBA_REQUIRE_INT8_TIER();
  check(QuantType::kQ8);
}

TEST(Int8Tier, EmbeddedQ4Top1AgreementAndPerplexity) {
  MAMBA_REQUIRE_INT8_TIER();
  check(QuantType::kQ4);
}

TEST(Int8Tier, BatchedStepsEqualSingleStepsAndPrefillNearSteps) {
  MAMBA_REQUIRE_INT8_TIER();
  const test::QuantizedCopy copy(embedded_dir(), QuantType::kQ8);
  LoadOptions lo;
  lo.precision = Precision::kInt8;
  auto m = Model::load(copy.dir(), lo);
  ASSERT_TRUE(m.ok()) << m.error().message;
  Model& model = **m;
  EXPECT_EQ(model.precision(), Precision::kInt8);
  const std::int64_t V = model.logits_width();
  const std::vector<std::vector<std::int32_t>> prompts = {{5, 17, 300}, {9}, {44, 45, 46, 47, 48, 49, 50}};
  // Each prompt stepped token by token (the one-row kernels): its last logits near the prefill's
  // (prefill and steps round the scan differently, which can move an 8-bit activation code by one
  // step: measured ≤ 0.25% of the largest logit).
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    State p = model.new_state();
    std::vector<float> last(static_cast<std::size_t>(V));
    ASSERT_TRUE(model.prefill(prompts[i], p, LogitsMode::kLast, last.data()).ok());
    State s = model.new_state();
    State* sp = &s;
    std::vector<float> logits(static_cast<std::size_t>(V));
    for (std::int32_t id : prompts[i]) ASSERT_TRUE(model.step({&id, 1}, {&sp, 1}, logits.data()).ok());
    float scale = 0.0f, diff = 0.0f;
    for (std::int64_t v = 0; v < V; ++v) {
      scale = std::max(scale, std::fabs(logits[std::size_t(v)]));
      diff = std::max(diff, std::fabs(last[std::size_t(v)] - logits[std::size_t(v)]));
    }
    EXPECT_LE(diff, 0.01f * scale) << "prompt " << i;
    EXPECT_EQ(test::argmax(last.data(), V), test::argmax(logits.data(), V)) << "prompt " << i;
  }
  test::expect_batched_step_equals_alone(model);
}

TEST(Int8Tier, ParsesAndRefusesClearly) {
  EXPECT_EQ(parse_precision("int8").value(), Precision::kInt8);
  EXPECT_STREQ(precision_name(Precision::kInt8), "int8");
  const auto bad = parse_precision("int4");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("exact, bf16, int8"), std::string::npos) << bad.error().message;
  LoadOptions lo;
  lo.precision = Precision::kInt8;
  // A float checkpoint: nothing for the tier to act on (where the CPU could run it; else the CPU is
  // named first).
  auto f = Model::load(embedded_dir(), lo);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().code, ErrorCode::kInvalidArgument);
  if (ops::int8_tier_available()) {
    EXPECT_NE(f.error().message.find("not quantized"), std::string::npos) << f.error().message;
    EXPECT_NE(f.error().message.find("mamba-cli quantize"), std::string::npos) << f.error().message;
  } else {
    EXPECT_NE(f.error().message.find("AVX-512 VNNI"), std::string::npos) << f.error().message;
  }
  // A dispatch target without the tier's kernel (any x86-64 CPU can force the baseline).
  const test::QuantizedCopy copy(embedded_dir(), QuantType::kQ8);
  const ops::cpu::CpuTarget saved = ops::cpu::cpu_target();
  ops::cpu::set_cpu_target_for_test(ops::cpu::CpuTarget::kBaseline);
  auto m = Model::load(copy.dir(), lo);
  ops::cpu::set_cpu_target_for_test(saved);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(m.error().message.find("AVX-512 VNNI"), std::string::npos) << m.error().message;
}

}  // namespace
}  // namespace mamba
