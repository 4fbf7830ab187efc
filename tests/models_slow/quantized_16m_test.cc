// Quantized 16M shared models (50k vocabulary: slow label) against their originals over the
// reference ppl window: q8 top-1 agreement ≥ 99% and perplexity ≤ +0.5%; q4 perplexity ≤ +5%.
#include "models/quantized_check.h"

#include "common/test_util.h"

namespace mamba {
namespace {

void check(const std::string& name) {
  MAMBA_REQUIRE_SHARED(shared);
  const std::string dir = shared + "/models/" + name;
  const auto q8 = test::compare_quantized(dir, QuantType::kQ8);
  EXPECT_GE(q8.top1_agreement, 0.99);
  EXPECT_LE(q8.ppl_quant, q8.ppl_orig * 1.005);
  const auto q4 = test::compare_quantized(dir, QuantType::kQ4);
  EXPECT_LE(q4.ppl_quant, q4.ppl_orig * 1.05);
}

TEST(QuantizedModelSlow, Mamba1Books16m) { check("mamba1-books-16m"); }
TEST(QuantizedModelSlow, Mamba2Books16m) { check("mamba2-books-16m"); }

}  // namespace
}  // namespace mamba
