// Quantized embedded model (q8 / q4 via quantize_checkpoint) against the original over the
// reference ppl window: q8 top-1 agreement ≥ 99% and perplexity ≤ +0.5%; q4 perplexity ≤ +5%
// (issue 5's quality bounds). The 16M shared models: tests/models_slow/quantized_16m_test.cc.
#include "models/quantized_check.h"

#include "common/test_util.h"

namespace mamba {
namespace {

std::string embedded_dir() { return test::source_dir() + "/models/mamba2-books-7m-bpe8k"; }

TEST(QuantizedModel, EmbeddedQ8Top1AgreementAndPerplexity) {
  const auto r = test::compare_quantized(embedded_dir(), QuantType::kQ8);
  EXPECT_GE(r.top1_agreement, 0.99);
  EXPECT_LE(r.ppl_quant, r.ppl_orig * 1.005);
  EXPECT_GT(r.ppl_orig, 0);
}

TEST(QuantizedModel, EmbeddedQ4Perplexity) {
  const auto r = test::compare_quantized(embedded_dir(), QuantType::kQ4);
  EXPECT_LE(r.ppl_quant, r.ppl_orig * 1.05);
  EXPECT_GT(r.ppl_orig, 0);
}

}  // namespace
}  // namespace mamba
