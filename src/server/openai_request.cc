#include "server/openai_request.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "server/json_fields.h"

namespace mamba::server {

using nlohmann::json;

#define RETURN_IF_API_ERROR(expr)     \
  do {                                \
    if (auto e_ = (expr)) return e_;  \
  } while (0)

namespace {

/// A key as an error message shows it (shown_text): at most 40 bytes of it.
std::string shown_key(const std::string& key) { return shown_text(key, 40); }

/// OpenAI's `logit_bias`: an object of token id (a decimal string) → bias in [-100, 100], or null.
/// The ids' upper bound (the vocabulary) is checked by the route, which knows it. Linear in the
/// object's size (a 600,000-key object is refused or taken at once, never quadratically).
std::optional<ApiError> get_logit_bias(const json& b, std::vector<std::pair<std::int32_t, float>>& out) {
  const auto it = b.find("logit_bias");
  if (it == b.end() || it->is_null()) return std::nullopt;
  if (!it->is_object())
    return ApiError::validation(fmt::format("`logit_bias` must be an object of token id → bias, got {}", it->type_name()));
  std::unordered_set<std::int32_t> seen;
  for (const auto& [key, value] : it->items()) {
    if (key.empty() || key.find_first_not_of("0123456789") != std::string::npos)
      return ApiError::validation(fmt::format("`logit_bias` keys must be token ids (non-negative integers as strings), got \"{}\"", shown_key(key)));
    const std::size_t lead = std::min(key.find_first_not_of('0'), key.size() - 1);  // "0007" is 7
    const long long parsed = key.size() - lead > 10 ? -1 : std::stoll(key.substr(lead));  // ≤ 10 digits: no overflow
    if (parsed < 0 || parsed > INT32_MAX)
      return ApiError::validation(fmt::format("`logit_bias` key \"{}\" is not a token id of this model: too large", shown_key(key)));
    const auto id = static_cast<std::int32_t>(parsed);
    if (!value.is_number())
      return ApiError::validation(fmt::format("`logit_bias` value of token {} must be a number, got {}", id, value.type_name()));
    const double bias = value.get<double>();
    if (!(bias >= -100.0 && bias <= 100.0))
      return ApiError::validation(fmt::format("`logit_bias` value of token {} must be between -100 and 100, got {}", id, value.dump()));
    if (bias != 0.0 && static_cast<float>(bias) == 0.0f)  // as every real-valued field (get_float)
      return ApiError::validation(fmt::format(
          "`logit_bias` value of token {} = {} is below 7.1e-46 in magnitude, which a 32-bit float rounds to 0 (give 0 itself, or a larger value)",
          id, value.dump()));
    if (!seen.insert(id).second) return ApiError::validation(fmt::format("`logit_bias` names token id {} twice", id));
    out.emplace_back(id, static_cast<float>(bias));
  }
  return std::nullopt;
}

/// `tool_choice` (and the legacy `function_call`): no tools are offered, so "none", "auto" and null
/// (no tool called either way; clients send them by default) are accepted, and a choice that
/// demands a tool call ("required", an object naming a function) is refused by name.
std::optional<ApiError> check_tool_choice(const json& b, const char* key) {
  const auto it = b.find(key);
  if (it == b.end() || it->is_null() || (it->is_string() && (*it == "none" || *it == "auto"))) return std::nullopt;
  if (it->is_string() && *it == "required")
    return ApiError::validation(fmt::format("`{}` \"required\" is not supported by this server: tool calling is not implemented", key));
  if (it->is_object())
    return ApiError::validation(fmt::format("`{}` naming a function is not supported by this server: tool calling is not implemented", key));
  return ApiError::validation(fmt::format("`{}` must be \"none\", \"auto\", \"required\" or an object naming a function, got {}", key,
                                          it->is_string() ? fmt::format("\"{}\"", shown_key(it->get<std::string>()))
                                                          : std::string(it->type_name())));
}

// Fields shared by both endpoints.
std::optional<ApiError> parse_common(const json& b, const RequestLimits& limits, int default_max_tokens,
                                     OpenAiRequest& out) {
  bool present = false;
  RETURN_IF_API_ERROR(get_string(b, "model", out.model, present));
  RETURN_IF_API_ERROR(get_bool(b, "stream", out.stream));
  RETURN_IF_API_ERROR(get_bool(b, "add_special_tokens", out.add_special_tokens));
  if (auto it = b.find("stream_options"); it != b.end() && !it->is_null()) {
    if (!it->is_object()) return ApiError::validation("`stream_options` must be an object");
    // As vLLM (and OpenAI): options of a stream on a request that does not stream are an error; an
    // empty object, which sets nothing, is accepted (vLLM tests the object's truth value).
    if (!out.stream && !it->empty())
      return ApiError::validation("`stream_options` is only allowed with `stream`: true");
    if (auto e = get_bool(*it, "include_usage", out.include_usage)) {
      e->message.insert(1, "stream_options.");  // "`include_usage` must be ..." → "`stream_options.include_usage` ..."
      return e;
    }
  }
  // `n` choices: an integral value above the server's limit, however large (1e12, past 2^31 or
  // 2^64), is refused naming that limit (it was refused with int's range "between 1 and
  // 2147483647", which no server takes); a fraction, 0, a negative or a string as get_int says.
  if (const auto it = b.find("n"); it != b.end() && it->is_number()) {
    const double d = it->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && d > limits.max_choices)
      return ApiError::validation(fmt::format("`n` must be at most {} (--max-concurrent-requests: each choice is a "
                                              "sequence of its own), got {}",
                                              limits.max_choices, it->dump()));
  }
  std::int64_t n = 1;
  RETURN_IF_API_ERROR(get_int(b, "n", 1, std::numeric_limits<int>::max(), n));  // above max_choices: refused above
  out.n = static_cast<int>(n);

