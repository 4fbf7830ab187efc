// The small trained models of ../shared/models/ and the embedded default model
// (models/mamba2-books-7m-bpe8k): last-position logits of each reference prompt within 1e-4
// (fp32 compute from the bf16 weights, as the reference), and the 32 greedy ids checked
// teacher-forced: argmax at every step equals the reference id wherever greedy_margins.json gives
// a top-1 margin ≥ 2e-3 (smaller margins are near-ties where fp32 rounding may legitimately flip).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "mamba/model.h"
#include "models/model_test_util.h"
#include "common/reference_data.h"

namespace mamba {
namespace {

constexpr double kLogitsTol = 1e-4;
constexpr double kMinMargin = 2e-3;

void check_model(const std::string& dir) {
  SCOPED_TRACE(dir);
  auto m = Model::load(dir, test::exact_tier());
  ASSERT_TRUE(m.ok()) << m.error().message;
  Model& model = *m.value();
  const auto ref = test::load_reference(dir);
  const auto margins = nlohmann::json::parse(test::read_file(dir + "/greedy_margins.json"))["margins"];
  const std::int64_t V = model.logits_width();
  int i = 0, checked = 0;
  for (const auto& p : ref.json["prompts"]) {
    const std::string key = std::string("p").append(std::to_string(i));
    const auto ids = p["ids"].get<std::vector<std::int32_t>>();
    const auto greedy = p["greedy_ids"].get<std::vector<std::int32_t>>();
    const auto& last_ref = ref.at(key + ".logits_last").f32;
    ASSERT_EQ(std::int64_t(last_ref.size()), V);

    // Teacher-forced: feed prompt + the reference ids, compare the argmax at every step.
    std::vector<std::int32_t> full = ids;
    full.insert(full.end(), greedy.begin(), greedy.end() - 1);
    State st = model.new_state();
    const auto logits = test::prefill_all(model, full, st);
    const std::int64_t L = std::int64_t(ids.size());
    EXPECT_LE(test::max_abs(logits.data() + (L - 1) * V, last_ref.data(), V), kLogitsTol) << key;
    for (std::size_t k = 0; k < greedy.size(); ++k) {
      if (margins[std::size_t(i)][k].get<double>() < kMinMargin) continue;
      ++checked;
      EXPECT_EQ(test::argmax(logits.data() + (L - 1 + std::int64_t(k)) * V, V), greedy[k])
          << key << " greedy step " << k;
    }
    ++i;
  }
  EXPECT_EQ(i, 4);
  EXPECT_GE(checked, 4 * 32 - 8);  // only a handful of near-ties may be skipped
}

TEST(TrainedModels, Mamba2Books16m) {
  MAMBA_REQUIRE_SHARED(shared);
  check_model(shared + "/models/mamba2-books-16m");
}

TEST(TrainedModels, Mamba1Books16m) {
  MAMBA_REQUIRE_SHARED(shared);
  check_model(shared + "/models/mamba1-books-16m");
}

TEST(TrainedModels, EmbeddedDefaultModel) {
  const std::string dir = test::source_dir() + "/models/mamba2-books-7m-bpe8k";
  if (!std::filesystem::exists(dir + "/model.safetensors")) {
    if (test::in_ci()) FAIL() << dir << " is missing";
    GTEST_SKIP() << dir << " not present yet";
  }
  check_model(dir);
}

}  // namespace
}  // namespace mamba
