// The bf16 precision tier (LoadOptions::precision = kBF16) on the embedded model against the exact
// tier over the reference ppl window: teacher-forced top-1 agreement ≥ 99% and perplexity within
// ±0.5% (issue 5's bounds for a faster tier); batched decode steps bitwise equal to single-sequence
// steps within the tier; a clear error where the CPU lacks AVX-512 BF16. The 16M shared models:
// tests/models_slow/bf16_tier_16m_test.cc.
#include <cstring>

#include "common/test_util.h"
#include "models/quantized_check.h"
#include "ops/cpu/cpu_target.h"
#include "ops/ops.h"

namespace mamba {
namespace {

std::string embedded_dir() { return test::source_dir() + "/models/mamba2-books-7m-bpe8k"; }

#define MAMBA_REQUIRE_BF16_TIER()                                                                     \
  do {                                                                                                \
    if (!ops::bf16_tier_available()) GTEST_SKIP() << "this CPU has no AVX-512 BF16: the bf16 tier cannot load"; \
  } while (0)

TEST(Bf16Tier, EmbeddedTop1AgreementAndPerplexity) {
  MAMBA_REQUIRE_BF16_TIER();
  const auto r = test::compare_precision(embedded_dir(), Precision::kBF16);
  EXPECT_GE(r.top1_agreement, 0.99);
  EXPECT_LE(r.ppl_quant, r.ppl_orig * 1.005);
  EXPECT_GE(r.ppl_quant, r.ppl_orig * 0.995);
  EXPECT_GT(r.ppl_orig, 0);
}

TEST(Bf16Tier, BatchedStepsEqualSingleSequenceSteps) {
  MAMBA_REQUIRE_BF16_TIER();
  LoadOptions lo;
  lo.precision = Precision::kBF16;
  auto m = Model::load(embedded_dir(), lo);
  ASSERT_TRUE(m.ok()) << m.error().message;
  Model& model = **m;
  test::expect_batched_step_equals_alone(model);
}

TEST(Bf16Tier, ParsesAndRefusesClearly) {
  EXPECT_EQ(parse_precision("exact").value(), Precision::kExact);
  EXPECT_EQ(parse_precision("bf16").value(), Precision::kBF16);
  const auto bad = parse_precision("fp8");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("exact, bf16"), std::string::npos) << bad.error().message;
  // Refused where the tier's kernel cannot run: on the baseline target (any x86-64 CPU) as on a CPU
  // without AVX-512 BF16.
  const ops::cpu::CpuTarget saved = ops::cpu::cpu_target();
  ops::cpu::set_cpu_target_for_test(ops::cpu::CpuTarget::kBaseline);
  LoadOptions lo;
  lo.precision = Precision::kBF16;
  auto m = Model::load(embedded_dir(), lo);
  ops::cpu::set_cpu_target_for_test(saved);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(m.error().message.find("AVX-512 BF16"), std::string::npos) << m.error().message;
}

// A checkpoint whose projections are all q8 / q4 (the embedded Mamba-2 model quantized) has nothing
// for the tier to run: refused, as precision int8 is for a float checkpoint (it loaded and ran the
// exact tier's arithmetic while reporting bf16).
TEST(Bf16Tier, RefusedWhereNoProjectionIsFloat) {
  MAMBA_REQUIRE_BF16_TIER();
  const test::QuantizedCopy q(embedded_dir(), QuantType::kQ8);
  ASSERT_TRUE(q.ok());
  LoadOptions lo;
  lo.precision = Precision::kBF16;
  auto m = Model::load(q.dir(), lo);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(m.error().message.find("every projection of this checkpoint is q8"), std::string::npos) << m.error().message;
  EXPECT_TRUE(Model::load(q.dir()).ok());
}

}  // namespace
}  // namespace mamba