  GenerateOptions& o = out.opts;
  SamplingParams& s = o.sampling;
  std::int64_t max_tokens = default_max_tokens;
  out.max_tokens_given = b.contains("max_tokens") && !b["max_tokens"].is_null();
  // A negative count: llama.cpp's server reads −1 as "no limit"; here it is an error that says how
  // to get the default instead (the range message "between 0 and …" suggested 0, which /v1/chat
  // refuses and /v1/completions takes only with `echo`).
  if (auto it = b.find("max_tokens"); it != b.end() && it->is_number() && it->get<double>() < 0)
    return ApiError::validation(fmt::format(
        "`max_tokens` must be at least 1, got {} (there is no value for \"no limit\": leave the field out for the default "
        "of {} tokens, or give up to {})",
        it->dump(), default_max_tokens, limits.max_total_tokens));
  // 0 only with `echo` on /v1/completions (checked there): the prompt scored, nothing generated. A
  // count past --max-total-tokens is refused with the prompt's length in view (prepare_prompt:
  // OpenAI's context_length_exceeded, which LangChain and LiteLLM look for), not here.
  RETURN_IF_API_ERROR(get_int(b, "max_tokens", 0, std::numeric_limits<int>::max(), max_tokens));
  o.max_new_tokens = static_cast<int>(max_tokens);
  s.temperature = 1.0f;
  RETURN_IF_API_ERROR(get_float(b, "temperature", s.temperature));
  if (!(s.temperature >= 0.0f && s.temperature <= 2.0f)) return ApiError::validation("`temperature` must be between 0 and 2");
  RETURN_IF_API_ERROR(get_float(b, "top_p", s.top_p));
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) return ApiError::validation("`top_p` must be > 0 and <= 1");
  std::int64_t top_k = 0;
  RETURN_IF_API_ERROR(get_int(b, "top_k", -1, 1 << 30, top_k));  // −1 = off, as vLLM
  s.top_k = top_k < 0 ? 0 : static_cast<int>(top_k);
  RETURN_IF_API_ERROR(get_float(b, "typical_p", s.typical_p));  // an extension, as TGI's
  if (!(s.typical_p > 0.0f && s.typical_p <= 1.0f)) return ApiError::validation("`typical_p` must be > 0 and <= 1");
  RETURN_IF_API_ERROR(get_float(b, "min_p", s.min_p));
  if (!(s.min_p >= 0.0f && s.min_p < 1.0f)) return ApiError::validation("`min_p` must be >= 0 and < 1");
  RETURN_IF_API_ERROR(get_float(b, "frequency_penalty", s.frequency_penalty));
  if (!(s.frequency_penalty >= -2.0f && s.frequency_penalty <= 2.0f)) return ApiError::validation("`frequency_penalty` must be between -2 and 2");
  RETURN_IF_API_ERROR(get_float(b, "presence_penalty", s.presence_penalty));
  if (!(s.presence_penalty >= -2.0f && s.presence_penalty <= 2.0f)) return ApiError::validation("`presence_penalty` must be between -2 and 2");
  s.penalties_count_prompt = false;  // OpenAI: counts of the tokens sampled so far (vLLM: the same)
  RETURN_IF_API_ERROR(get_float(b, "repetition_penalty", s.repetition_penalty));
  if (!(s.repetition_penalty > 0.0f)) return ApiError::validation("`repetition_penalty` must be strictly positive");
  bool has_seed = false;
  std::int64_t seed = 0;
  if (b.contains("seed") && !b["seed"].is_null()) {
    RETURN_IF_API_ERROR(get_int(b, "seed", INT64_MIN, INT64_MAX, seed));
    has_seed = true;
  }
  s.seed = static_cast<std::uint64_t>(seed);
  s.has_seed = has_seed;
  // OpenAI: temperature 0 is greedy whatever top_p / top_k / min_p say (SamplingParams: temperature
  // 0 never samples; TGI's rule, a warper alone turns sampling on, is for TGI's routes), anything
  // else samples.
  s.do_sample = s.temperature > 0.0f;
  RETURN_IF_API_ERROR(get_stop(b, "stop", static_cast<std::size_t>(limits.max_stop_sequences), o.stop));
  // vLLM's extensions: the two the engine has, and the others refused by name rather than ignored
  // (a client that sends them expects their effect).
  RETURN_IF_API_ERROR(get_bool(b, "ignore_eos", o.ignore_eos));
  RETURN_IF_API_ERROR(get_bool(b, "include_stop_str_in_output", o.include_stop_text));
  RETURN_IF_API_ERROR(reject_if_set(b, "stop_token_ids", "stop on token ids is not implemented (use `stop` strings)"));
  std::int64_t min_tokens = 0;
  RETURN_IF_API_ERROR(get_int(b, "min_tokens", 0, INT64_MAX, min_tokens));
  if (min_tokens > 0) return ApiError::validation("`min_tokens` is not supported by this server: a minimum length is not implemented");
  if (const auto t = b.find("truncate_prompt_tokens"); t != b.end() && !t->is_null())
    return ApiError::validation("`truncate_prompt_tokens` is not supported by this server: prompt truncation is TGI's `truncate` on /generate");
  RETURN_IF_API_ERROR(get_logit_bias(b, s.logit_bias));
  // An empty `tools` array (no tool offered; LangChain sends one) is accepted, as reject_if_set does.
  RETURN_IF_API_ERROR(reject_if_set(b, "tools", "tool calling is not implemented"));
  RETURN_IF_API_ERROR(reject_if_set(b, "functions", "tool calling is not implemented"));
  RETURN_IF_API_ERROR(check_tool_choice(b, "tool_choice"));
  RETURN_IF_API_ERROR(check_tool_choice(b, "function_call"));
  // {"type": "text"} is OpenAI's default (plain text, what this server returns): accepted, as vLLM.
  if (auto rf = b.find("response_format");
      !(rf != b.end() && rf->is_object() && rf->size() == 1 && rf->contains("type") && (*rf)["type"] == "text"))
    RETURN_IF_API_ERROR(reject_if_set(b, "response_format", "structured output is not implemented"));
  return std::nullopt;
}

