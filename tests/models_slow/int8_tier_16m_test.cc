// The int8 precision tier on q8 / q4 copies of the 16M shared models (50k vocabulary: slow label)
// against the same copies' exact tier over the reference ppl window: top-1 agreement ≥ 99% and
// perplexity within ±0.5%.
#include "common/test_util.h"
#include "models/quantized_check.h"
#include "ops/ops.h"

namespace mamba {
namespace {

void check(const std::string& name) {
  MAMBA_REQUIRE_SHARED(shared);
  if (!ops::int8_tier_available()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI: the int8 tier cannot load";
  for (QuantType type : {QuantType::kQ8, QuantType::kQ4}) {
    const auto r = test::compare_quantized_precision(shared + "/models/" + name, type, Precision::kInt8);
    EXPECT_GE(r.top1_agreement, 0.99) << (type == QuantType::kQ8 ? "q8" : "q4");
    EXPECT_LE(r.ppl_quant, r.ppl_orig * 1.005) << (type == QuantType::kQ8 ? "q8" : "q4");
    EXPECT_GE(r.ppl_quant, r.ppl_orig * 0.995) << (type == QuantType::kQ8 ? "q8" : "q4");
  }
}

TEST(Int8TierSlow, Mamba1Books16m) { check("mamba1-books-16m"); }
TEST(Int8TierSlow, Mamba2Books16m) { check("mamba2-books-16m"); }

}  // namespace
}  // namespace mamba
