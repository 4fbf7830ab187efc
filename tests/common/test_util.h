// Test support: locating ../shared (fixtures, models, tokenizer) and skipping when it is absent.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "mamba/model.h"

namespace mamba::test {

/// Path of the shared/ reference data: $MAMBA_SHARED_DIR, else <source>/../shared; nullopt if absent.
std::optional<std::string> shared_dir();
/// True under CI (CI=true), where missing shared data is a failure, not a skip.
bool in_ci();
/// Reads a whole file; aborts the test on failure.
std::string read_file(const std::string& path);
/// Source tree root and build tree root.
std::string source_dir();
std::string binary_dir();

/// LoadOptions for the exact tier (Precision::kExact): what tests that compare logits or greedy ids
/// with HF transformers' references (or with the exact tier's own figures) load with, since the
/// default (kAuto) computes bf16 checkpoints in the bf16 tier on CPUs with AVX-512 BF16.
inline LoadOptions exact_tier() {
  LoadOptions lo;
  lo.precision = Precision::kExact;
  return lo;
}

}  // namespace mamba::test

/// Binds `var` to shared_dir() or skips the test with a clear message (fails under CI=true).
#define MAMBA_REQUIRE_SHARED(var)                                                              \
  auto var##_opt = ::mamba::test::shared_dir();                                                \
  if (!var##_opt) {                                                                            \
    if (::mamba::test::in_ci()) FAIL() << "../shared is missing but CI=true: it is required";  \
    GTEST_SKIP() << "../shared not found (set MAMBA_SHARED_DIR); skipping reference test";    \
  }                                                                                            \
  const std::string var = *var##_opt
