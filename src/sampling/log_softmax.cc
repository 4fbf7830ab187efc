// log-softmax of a raw logits row over the tokenizer's ids (the definition of every logprob the
// project reports: before temperature, penalties or truncation).
#include <cmath>

#include <fmt/format.h>

#include "mamba/sampling.h"
#include "ops/ops.h"

namespace mamba {

Status log_softmax(std::span<const float> logits, std::int64_t vocab_limit, std::span<float> out) {
  if (vocab_limit <= 0 || static_cast<std::size_t>(vocab_limit) > logits.size())
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("log_softmax: vocab_limit {} must be in [1, {}] (logits width)", vocab_limit, logits.size()));
  if (out.size() < static_cast<std::size_t>(vocab_limit))
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("log_softmax: output has {} elements, needs {}", out.size(), vocab_limit));
  // Vectorised passes (ops/cpu/logits_scan.cc): this runs once per generated token over the whole
  // vocabulary (50 280 logits for GPT-NeoX: ~350 µs as scalar double loops, 10% of a q4 decode step).
  const std::int64_t n = vocab_limit;
  const float* x = logits.data();
  if (const std::int64_t bad = ops::find_non_finite(x, n); bad >= 0)
    return make_error(ErrorCode::kNumerical, fmt::format("log_softmax: logit of id {} is {} (not finite)", bad, x[bad]));
  const float mx = x[ops::argmax(x, n)];
  const double lse = static_cast<double>(mx) + std::log(ops::sum_exp(x, mx, n));
  float* o = out.data();
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(static_cast<double>(x[i]) - lse);
  return {};
}

}  // namespace mamba