/// One token id: an integer, or an integral JSON float (41.0, as the other integer fields take
/// them), from 0 to INT32_MAX.
bool token_id(const json& e, std::int32_t& id) {
  const std::optional<std::int64_t> v = as_integer(e);
  if (!v || *v < 0 || *v > INT32_MAX) return false;
  id = static_cast<std::int32_t>(*v);
  return true;
}

/// An item that is not a token id, as its error message shows it: a scalar's JSON (at most 64
/// bytes), an array or object by its type.
std::string shown_item(const json& e) { return e.is_structured() ? std::string(e.type_name()) : shown_text(dump_json(e), 64); }

/// `messages`: [{role, content}], content a string or an array of text parts (joined).
std::optional<ApiError> parse_chat_messages(const json& b, std::vector<ChatMessage>& msgs) {
  auto mit = b.find("messages");
  if (mit == b.end() || mit->is_null())
    return ApiError::validation("`messages` is required (an array of {role, content})");
  if (!mit->is_array()) {
    return ApiError::validation(
        fmt::format("`messages` must be an array of {{role, content}}, got {}", mit->type_name()));
  }
  if (mit->empty()) return ApiError::validation("`messages` cannot be empty");
  for (std::size_t i = 0; i < mit->size(); ++i) {
    const json& m = (*mit)[i];
    if (!m.is_object()) return ApiError::validation(fmt::format("`messages[{}]` must be an object", i));
    // A turn's tool calls would be lost from the prompt (the server renders content only): refused,
    // as `tools` is, rather than dropped (an empty list is no call).
    if (const auto tc = m.find("tool_calls"); tc != m.end() && !tc->is_null() && !(tc->is_array() && tc->empty()) &&
                                              m.contains("content") && !m["content"].is_null())
      return ApiError::validation(fmt::format("`messages[{}].tool_calls`: tool calling is not supported by this server (give the "
                                              "assistant's turn as text content only)", i));
    ChatMessage cm;
    bool present = false;
    RETURN_IF_API_ERROR(get_string(m, "role", cm.role, present));
    if (!present) return ApiError::validation(fmt::format("`messages[{}].role` is required", i));
    if (cm.role != "system" && cm.role != "user" && cm.role != "assistant" && cm.role != "tool" && cm.role != "developer") {
      return ApiError::validation(
          fmt::format("`messages[{}].role` must be system, developer, user, assistant or tool, got '{}'", i, shown_text(cm.role, 64)));
    }
    auto cit = m.find("content");
    if (cit == m.end() || cit->is_null()) {
      // OpenAI allows a null content only on assistant messages that carry tool_calls, which this
      // server does not support: named as such, not as a missing content.
      if (const auto tc = m.find("tool_calls"); tc != m.end() && !tc->is_null())
        return ApiError::validation(fmt::format("`messages[{}]` carries `tool_calls` and no content: tool calling is not supported by "
                                                "this server (give the assistant's turn as text content)", i));
      return ApiError::validation(fmt::format("`messages[{}].content` is required (a string or an array of text parts), got {}", i,
                                              cit == m.end() ? "nothing" : "null"));
    } else if (cit->is_string()) {
      cm.content = cit->get<std::string>();
    } else if (cit->is_array()) {
      // Text parts only, each by its type: an image, audio or file part is refused by name (a
      // text-only model; read as its text, it was answered without it).
      for (std::size_t j = 0; j < cit->size(); ++j) {
        const json& part = (*cit)[j];
        const auto type = part.is_object() ? part.find("type") : part.end();
        if (part.is_object() && type != part.end() && type->is_string() && *type != "text")
          return ApiError::validation(fmt::format("`messages[{}].content[{}].type` '{}' is not supported: this server's model reads "
                                                  "text only (parts must be {{\"type\": \"text\", \"text\": ...}})",
                                                  i, j, shown_text(type->get<std::string>(), 64)));
        if (!part.is_object() || type == part.end() || !part.contains("text") || !part["text"].is_string()) {
          return ApiError::validation(
              fmt::format("`messages[{}].content[{}]` must be a text part {{\"type\": \"text\", \"text\": ...}}", i, j));
        }
        cm.content += part["text"].get<std::string>();
      }
    } else {
      return ApiError::validation(fmt::format("`messages[{}].content` must be a string or an array of text parts", i));
    }
    msgs.push_back(std::move(cm));
  }
  return std::nullopt;
}

