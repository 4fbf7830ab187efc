// Helpers shared by the model tests: argmax, differences of logits rows and of States.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "mamba/model.h"
#include "mamba/state.h"

namespace mamba::test {

/// First index of the maximum (torch.argmax's tie rule).
inline std::int32_t argmax(const float* row, std::int64_t n) {
  std::int64_t best = 0;
  for (std::int64_t i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;
  return static_cast<std::int32_t>(best);
}

inline double max_abs(const float* a, const float* b, std::int64_t n) {
  double m = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i]));
    if (!(d <= m)) m = d;  // NaN → NaN (fails any ≤ check)
  }
  return m;
}

inline double logsumexp(const float* row, std::int64_t n) {
  double mx = row[0];
  for (std::int64_t i = 1; i < n; ++i) mx = std::max(mx, double(row[i]));
  double s = 0;
  for (std::int64_t i = 0; i < n; ++i) s += std::exp(double(row[i]) - mx);
  return mx + std::log(s);
}

/// Largest |a − b| over every conv_state and ssm_state element (inf when the layouts differ).
inline double state_diff(const State& a, const State& b) {
  if (a.conv_state.size() != b.conv_state.size() || a.ssm_state.size() != b.ssm_state.size()) return INFINITY;
  double m = 0;
  for (std::size_t l = 0; l < a.conv_state.size(); ++l) {
    m = std::max(m, max_abs(a.conv_state[l].data<float>(), b.conv_state[l].data<float>(), a.conv_state[l].numel()));
    m = std::max(m, max_abs(a.ssm_state[l].data<float>(), b.ssm_state[l].data<float>(), a.ssm_state[l].numel()));
  }
  return m;
}

/// True when both states hold bitwise-identical tensors and the same position.
inline bool state_bitwise_equal(const State& a, const State& b) {
  if (a.position != b.position || a.conv_state.size() != b.conv_state.size()) return false;
  for (std::size_t l = 0; l < a.conv_state.size(); ++l) {
    if (std::memcmp(a.conv_state[l].data<float>(), b.conv_state[l].data<float>(), a.conv_state[l].nbytes()) ||
        std::memcmp(a.ssm_state[l].data<float>(), b.ssm_state[l].data<float>(), a.ssm_state[l].nbytes()))
      return false;
  }
  return true;
}

/// Prefill of `ids` into a fresh state: returns all logits [L, V] (fails the test on error).
inline std::vector<float> prefill_all(Model& m, const std::vector<std::int32_t>& ids, State& st) {
  std::vector<float> logits(ids.size() * static_cast<std::size_t>(m.logits_width()));
  const Status s = m.prefill(ids, st, LogitsMode::kAll, logits.data());
  EXPECT_TRUE(s.ok()) << s.message();
  return logits;
}

/// Batch invariance of decode: three prompts ({5, 17, 300}, {9}, {44 … 50}) prefilled, then tokens
/// 11, 12, 13 stepped together in one batch — bitwise the logits of each stepped alone.
inline void expect_batched_step_equals_alone(Model& model) {
  const std::int64_t V = model.logits_width();
  const std::vector<std::vector<std::int32_t>> prompts = {{5, 17, 300}, {9}, {44, 45, 46, 47, 48, 49, 50}};
  const std::vector<std::int32_t> next = {11, 12, 13};
  std::vector<State> states;
  for (const auto& p : prompts) {
    states.push_back(model.new_state());
    ASSERT_TRUE(model.prefill(p, states.back(), LogitsMode::kNone, nullptr).ok());
  }
  std::vector<State> copies;
  for (const State& s : states) copies.push_back(s.clone());
  std::vector<State*> ptrs;
  for (auto& s : states) ptrs.push_back(&s);
  std::vector<float> batched(prompts.size() * static_cast<std::size_t>(V)), alone(static_cast<std::size_t>(V));
  ASSERT_TRUE(model.step(next, ptrs, batched.data()).ok());
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    State* sp = &copies[i];
    ASSERT_TRUE(model.step({&next[i], 1}, {&sp, 1}, alone.data()).ok());
    EXPECT_EQ(std::memcmp(batched.data() + i * std::size_t(V), alone.data(), std::size_t(V) * 4), 0) << "sequence " << i;
  }
}

}  // namespace mamba::test
