// TGI request bodies: {"inputs": str, "parameters": {...}, "stream": bool} for POST /generate,
// /generate_stream and / (text-generation-inference's GenerateRequest / CompatGenerateRequest),
// validated with TGI's rules and messages. Parameters → GenerateOptions (generate.h).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "mamba/generate.h"
#include "server/api_error.h"

namespace mamba::server {

/// Per-request limits from the server options.
struct RequestLimits {
  int max_input_tokens = 65536;
  int max_total_tokens = 131072;
  int max_stop_sequences = 4;
  int max_top_n_tokens = 5;
  int default_max_new_tokens = 100;  ///< TGI's default
  /// The most OpenAI `n` choices one request may ask for: --max-concurrent-requests (each choice is
  /// a sequence of its own, counted in flight). The OpenAI parsers refuse any integral `n` above it
  /// naming the flag, however large (1e12, 2^31 and beyond included).
  int max_choices = std::numeric_limits<int>::max();
  /// The most TGI `best_of` sequences one request may ask for: --max-best-of, at most
  /// --max-concurrent-requests (each is a sequence of its own); `max_best_of_flag` names the one
  /// that bounds it in the refusal.
  int max_best_of = 1;
  std::string max_best_of_flag = "--max-best-of";
};

struct TgiRequest {
  std::string inputs;
  bool stream = false;                 ///< POST / only
  GenerateOptions opts;                ///< max_new_tokens, sampling, stop, top_logprobs, prompt_logprobs
  bool details = false;
  bool decoder_input_details = false;  ///< prefill tokens with logprobs in details
  bool return_full_text = false;       ///< prefix generated_text with the prompt text
  std::int64_t truncate = 0;           ///< keep only the last `truncate` prompt tokens (0 = all)
  bool max_new_tokens_given = false;   ///< false: opts.max_new_tokens is the default (shrunk to fit, as TGI)
  bool add_special_tokens = true;      ///< top-level `add_special_tokens` (TGI's): the post-processor's BOS etc.
  /// TGI's `best_of`: sequences sampled (each with its own random seed), of which the answer is the
  /// one whose tokens' logprobs sum highest; > 1 only with sampling, without `seed`, not streamed.
  int best_of = 1;
};

/// Validates `body` (a JSON object). Errors: 422 naming the parameter (TGI's messages for
/// `best_of`: above limits.max_best_of, without sampling, with a seed).
std::optional<ApiError> parse_tgi_request(const nlohmann::json& body, const RequestLimits& limits, TgiRequest& out);

}  // namespace mamba::server
