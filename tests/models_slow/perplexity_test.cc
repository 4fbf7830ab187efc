// Long-sequence check of the forward pass (label models_slow: excluded from the sanitizer run):
// the embedded model's perplexity over the reference window of 2049 held-out ids (one window,
// 2048 predictions, empty initial state) within 0.01% of the reference perplexity. 2048 tokens
// cross 32 SSD chunks of 64, so this exercises long-range state passing in prefill.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "common/test_util.h"
#include "mamba/model.h"
#include "models/model_test_util.h"
#include "common/reference_data.h"

namespace mamba {
namespace {

TEST(Perplexity, EmbeddedModelReferenceWindow) {
  const std::string dir = test::source_dir() + "/models/mamba2-books-7m-bpe8k";
  ASSERT_TRUE(std::filesystem::exists(dir + "/model.safetensors")) << dir;
  auto m = Model::load(dir, test::exact_tier());
  ASSERT_TRUE(m.ok()) << m.error().message;
  Model& model = *m.value();
  const auto ref = test::load_reference(dir);
  const auto& ids = ref.at("ppl.ids").i32;
  ASSERT_EQ(ids.size(), 2049u);
  const double ref_ppl = ref.json["ppl_window"]["ppl"].get<double>();

  // Prefill in pieces of 256 (a multiple of chunk_size: identical to one prefill), all logits.
  const std::int64_t V = model.logits_width(), piece = 256, n = std::int64_t(ids.size()) - 1;
  State st = model.new_state();
  std::vector<float> logits(std::size_t(piece * V));
  double nll = 0;
  for (std::int64_t t0 = 0; t0 < n; t0 += piece) {
    const std::int64_t len = std::min(piece, n - t0);
    ASSERT_TRUE(model.prefill({ids.data() + t0, std::size_t(len)}, st, LogitsMode::kAll, logits.data()).ok());
    for (std::int64_t t = 0; t < len; ++t) {
      const float* row = logits.data() + t * V;
      nll += test::logsumexp(row, V) - row[ids[std::size_t(t0 + t + 1)]];
    }
  }
  const double ppl = std::exp(nll / double(n));
  std::printf("perplexity %.6f (reference %.6f, relative difference %.2e)\n", ppl, ref_ppl, ppl / ref_ppl - 1.0);
  EXPECT_NEAR(ppl / ref_ppl, 1.0, 1e-4) << "ppl " << ppl << " vs reference " << ref_ppl;
}

}  // namespace
}  // namespace mamba
