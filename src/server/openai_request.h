// OpenAI request bodies: POST /v1/completions (CreateCompletionRequest) and
// POST /v1/chat/completions (CreateChatCompletionRequest), validated and mapped to
// GenerateOptions. `n` choices are n sequences of the prompt (routes_openai.cc); temperature 0
// means greedy; the default temperature 1 samples, as OpenAI does.
//
// Chat `messages` become the prompt through the server's ChatFormat (chat_format.h): the model's
// chat template, or the fixed "<Role>: <content>" format with its stop string "\nUser:".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mamba/generate.h"
#include "server/api_error.h"
#include "server/chat_format.h"
#include "server/tgi_request.h"

namespace mamba::server {

struct OpenAiRequest {
  bool chat = false;
  std::string model;                     ///< as sent (checked to be a string); answers name the served model
  std::string prompt;                    ///< text prompt (chat: formatted messages)
  std::vector<std::int32_t> prompt_ids;  ///< completions only: prompt given as token ids
  bool stream = false;
  int n = 1;                             ///< choices, 1 to RequestLimits::max_choices (--max-concurrent-requests)
  bool include_usage = false;            ///< stream_options.include_usage
  GenerateOptions opts;
  bool logprobs = false;                 ///< completions: logprobs ≥ 0 given; chat: logprobs = true
  int top_logprobs = 0;
  bool echo = false;                     ///< completions: prepend the prompt text
  bool max_tokens_given = false;         ///< false: opts.max_new_tokens is the route's default (shrunk to fit)
  bool add_special_tokens = true;        ///< vLLM's extra field: encode the text prompt with the post-processor's BOS etc. (chat: ChatFormat::default_add_special_tokens unless given)
  const char* max_tokens_field = "`max_tokens`";  ///< the field that set it, for errors (chat: `max_completion_tokens` when given)
};

/// Errors: 422 naming the field (n < 1 or above limits.max_choices, temperature ∉ [0, 2], top_p ∉ (0, 1], ...).
std::optional<ApiError> parse_completion_request(const nlohmann::json& body, const RequestLimits& limits,
                                                 OpenAiRequest& out);
/// `messages` become out.prompt through `format` (nullptr: the fixed format; ChatFormat::render),
/// with the request's `add_generation_prompt` (default true), `continue_final_message` (default
/// false) and `chat_template_kwargs` (an object, a template's extra variables; vLLM's fields), and
/// format->stop_strings() join its stops.
std::optional<ApiError> parse_chat_request(const nlohmann::json& body, const RequestLimits& limits,
                                           OpenAiRequest& out, const ChatFormat* format = nullptr);
/// The top-level fields of an OpenAI request body that the server does not read (typos such as
/// `max_tokenz`, or features it lacks such as `audio`), in key order: vLLM ignores them too
/// and logs a warning naming them, OpenAI answers 400. Fields that change nothing here but that
/// clients send routinely (`user`, `store`, `metadata`, `service_tier`, `parallel_tool_calls`) are
/// not listed. `chat`: the body went to /v1/chat/completions (else /v1/completions); a field only
/// the other route reads (`messages` on completions, `echo` or `prompt` on chat) is listed.
std::vector<std::string> unread_openai_fields(const nlohmann::json& body, bool chat);

/// vLLM's POST /tokenize body (its TokenizeCompletionRequest or TokenizeChatRequest).
struct VllmTokenizeRequest {
  std::string text;                ///< `prompt`, or `messages` formatted as the chat route formats them
  bool chat = false;               ///< given as `messages`
  bool add_special_tokens = true;  ///< for `messages` the chat route's default (ChatFormat::default_add_special_tokens)
  bool return_token_strs = false;  ///< also answer each id's vocabulary entry (`token_strs`)
};
/// `prompt` (a string) or `messages` (as /v1/chat/completions reads and formats them through
/// `format`, nullptr = the fixed format; `add_generation_prompt`, default true,
/// `continue_final_message` and `chat_template_kwargs`), `add_special_tokens`, `return_token_strs`; `model` may be any string,
/// as on the generation routes. Errors: 422 naming the field, or the chat template's error.
std::optional<ApiError> parse_vllm_tokenize_request(const nlohmann::json& body, VllmTokenizeRequest& out,
                                                    const ChatFormat* format = nullptr);
/// vLLM's POST /detokenize body: `tokens`, token ids (integers, or integral floats, 0 to INT32_MAX;
/// whether each is in the vocabulary is the route's check). Errors: 422 naming the item.
std::optional<ApiError> parse_vllm_detokenize_request(const nlohmann::json& body, std::vector<std::int32_t>& tokens);

}  // namespace mamba::server
