#include "server/tgi_request.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "server/json_fields.h"

namespace mamba::server {

using nlohmann::json;

#define RETURN_IF_API_ERROR(expr)     \
  do {                                \
    if (auto e_ = (expr)) return e_;  \
  } while (0)

std::optional<ApiError> parse_tgi_request(const json& body, const RequestLimits& limits, TgiRequest& out) {
  bool present = false;
  RETURN_IF_API_ERROR(get_string(body, "inputs", out.inputs, present));
  if (!present) return ApiError::validation("`inputs` is required (a string)");
  if (out.inputs.empty()) return ApiError::validation("`inputs` cannot be empty");
  RETURN_IF_API_ERROR(get_bool(body, "stream", out.stream));
  RETURN_IF_API_ERROR(get_bool(body, "add_special_tokens", out.add_special_tokens));

  GenerateOptions& o = out.opts;
  o.max_new_tokens = limits.default_max_new_tokens;
  auto pit = body.find("parameters");
  if (pit == body.end() || pit->is_null()) return std::nullopt;
  const json& p = *pit;
  if (!p.is_object()) return ApiError::validation(fmt::format("`parameters` must be an object, got {}", p.type_name()));

  SamplingParams& s = o.sampling;
  RETURN_IF_API_ERROR(get_bool(p, "do_sample", s.do_sample));
  if (p.contains("temperature") && !p["temperature"].is_null()) {
    RETURN_IF_API_ERROR(get_float(p, "temperature", s.temperature));
    if (!(s.temperature > 0.0f)) return ApiError::validation("`temperature` must be strictly positive");
  }
  std::int64_t top_k = 0;
  if (p.contains("top_k") && !p["top_k"].is_null()) {
    RETURN_IF_API_ERROR(get_int(p, "top_k", 1, 1 << 30, top_k));
    s.top_k = static_cast<int>(top_k);
  }
  if (p.contains("top_p") && !p["top_p"].is_null()) {
    RETURN_IF_API_ERROR(get_float(p, "top_p", s.top_p));
    if (!(s.top_p > 0.0f && s.top_p < 1.0f)) return ApiError::validation("`top_p` must be > 0.0 and < 1.0");
  }
  if (p.contains("typical_p") && !p["typical_p"].is_null()) {
    RETURN_IF_API_ERROR(get_float(p, "typical_p", s.typical_p));
    if (!(s.typical_p > 0.0f && s.typical_p < 1.0f)) return ApiError::validation("`typical_p` must be > 0.0 and < 1.0");
  }
  if (p.contains("min_p") && !p["min_p"].is_null()) {
    RETURN_IF_API_ERROR(get_float(p, "min_p", s.min_p));
    if (!(s.min_p >= 0.0f && s.min_p < 1.0f)) return ApiError::validation("`min_p` must be >= 0.0 and < 1.0");
  }
  if (p.contains("repetition_penalty") && !p["repetition_penalty"].is_null()) {
    RETURN_IF_API_ERROR(get_float(p, "repetition_penalty", s.repetition_penalty));
    if (!(s.repetition_penalty > 0.0f)) return ApiError::validation("`repetition_penalty` must be strictly positive");
  }
  if (p.contains("frequency_penalty") && !p["frequency_penalty"].is_null()) {
    RETURN_IF_API_ERROR(get_float(p, "frequency_penalty", s.frequency_penalty));
    s.frequency_penalty_per_length = true;  // TGI's: the count over the sequence's length
    if (!(s.frequency_penalty >= -2.0f && s.frequency_penalty <= 2.0f)) {
      return ApiError::validation("`frequency_penalty` must be >= -2.0 and <= 2.0");
    }
  }
  if (p.contains("presence_penalty") && !p["presence_penalty"].is_null()) {  // an extension (OpenAI's)
    RETURN_IF_API_ERROR(get_float(p, "presence_penalty", s.presence_penalty));
    if (!(s.presence_penalty >= -2.0f && s.presence_penalty <= 2.0f)) {
      return ApiError::validation("`presence_penalty` must be >= -2.0 and <= 2.0");
    }
  }
  bool has_seed = false;
  RETURN_IF_API_ERROR(get_u64(p, "seed", s.seed, has_seed));
  s.has_seed = has_seed;

  std::int64_t max_new = o.max_new_tokens;
  out.max_new_tokens_given = p.contains("max_new_tokens") && !p["max_new_tokens"].is_null();
  RETURN_IF_API_ERROR(get_int(p, "max_new_tokens", 1, limits.max_total_tokens, max_new));
  o.max_new_tokens = static_cast<int>(max_new);
  RETURN_IF_API_ERROR(get_stop(p, "stop", static_cast<std::size_t>(limits.max_stop_sequences), o.stop));
  o.include_stop_text = true;  // TGI: generated_text ends with the stop sequence that ended it
  RETURN_IF_API_ERROR(get_bool(p, "details", out.details));
  RETURN_IF_API_ERROR(get_bool(p, "decoder_input_details", out.decoder_input_details));
  RETURN_IF_API_ERROR(get_bool(p, "return_full_text", out.return_full_text));
  RETURN_IF_API_ERROR(get_int(p, "truncate", 1, limits.max_input_tokens, out.truncate));
  std::int64_t top_n = 0;
  RETURN_IF_API_ERROR(get_int(p, "top_n_tokens", 0, limits.max_top_n_tokens, top_n));
  o.top_logprobs = static_cast<int>(top_n);
  o.prompt_logprobs = out.decoder_input_details;
  // best_of, as TGI's validation: at most the server's limit, only with sampling (do_sample, or a
  // temperature / top_k / top_p / typical_p given: SamplingParams::sampling()), never with a seed
  // (the sequences would be one).
  if (const auto it = p.find("best_of"); it != p.end() && it->is_number()) {
    const double d = it->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && (d > limits.max_best_of || d < 1))
      return ApiError::validation(fmt::format("`best_of` must be > 0 and <= {} ({}), given: {}", limits.max_best_of,
                                              limits.max_best_of_flag, d >= -9e15 && d <= 9e15 ? fmt::format("{}", static_cast<std::int64_t>(d)) : it->dump()));
  }
  std::int64_t best_of = 1;
  RETURN_IF_API_ERROR(get_int(p, "best_of", 1, std::numeric_limits<int>::max(), best_of));  // above the limit: refused above
  out.best_of = static_cast<int>(best_of);
  if (out.best_of > 1 && !s.sampling()) return ApiError::validation("you must use sampling when `best_of` is > 1 (do_sample, or a temperature other than 1, top_k, top_p or typical_p)");
  if (out.best_of > 1 && s.has_seed) return ApiError::validation("`seed` must not be set when `best_of` > 1");
  RETURN_IF_API_ERROR(reject_if_set(p, "watermark", "watermarking is not implemented"));
  RETURN_IF_API_ERROR(reject_if_set(p, "grammar", "grammar-constrained decoding is not implemented"));
  RETURN_IF_API_ERROR(reject_if_set(p, "adapter_id", "adapters are not implemented"));
  // OpenAI fields TGI does not have: refused here as on the OpenAI routes (TGI would drop them
  // silently, and a user moving a request between the APIs would get an answer without them).
  RETURN_IF_API_ERROR(reject_if_set(p, "logit_bias", "TGI's /generate has no logit bias; the OpenAI routes (/v1/completions, /v1/chat/completions) take `logit_bias`"));
  std::int64_t n = 1;
  RETURN_IF_API_ERROR(get_int(p, "n", 1, 1 << 20, n));
  if (n != 1) return ApiError::validation(fmt::format("`n` must be 1 (several answers are not supported), got {}", n));
  Status st = s.validate();
  if (!st.ok()) return ApiError::validation(st.message());
  return std::nullopt;
}

}  // namespace mamba::server
