// libFuzzer target: the server's request bodies (bytes → JSON object → TGI /generate, OpenAI
// /v1/completions and /v1/chat/completions requests: prompt forms, sampling fields, stop strings,
// logit_bias, messages — in the fixed chat format and through a chat template, with the body's
// chat_template_kwargs as its variables; vLLM's /tokenize and /detokenize bodies). Any body gives a request or a 4xx error with a message, never a crash; an
// accepted request's sampling parameters pass SamplingParams::validate and its numbers are in range.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/chat_format.h"
#include "server/json_fields.h"
#include "server/openai_request.h"
#include "server/tgi_request.h"

namespace {

using mamba::server::ApiError;

void check_error(const ApiError& e) {
  if (e.status < 400 || e.status >= 500 || e.message.empty()) std::abort();
  // Both shapes are JSON objects carrying the message as a string (invalid UTF-8 in it replaced):
  // parse throws, and the fuzzer stops, on anything else.
  if (!nlohmann::json::parse(e.tgi_body())["error"].is_string()) std::abort();
  if (!nlohmann::json::parse(e.openai_body())["error"]["message"].is_string()) std::abort();
}

// max_new_limit: what the parser bounds the count by (TGI's: --max-total-tokens; OpenAI's parse
// leaves that bound to prepare_prompt, which answers context_length_exceeded with the prompt in view).
void check_accepted(const mamba::GenerateOptions& o, const mamba::server::RequestLimits& limits, std::int64_t max_new_limit) {
  if (!o.sampling.validate().ok()) std::abort();
  if (o.max_new_tokens < 0 || o.max_new_tokens > max_new_limit) std::abort();
  if (o.stop.size() > static_cast<std::size_t>(limits.max_stop_sequences)) std::abort();
}

/// A ChatML-style template that also reads a kwargs variable (`system_prefix`) and loop state.
const mamba::server::ChatFormat& template_format() {
  static const mamba::server::ChatFormat f = [] {
    auto r = mamba::server::ChatFormat::from_template(
        "{% if system_prefix is defined %}{{ system_prefix ~ '\\n' }}{% endif %}"
        "{% for m in messages %}{% if loop.first and m.role != 'system' %}{{ bos_token }}{% endif %}"
        "{% if m.role == 'tool' %}{{ raise_exception('tool messages are not supported') }}{% endif %}"
        "{{ '<|im_start|>' + m.role + '\\n' + m.content | trim + '<|im_end|>\\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
        "fuzz", {{"bos_token", "<s>"}, {"eos_token", "</s>"}});
    if (!r.ok()) std::abort();
    return std::move(r).value();
  }();
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  nlohmann::json j;
  if (auto e = mamba::server::parse_body_object(body, j)) {
    check_error(*e);
    return 0;
  }
  const mamba::server::RequestLimits limits;
  mamba::server::TgiRequest tgi;
  if (auto e = mamba::server::parse_tgi_request(j, limits, tgi)) {
    check_error(*e);
  } else {
    check_accepted(tgi.opts, limits, limits.max_total_tokens);
  }
  for (int route : {0, 1, 2}) {  // completions, chat (fixed format), chat (template)
    const bool chat = route > 0;
    mamba::server::OpenAiRequest r;
    auto e = chat ? mamba::server::parse_chat_request(j, limits, r, route == 2 ? &template_format() : nullptr)
                  : mamba::server::parse_completion_request(j, limits, r);
    if (e) {
      check_error(*e);
    } else {
      check_accepted(r.opts, limits, std::numeric_limits<int>::max());  // validate() covers logit_bias: ids ≥ 0, biases in range, distinct
    }
    for (const std::string& name : mamba::server::unread_openai_fields(j, chat))
      if (!j.contains(name)) std::abort();  // only the body's own keys are named
  }
  // vLLM's /tokenize and /detokenize bodies.
  mamba::server::VllmTokenizeRequest tok;
  if (auto e = mamba::server::parse_vllm_tokenize_request(j, tok)) check_error(*e);
  if (auto e = mamba::server::parse_vllm_tokenize_request(j, tok, &template_format())) check_error(*e);
  std::vector<std::int32_t> ids;
  if (auto e = mamba::server::parse_vllm_detokenize_request(j, ids)) {
    check_error(*e);
  } else {
    for (const std::int32_t id : ids)
      if (id < 0) std::abort();  // ids are 0 … INT32_MAX
  }
  return 0;
}
