// Every fixture of ../shared/fixtures (HF and state-spaces formats; f32, bf16 and f16 weights)
// through every path of the forward pass, against the stored reference logits and greedy ids:
//  (a) one prefill, (b) token-by-token decode from an empty state, (c) prefill split into two or
//  three parts (every split point for prompts ≤ 40 tokens, seeded random points beyond), (d) prefill
//  then a multi-token continuation; final states of (a)–(d) agree within 1e-5; causality; prompts of
//  1–4 tokens. References are fp32 HF no-cache forwards or the float64 recurrence (see
//  ../shared/README.md); our compute is fp32, so the tolerance is 1e-4 absolute on logits for every
//  fixture (the references' own fp32-vs-fp64 spread is ≤ 2.3e-5).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "mamba/model.h"
#include "models/model_test_util.h"
#include "common/reference_data.h"

namespace mamba {
namespace {

using test::argmax;
using test::max_abs;

constexpr double kStateTol = 1e-5;

struct FixtureCase {
  const char* name;
  double logits_tol;  ///< absolute, on every compared logit
};

std::ostream& operator<<(std::ostream& os, const FixtureCase& c) { return os << c.name; }

class FixtureTest : public ::testing::TestWithParam<FixtureCase> {
 protected:
  void SetUp() override {
    MAMBA_REQUIRE_SHARED(shared);
    dir_ = shared + "/fixtures/" + GetParam().name;
    auto m = Model::load(dir_ + "/model", test::exact_tier());
    ASSERT_TRUE(m.ok()) << m.error().message;
    model_ = std::move(m.value());
    ref_ = test::load_reference(dir_);
    V_ = model_->logits_width();
    tol_ = GetParam().logits_tol;
  }

  struct Prompt {
    std::string key;  // "p0"
    std::vector<std::int32_t> ids, greedy;
    std::string kind;  // "all" | "last+top8" | "last"
  };
  std::vector<Prompt> prompts() const {
    std::vector<Prompt> out;
    int i = 0;
    for (const auto& p : ref_.json["prompts"]) {
      Prompt q{std::string("p").append(std::to_string(i++)), p["ids"].get<std::vector<std::int32_t>>(),
               p["greedy_ids"].get<std::vector<std::int32_t>>(), p["logits"].get<std::string>()};
      out.push_back(std::move(q));
    }
    return out;
  }

  /// Checks prompt logits [L, V] against whatever the reference stores for this prompt.
  void check_prompt_logits(const Prompt& p, const std::vector<float>& logits, const std::string& path) {
    const std::int64_t L = static_cast<std::int64_t>(p.ids.size());
    SCOPED_TRACE(path + " " + p.key);
    if (p.kind == "all") {
      const auto& r = ref_.at(p.key + ".logits").f32;
      ASSERT_EQ(r.size(), logits.size());
      EXPECT_LE(max_abs(logits.data(), r.data(), L * V_), tol_);
      return;
    }
    const auto& last = ref_.at(p.key + ".logits_last").f32;
    ASSERT_EQ(std::int64_t(last.size()), V_);
    EXPECT_LE(max_abs(logits.data() + (L - 1) * V_, last.data(), V_), tol_);
    if (p.kind != "last+top8") return;
    const auto& ids = ref_.at(p.key + ".top8_ids").i32;
    const auto& vals = ref_.at(p.key + ".top8_vals").f32;
    const auto& lse = ref_.at(p.key + ".logsumexp").f32;
    ASSERT_EQ(std::int64_t(lse.size()), L);
    for (std::int64_t t = 0; t < L; ++t) {
      const float* row = logits.data() + t * V_;
      for (int k = 0; k < 8; ++k) EXPECT_NEAR(row[ids[t * 8 + k]], vals[t * 8 + k], tol_) << "pos " << t;
      EXPECT_NEAR(test::logsumexp(row, V_), lse[t], tol_) << "pos " << t;
    }
  }

  /// Checks one greedy step's logits (step k of 12) against the stored top-8 values.
  void check_greedy_step(const Prompt& p, int k, const float* row) {
    const auto& ids = ref_.at(p.key + ".greedy_top8_ids").i32;
    const auto& vals = ref_.at(p.key + ".greedy_top8_vals").f32;
    for (int j = 0; j < 8; ++j) EXPECT_NEAR(row[ids[k * 8 + j]], vals[k * 8 + j], tol_) << "greedy step " << k;
    if (k == 11) {
      EXPECT_LE(max_abs(row, ref_.at(p.key + ".greedy_last_logits").f32.data(), V_), tol_);
    }
  }

