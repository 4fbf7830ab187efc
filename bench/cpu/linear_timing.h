// ops::linear timed at a model's own projection shapes, on the model's own weights.
#pragma once

#include <cstdint>
#include <optional>

#include "cpu/model_cost.h"

namespace mamba::bench {

struct LinearRate {
  double gflops = 0;        ///< 2·M·K·N ÷ best call time, 1e9/s
  double weight_gbps = 0;   ///< the weight's stored bytes (Projection::weight_bytes) ÷ best call time (what bounds small M)
  double seconds = 0;       ///< best call time
  /// cpu_time.h's cpu_share over the timed calls (ops threads; none below kGemmShareMinSeconds)
  std::optional<double> cpu_share;
};

/// Times ops::linear(x [M, K] random fp32, W, bias) → y [M, N], cycling through the projection's
/// weights of every layer (so small-M calls read their weights from memory, as decode does).
/// Repeats until `min_seconds` have passed (at least 2 calls after a warm-up) and keeps the best.
LinearRate time_linear(const Projection& p, std::int64_t M, double min_seconds);

}  // namespace mamba::bench