/// `format`, or the fixed format (ChatFormat's default) where the caller gives none.
const ChatFormat& format_or_fixed(const ChatFormat* format) {
  static const ChatFormat fixed;
  return format != nullptr ? *format : fixed;
}

/// A chat body's prompt text: its `messages` through `format`, with `add_generation_prompt`
/// (default true), `continue_final_message` (default false) and `chat_template_kwargs` (vLLM's fields).
std::optional<ApiError> read_chat_prompt(const json& b, const ChatFormat& format, std::string& out) {
  // What the prompt would lack, refused by name (vLLM reads these; `tools` and `functions` are
  // parse_common's on the chat route, parse_vllm_tokenize_request's on /tokenize).
  RETURN_IF_API_ERROR(reject_if_set(b, "documents", "documents (retrieval-augmented chat templates) are not supported"));
  RETURN_IF_API_ERROR(reject_if_set(b, "chat_template",
                                    "a request's own chat template is not accepted: the server renders the model's "
                                    "(or its --chat-template)"));
  std::vector<ChatMessage> msgs;
  RETURN_IF_API_ERROR(parse_chat_messages(b, msgs));
  ChatFormat::Request r;
  RETURN_IF_API_ERROR(get_bool(b, "add_generation_prompt", r.add_generation_prompt));
  RETURN_IF_API_ERROR(get_bool(b, "continue_final_message", r.continue_final_message));
  const auto kw = b.find("chat_template_kwargs");
  r.kwargs = kw == b.end() ? nullptr : &*kw;
  return format.render(msgs, r, out);
}

