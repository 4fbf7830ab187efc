// SamplingParams' checks (validate) and its greedy-or-sampling rule, apart from the Sampler so the
// server's request parsers (and their fuzzer) use them without the ops library.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "mamba/sampling.h"

namespace mamba {
namespace {

/// `value` in its own type: a float prints as the user wrote it (min_p = -0.1, not -0.10000000149011612).
template <class T>
Error invalid(const char* name, T value, const char* range) {
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("sampling parameter {} = {} is out of range: must be {}", name, value, range));
}

}  // namespace

Status SamplingParams::validate() const {
  if (!std::isfinite(temperature) || temperature < 0.0f) return invalid("temperature", temperature, "finite and >= 0");
  if (top_k < 0) return invalid("top_k", top_k, ">= 0 (0 = off)");
  if (!(top_p > 0.0f && top_p <= 1.0f)) return invalid("top_p", top_p, "in (0, 1]");
  if (!(min_p >= 0.0f && min_p < 1.0f)) return invalid("min_p", min_p, "in [0, 1)");
  if (!(typical_p > 0.0f && typical_p <= 1.0f)) return invalid("typical_p", typical_p, "in (0, 1]");
  if (!std::isfinite(repetition_penalty) || repetition_penalty <= 0.0f)
    return invalid("repetition_penalty", repetition_penalty, "finite and > 0 (1 = off)");
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    return invalid("frequency_penalty", frequency_penalty, "in [-2, 2]");
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    return invalid("presence_penalty", presence_penalty, "in [-2, 2]");
  if (frequency_penalty_per_length && !penalties_count_prompt)
    return make_error(ErrorCode::kInvalidArgument, "frequency_penalty_per_length (TGI's) counts the prompt: needs penalties_count_prompt");
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0) return make_error(ErrorCode::kInvalidArgument, fmt::format("sampling parameter logit_bias: token id {} is negative", id));
    if (!(bias >= -100.0f && bias <= 100.0f) && bias != -std::numeric_limits<float>::infinity())
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("sampling parameter logit_bias: the bias of token id {} is {}: must be in [-100, 100] (or -inf: banned)", id, bias));
  }
  // Each id once (n log n: a bias for the whole vocabulary is checked in milliseconds).
  std::vector<std::int32_t> ids(logit_bias.size());
  for (std::size_t k = 0; k < ids.size(); ++k) ids[k] = logit_bias[k].first;
  std::sort(ids.begin(), ids.end());
  if (auto d = std::adjacent_find(ids.begin(), ids.end()); d != ids.end())
    return make_error(ErrorCode::kInvalidArgument, fmt::format("sampling parameter logit_bias: token id {} is given twice", *d));
  return {};
}

bool SamplingParams::sampling() const {
  if (temperature == 0.0f) return false;
  return do_sample || temperature != 1.0f || top_k > 0 || top_p < 1.0f || typical_p < 1.0f || min_p > 0.0f;
}

}  // namespace mamba
