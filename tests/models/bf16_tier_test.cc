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
  const std::int64_t V = model.logits_width();
  const std::vector<std::vector<std::int32_t>> prompts = {{5, 17, 300}, {9}, {44, 45, 46, 47, 48, 49, 50}};
  const std::vector<std::int32_t> next = {11, 12, 13};
  // Alone: prefill, then one step.
  std::vector<std::vector<float>> alone;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    State s = model.new_state();
    ASSERT_TRUE(model.prefill(prompts[i], s, LogitsMode::kNone, nullptr).ok());
    std::vector<float> logits(static_cast<std::size_t>(V));
    State* sp = &s;
    ASSERT_TRUE(model.step({&next[i], 1}, {&sp, 1}, logits.data()).ok());
    alone.push_back(logits);
  }
  // Together: the same prefills, one batched step.
  std::vector<State> states;
  for (const auto& p : prompts) {
    states.push_back(model.new_state());
    ASSERT_TRUE(model.prefill(p, states.back(), LogitsMode::kNone, nullptr).ok());
  }
  std::vector<State*> ptrs;
  for (auto& s : states) ptrs.push_back(&s);
  std::vector<float> batched(prompts.size() * static_cast<std::size_t>(V));
  ASSERT_TRUE(model.step(next, ptrs, batched.data()).ok());
  for (std::size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(std::memcmp(batched.data() + i * std::size_t(V), alone[i].data(), std::size_t(V) * 4), 0) << "sequence " << i;
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

}  // namespace
}  // namespace mamba
