// Shared by the quantized-model and bf16-tier tests: teacher-forced comparison of a q8 / q4 copy
// (made with quantize_checkpoint), or of the model loaded with another Precision, against the
// original over the reference window `ppl.ids` (2049 ids, 2048 predictions, one window from an
// empty state, prefill in pieces of 256 = chunk multiples).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include "common/reference_data.h"
#include "mamba/model.h"
#include "mamba/quantize.h"
#include "common/test_util.h"
#include "models/model_test_util.h"

namespace mamba::test {

struct QuantComparison {
  double top1_agreement = 0;  ///< fraction of positions where argmax(q) == argmax(original)
  double ppl_orig = 0, ppl_quant = 0;
};

/// Per-position argmax and the window's perplexity of `model` over `ids`.
inline void score_window(Model& model, const std::vector<std::int32_t>& ids, std::vector<std::int32_t>& top1, double& ppl) {
  const std::int64_t V = model.logits_width(), piece = 256, n = std::int64_t(ids.size()) - 1;
  State st = model.new_state();
  std::vector<float> logits(std::size_t(piece * V));
  double nll = 0;
  top1.clear();
  for (std::int64_t t0 = 0; t0 < n; t0 += piece) {
    const std::int64_t len = std::min(piece, n - t0);
    const Status s = model.prefill({ids.data() + t0, std::size_t(len)}, st, LogitsMode::kAll, logits.data());
    ASSERT_TRUE(s.ok()) << s.message();
    for (std::int64_t t = 0; t < len; ++t) {
      const float* row = logits.data() + t * V;
      top1.push_back(argmax(row, V));
      nll += logsumexp(row, V) - row[ids[std::size_t(t0 + t + 1)]];
    }
  }
  ppl = std::exp(nll / double(n));
}

/// Top-1 agreement and both perplexities of `a` (the original) and `b` over `dir`'s ppl.ids; prints
/// one line labelled `what`.
inline QuantComparison compare_models(Model& a, Model& b, const std::string& dir, const std::string& what) {
  QuantComparison r;
  const auto ref = load_reference(dir);
  const auto& ids = ref.at("ppl.ids").i32;
  std::vector<std::int32_t> ta, tb;
  score_window(a, ids, ta, r.ppl_orig);
  score_window(b, ids, tb, r.ppl_quant);
  std::size_t same = 0;
  for (std::size_t i = 0; i < ta.size() && i < tb.size(); ++i) same += ta[i] == tb[i];
  r.top1_agreement = ta.empty() ? 0.0 : double(same) / double(ta.size());
  std::printf("%s %s: top-1 agreement %.2f%% over %zu positions; perplexity %.4f → %.4f (%+.3f%%)\n", dir.c_str(), what.c_str(),
              100 * r.top1_agreement, ta.size(), r.ppl_orig, r.ppl_quant, 100 * (r.ppl_quant / r.ppl_orig - 1));
  return r;
}

/// A q8 / q4 copy of `dir` (quantize_checkpoint) in a temp dir, removed when this goes out of scope;
/// a failed quantization fails the test (ok() is then false).
struct QuantizedCopy {
  std::filesystem::path path;
  bool ok_ = false;
  QuantizedCopy(const std::string& dir, QuantType type) {
    path = std::filesystem::temp_directory_path() / ("mamba-quant-test-" + std::to_string(::getpid()) + "-" +
                                                     std::filesystem::path(dir).filename().string() + (type == QuantType::kQ8 ? "-q8" : "-q4"));
    std::filesystem::remove_all(path);
    auto q = quantize_checkpoint(dir, type, path.string());
    EXPECT_TRUE(q.ok()) << q.error().message;
    ok_ = q.ok();
  }
  ~QuantizedCopy() { std::filesystem::remove_all(path); }
  QuantizedCopy(const QuantizedCopy&) = delete;
  QuantizedCopy& operator=(const QuantizedCopy&) = delete;
  bool ok() const { return ok_; }
  std::string dir() const { return path.string(); }
};

/// Quantizes `dir` to `type` in a temp dir and compares it with the original over ppl.ids.
inline QuantComparison compare_quantized(const std::string& dir, QuantType type) {
  QuantComparison r;
  const QuantizedCopy copy(dir, type);
  if (!copy.ok()) return r;
  auto orig = Model::load(dir, test::exact_tier());
  auto quant = Model::load(copy.dir(), test::exact_tier());
  EXPECT_TRUE(orig.ok() && quant.ok()) << (orig.ok() ? quant.error().message : orig.error().message);
  if (orig.ok() && quant.ok()) r = compare_models(**orig, **quant, dir, type == QuantType::kQ8 ? "q8" : "q4");
  return r;
}

/// Quantizes `dir` to `type` in a temp dir and compares that copy loaded with the exact tier against
/// the same copy loaded with `precision` (the int8 tier's bounds are against its own exact path).
inline QuantComparison compare_quantized_precision(const std::string& dir, QuantType type, Precision precision) {
  QuantComparison r;
  const QuantizedCopy copy(dir, type);
  if (!copy.ok()) return r;
  LoadOptions lo;
  lo.precision = precision;
  auto exact = Model::load(copy.dir(), test::exact_tier());
  auto other = Model::load(copy.dir(), lo);
  EXPECT_TRUE(exact.ok() && other.ok()) << (exact.ok() ? other.error().message : exact.error().message);
  if (exact.ok() && other.ok())
    r = compare_models(**exact, **other, dir, std::string(type == QuantType::kQ8 ? "q8" : "q4") + " precision " + precision_name(precision));
  return r;
}

/// Loads `dir` with the exact tier and with `precision` and compares them over ppl.ids.
inline QuantComparison compare_precision(const std::string& dir, Precision precision) {
  QuantComparison r;
  LoadOptions lo;
  lo.precision = precision;
  auto orig = Model::load(dir, test::exact_tier());
  auto other = Model::load(dir, lo);
  EXPECT_TRUE(orig.ok() && other.ok()) << (orig.ok() ? other.error().message : orig.error().message);
  if (!orig.ok() || !other.ok()) return r;
  return compare_models(**orig, **other, dir, std::string("precision ") + precision_name(precision));
}

}  // namespace mamba::test