std::optional<ApiError> finish(OpenAiRequest& out) {
  Status st = out.opts.sampling.validate();
  if (!st.ok()) return ApiError::validation(st.message());
  out.opts.top_logprobs = out.top_logprobs;
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_completion_request(const json& b, const RequestLimits& limits, OpenAiRequest& out) {
  out.chat = false;
  auto pit = b.find("prompt");
  if (pit == b.end() || pit->is_null()) return ApiError::validation("`prompt` is required");
  const json& p = *pit;
  if (p.is_string()) {
    out.prompt = p.get<std::string>();
  } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
    out.prompt = p[0].get<std::string>();
  } else if (p.is_array() && !p.empty() && p[0].is_string()) {
    const bool all_strings = std::all_of(p.begin(), p.end(), [](const json& e) { return e.is_string(); });
    return ApiError::validation(all_strings ? "`prompt` must be one string (batches of prompts are not supported)"
                                            : "`prompt` mixes a string with other values: give one string, or an array of token ids");
  } else if (p.is_array() && p.size() > 1 && p[0].is_array()) {
    return ApiError::validation("`prompt` as several token-id arrays is a batch of prompts, not supported: send one per request");
  } else if (p.is_array() && p.size() == 1 && p[0].is_array() && p[0].empty()) {
    return ApiError::validation("`prompt` is an empty array of token ids");
  } else if (p.is_array() && p.empty()) {
    return ApiError::validation("`prompt` is an empty array: give a string or an array of token ids");
  } else if (p.is_array()) {
    // Token ids, or a batch of one token-id array (lm-eval's tokenized requests send [[ids]]).
    const bool nested = p[0].is_array();
    const json& ids = nested ? p[0] : p;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      std::int32_t id = 0;
      if (!token_id(ids[i], id))
        return ApiError::validation(fmt::format("`prompt{}[{}]` must be a token id (an integer from 0 to {}), got {}", nested ? "[0]" : "", i,
                                                INT32_MAX, shown_item(ids[i])));
      out.prompt_ids.push_back(id);
    }
  } else {
    return ApiError::validation(fmt::format("`prompt` must be a string or an array of token ids, got {}", p.type_name()));
  }
  if (out.prompt.empty() && out.prompt_ids.empty()) return ApiError::validation("`prompt` cannot be empty");
  RETURN_IF_API_ERROR(parse_common(b, limits, 16, out));
  std::int64_t lp = -1;
  RETURN_IF_API_ERROR(get_int(b, "logprobs", 0, 5, lp));
  out.logprobs = lp >= 0;
  out.top_logprobs = lp > 0 ? static_cast<int>(lp) : 0;
  RETURN_IF_API_ERROR(get_bool(b, "echo", out.echo));
  if (out.opts.max_new_tokens == 0 && !out.echo)
    return ApiError::validation("`max_tokens` must be at least 1 (0 only with `echo`: the prompt is scored, nothing generated)");
  std::int64_t best_of = 1;
  RETURN_IF_API_ERROR(get_int(b, "best_of", 1, 1 << 20, best_of));
  if (best_of != 1) return ApiError::validation("`best_of` must be 1");
  RETURN_IF_API_ERROR(reject_if_set(b, "suffix", "suffix (insertion) is not implemented"));
  return finish(out);
}

std::vector<std::string> unread_openai_fields(const json& b, bool chat) {
  // What parse_common reads (both routes), what only parse_completion_request or only
  // parse_chat_request reads, and what both let pass unread. A field of the other route is unread
  // here: `max_completion_tokens` on /v1/completions did not limit the completion.
  static const std::set<std::string, std::less<>> kCommon = {
      "add_special_tokens", "frequency_penalty", "function_call", "functions", "ignore_eos", "include_stop_str_in_output",
      "logit_bias", "max_tokens", "min_p", "min_tokens", "model", "n", "presence_penalty", "repetition_penalty",
      "response_format", "seed", "stop", "stop_token_ids", "stream", "stream_options", "temperature", "tool_choice", "tools",
      "top_k", "top_p", "truncate_prompt_tokens", "typical_p",
      "user", "store", "metadata", "service_tier", "parallel_tool_calls"};
  static const std::set<std::string, std::less<>> kCompletion = {"best_of", "echo", "logprobs", "prompt", "suffix"};
  static const std::set<std::string, std::less<>> kChat = {"add_generation_prompt", "chat_template_kwargs", "continue_final_message",
                                                           "logprobs", "max_completion_tokens", "messages", "top_logprobs"};
  const auto& own = chat ? kChat : kCompletion;
  std::vector<std::string> out;
  for (const auto& [key, value] : b.items())
    if (!kCommon.contains(key) && !own.contains(key)) out.push_back(key);
  return out;
}