  std::string dir_;
  std::unique_ptr<Model> model_;
  test::ReferenceData ref_;
  std::int64_t V_ = 0;
  double tol_ = 1e-4;
};

// (a) one prefill + greedy decode; (d) prefill then a multi-token continuation; causality.
TEST_P(FixtureTest, PrefillGreedyContinuationAndCausality) {
  for (const Prompt& p : prompts()) {
    const std::int64_t L = std::int64_t(p.ids.size());
    State sa = model_->new_state();
    const auto la = test::prefill_all(*model_, p.ids, sa);
    check_prompt_logits(p, la, "(a) prefill");
    EXPECT_EQ(sa.position, L);

    // Greedy decode of 12 tokens from the prefilled state.
    State sg = sa.clone();
    std::vector<float> row(la.end() - V_, la.end());
    for (int k = 0; k < 12; ++k) {
      const std::int32_t next = argmax(row.data(), V_);
      ASSERT_EQ(next, p.greedy[k]) << p.key << " greedy step " << k;
      check_greedy_step(p, k, row.data());
      if (k == 11) break;
      State* states[] = {&sg};
      ASSERT_TRUE(model_->step({&next, 1}, states, row.data()).ok());
    }

    // (d) prefill, then the 11 greedy tokens as ONE multi-token continuation.
    State sd = model_->new_state();
    ASSERT_TRUE(model_->prefill(p.ids, sd, LogitsMode::kNone, nullptr).ok());
    const std::vector<std::int32_t> cont(p.greedy.begin(), p.greedy.begin() + 11);
    const auto lc = test::prefill_all(*model_, cont, sd);
    for (int k = 1; k < 12; ++k) {
      EXPECT_EQ(argmax(lc.data() + (k - 1) * V_, V_), p.greedy[k]) << p.key << " (d) step " << k;
      check_greedy_step(p, k, lc.data() + (k - 1) * V_);
    }
    EXPECT_LE(test::state_diff(sd, sg), kStateTol) << p.key << " (d) vs greedy decode state";
    EXPECT_EQ(sd.position, sg.position);

    // Causality: logits of P are the first |P| rows of the logits of P + suffix.
    std::vector<std::int32_t> full = p.ids;
    full.insert(full.end(), cont.begin(), cont.end());
    State sf = model_->new_state();
    const auto lf = test::prefill_all(*model_, full, sf);
    EXPECT_LE(max_abs(lf.data(), la.data(), L * V_), 1e-6) << p.key << " causality";
    EXPECT_LE(test::state_diff(sf, sd), kStateTol);
  }
}

// (b) token-by-token decode from an empty state.
TEST_P(FixtureTest, TokenByTokenDecode) {
  for (const Prompt& p : prompts()) {
    const std::int64_t L = std::int64_t(p.ids.size());
    State sb = model_->new_state();
    std::vector<float> lb(std::size_t(L * V_));
    for (std::int64_t t = 0; t < L; ++t) {
      State* states[] = {&sb};
      const Status s = model_->step({&p.ids[std::size_t(t)], 1}, states, lb.data() + t * V_);
      ASSERT_TRUE(s.ok()) << s.message();
    }
    check_prompt_logits(p, lb, "(b) decode");
    State sa = model_->new_state();
    ASSERT_TRUE(model_->prefill(p.ids, sa, LogitsMode::kNone, nullptr).ok());
    EXPECT_LE(test::state_diff(sa, sb), kStateTol) << p.key;
    EXPECT_EQ(sb.position, L);
  }
}

// (c) prefill split into two or three parts.
TEST_P(FixtureTest, SplitPrefill) {
  const std::int64_t Q = model_->config().arch == Arch::kMamba2 ? model_->config().chunk_size : 0;
  std::mt19937 rng(42);
  for (const Prompt& p : prompts()) {
    const std::int64_t L = std::int64_t(p.ids.size());
    State sa = model_->new_state();
    std::vector<float> last_a(static_cast<std::size_t>(V_));
    ASSERT_TRUE(model_->prefill(p.ids, sa, LogitsMode::kLast, last_a.data()).ok());

    std::vector<std::vector<std::int64_t>> splits;  // interior cut points
    if (L <= 40) {
      for (std::int64_t s = 1; s < L; ++s) splits.push_back({s});
      for (std::int64_t s = 1; s + 1 < L; ++s) splits.push_back({s, s + 1 + (L - s - 1) / 2});
    } else {
      std::uniform_int_distribution<std::int64_t> d(1, L - 1);
      for (int i = 0; i < 6; ++i) {
        std::int64_t a = d(rng), b = d(rng);
        if (a > b) std::swap(a, b);
        splits.push_back(a == b ? std::vector<std::int64_t>{a} : std::vector<std::int64_t>{a, b});
      }
    }
    if (Q > 0)  // absolute chunk multiples: must be bitwise identical to the unsplit prefill
      for (std::int64_t s = Q; s < L; s += Q) splits.push_back({s});

    for (auto cuts : splits) {
      cuts.push_back(L);
      State sc = model_->new_state();
      std::vector<float> last(static_cast<std::size_t>(V_));
      std::int64_t t0 = 0;
      for (std::int64_t t1 : cuts) {
        const std::span<const std::int32_t> part(p.ids.data() + t0, std::size_t(t1 - t0));
        const bool final_part = t1 == L;
        ASSERT_TRUE(model_->prefill(part, sc, final_part ? LogitsMode::kLast : LogitsMode::kNone,
                                    final_part ? last.data() : nullptr).ok());
        t0 = t1;
      }
      std::string where = p.key + " split at";
      for (std::size_t i = 0; i + 1 < cuts.size(); ++i) where.append(" ").append(std::to_string(cuts[i]));
      SCOPED_TRACE(where);
      EXPECT_LE(max_abs(last.data(), last_a.data(), V_), tol_);
      EXPECT_LE(test::state_diff(sc, sa), kStateTol);
      const bool at_chunk_multiples = Q > 0 && cuts.size() == 2 && cuts[0] % Q == 0;
      // Mamba-1 / Falcon-Mamba have no chunks: every split is bitwise the unsplit prefill (a part
      // of one token included: it must not take the decode step's one-token scan).
      if (at_chunk_multiples || Q == 0) {
        EXPECT_TRUE(test::state_bitwise_equal(sc, sa));
        EXPECT_EQ(0, std::memcmp(last.data(), last_a.data(), sizeof(float) * std::size_t(V_)));
      }
    }
  }
}

// Prompts of 1–4 tokens (shorter than d_conv) through prefill, decode and a split, against the
// first rows of a reference that stores all positions (causality makes them the reference).
TEST_P(FixtureTest, ShortPrompts) {
  for (const Prompt& p : prompts()) {
    if (p.kind != "all") continue;
    const auto& r = ref_.at(p.key + ".logits").f32;
    for (std::size_t k = 1; k <= std::min<std::size_t>(4, p.ids.size()); ++k) {
      const std::vector<std::int32_t> ids(p.ids.begin(), p.ids.begin() + std::ptrdiff_t(k));
      State s1 = model_->new_state();
      const auto l1 = test::prefill_all(*model_, ids, s1);
      EXPECT_LE(max_abs(l1.data(), r.data(), std::int64_t(k) * V_), tol_) << p.key << " prefill k=" << k;
      State s2 = model_->new_state();
      std::vector<float> row(static_cast<std::size_t>(V_));
      for (std::size_t t = 0; t < k; ++t) {
        State* states[] = {&s2};
        ASSERT_TRUE(model_->step({&ids[t], 1}, states, row.data()).ok());
        EXPECT_LE(max_abs(row.data(), r.data() + std::int64_t(t) * V_, V_), tol_) << p.key << " decode t=" << t;
      }
      EXPECT_LE(test::state_diff(s1, s2), kStateTol);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shared, FixtureTest,
                         ::testing::Values(FixtureCase{"mamba1-tiny", 1e-4}, FixtureCase{"mamba1-tiny-bf16", 1e-4},
                                           FixtureCase{"mamba1-tiny-ssm", 1e-4},
                                           FixtureCase{"mamba1-tiny-sharded", 1e-4},
                                           FixtureCase{"mamba1-odd", 1e-4}, FixtureCase{"mamba1-odd-f16", 1e-4},
                                           FixtureCase{"falcon-mamba-tiny", 1e-4}, FixtureCase{"mamba2-tiny", 1e-4},
                                           FixtureCase{"mamba2-tiny-ssm", 1e-4},
                                           FixtureCase{"mamba2-tiny-pyjson", 1e-4},
                                           FixtureCase{"mamba2-tiny-ssm-bf16", 1e-4},
                                           FixtureCase{"mamba2-odd", 1e-4}),
                         [](const auto& info) {
                           std::string n = info.param.name;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace mamba
