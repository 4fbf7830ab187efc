// log-softmax of a raw logits row over the tokenizer's ids (the definition of every logprob the
// project reports: before temperature, penalties or truncation).
#include <cmath>

#include <fmt/format.h>

#include "mamba/sampling.h"

namespace mamba {

Status log_softmax(std::span<const float> logits, std::int64_t vocab_limit, std::span<float> out) {
  if (vocab_limit <= 0 || static_cast<std::size_t>(vocab_limit) > logits.size())
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("log_softmax: vocab_limit {} must be in [1, {}] (logits width)", vocab_limit, logits.size()));
  if (out.size() < static_cast<std::size_t>(vocab_limit))
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("log_softmax: output has {} elements, needs {}", out.size(), vocab_limit));
  const std::size_t n = static_cast<std::size_t>(vocab_limit);
  float mx = logits[0];
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(logits[i]))
      return make_error(ErrorCode::kNumerical, fmt::format("log_softmax: logit of id {} is {} (not finite)", i, logits[i]));
    mx = std::max(mx, logits[i]);
  }
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  const double lse = static_cast<double>(mx) + std::log(sum);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<double>(logits[i]) - lse);
  return {};
}

}  // namespace mamba