std::optional<ApiError> parse_chat_request(const json& b, const RequestLimits& limits, OpenAiRequest& out,
                                           const ChatFormat* format) {
  out.chat = true;
  const ChatFormat& f = format_or_fixed(format);
  RETURN_IF_API_ERROR(read_chat_prompt(b, f, out.prompt));
  out.add_special_tokens = f.default_add_special_tokens();  // (parse_common reads a given one)
  const int default_max = 256;
  RETURN_IF_API_ERROR(parse_common(b, limits, default_max, out));
  std::int64_t mct = 0;
  if (b.contains("max_completion_tokens") && !b["max_completion_tokens"].is_null()) {
    RETURN_IF_API_ERROR(get_int(b, "max_completion_tokens", 1, std::numeric_limits<int>::max(), mct));  // as max_tokens
    out.opts.max_new_tokens = static_cast<int>(mct);
    out.max_tokens_given = true;
    out.max_tokens_field = "`max_completion_tokens`";
  }
  if (out.opts.max_new_tokens == 0) return ApiError::validation("`max_tokens` must be at least 1 for chat completions");
  RETURN_IF_API_ERROR(get_bool(b, "logprobs", out.logprobs));
  std::int64_t top = 0;
  RETURN_IF_API_ERROR(get_int(b, "top_logprobs", 0, 20, top));
  if (top > 0 && !out.logprobs) return ApiError::validation("`top_logprobs` requires `logprobs` = true");
  out.top_logprobs = static_cast<int>(top);
  for (std::string& stop : f.stop_strings()) out.opts.stop.push_back(std::move(stop));
  return finish(out);
}

std::optional<ApiError> parse_vllm_tokenize_request(const json& b, VllmTokenizeRequest& out, const ChatFormat* format) {
  const ChatFormat& f = format_or_fixed(format);
  bool present = false;
  std::string model;
  RETURN_IF_API_ERROR(get_string(b, "model", model, present));
  out.chat = b.contains("messages") && !b["messages"].is_null();
  if (out.chat) {
    if (b.contains("prompt") && !b["prompt"].is_null())
      return ApiError::validation("give `prompt` or `messages`, not both");
    // The chat route's refusals of tools (parse_common), whose ids /tokenize answers.
    RETURN_IF_API_ERROR(reject_if_set(b, "tools", "tool calling is not implemented"));
    RETURN_IF_API_ERROR(reject_if_set(b, "functions", "tool calling is not implemented"));
    RETURN_IF_API_ERROR(read_chat_prompt(b, f, out.text));
  } else {
    RETURN_IF_API_ERROR(get_string(b, "prompt", out.text, present));
    if (!present) return ApiError::validation("`prompt` (a string) or `messages` is required");
  }
  // For `messages`, the chat route's default (the ids /v1/chat/completions runs): false with a
  // chat template (vLLM's: templates write their own BOS), true for the fixed format (none written).
  out.add_special_tokens = out.chat ? f.default_add_special_tokens() : true;
  RETURN_IF_API_ERROR(get_bool(b, "add_special_tokens", out.add_special_tokens));
  RETURN_IF_API_ERROR(get_bool(b, "return_token_strs", out.return_token_strs));
  return std::nullopt;
}

std::optional<ApiError> parse_vllm_detokenize_request(const json& b, std::vector<std::int32_t>& tokens) {
  bool present = false;
  std::string model;
  RETURN_IF_API_ERROR(get_string(b, "model", model, present));
  auto it = b.find("tokens");
  if (it == b.end() || it->is_null()) return ApiError::validation("`tokens` is required (an array of token ids)");
  if (!it->is_array()) return ApiError::validation(fmt::format("`tokens` must be an array of token ids, got {}", it->type_name()));
  tokens.clear();
  tokens.reserve(it->size());
  for (std::size_t i = 0; i < it->size(); ++i) {
    std::int32_t id = 0;
    if (!token_id((*it)[i], id))
      return ApiError::validation(fmt::format("`tokens[{}]` must be a token id (an integer from 0 to {}), got {}", i, INT32_MAX, shown_item((*it)[i])));
    tokens.push_back(id);
  }
  return std::nullopt;
}

}  // namespace mamba::server
