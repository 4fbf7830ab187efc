// POST /tokenize in TGI's shape and in vLLM's, and vLLM's POST /detokenize:
//   TGI  (router/src/server.rs tokenize): {"inputs": str, "parameters": {...}} → [{id, text, start, stop}]
//   vLLM (entrypoints/openai/protocol.py TokenizeCompletionRequest / TokenizeChatRequest):
//        {"prompt": str | "messages": [...], "add_special_tokens", "return_token_strs"}
//        → {count, max_model_len, tokens, token_strs?};  /detokenize {"tokens": [ids]} → {prompt}
// One path takes both tokenize shapes: a body with `inputs` is TGI's, one with `prompt` or
// `messages` (and no `inputs`) is vLLM's.
#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "mamba/tokenizer.h"
#include "server/json_fields.h"
#include "server/normalized_offsets.h"
#include "server/openai_request.h"
#include "server/routes.h"

namespace mamba::server {

namespace {

using json = nlohmann::ordered_json;  // answers keep vLLM's and TGI's key order

/// TGI's shape: `inputs` → [{id, text, start, stop}].
void tokenize_tgi(ServerContext& ctx, const nlohmann::json& body, const httplib::Request& req, httplib::Response& res) {
  TgiRequest r;
  if (auto e = parse_tgi_request(body, ctx.limits, r)) return send_error(req, res, *e, ctx.metrics);
  // The ids /generate would run: with the post-processor's specials (a BOS) unless the request
  // says `add_special_tokens: false`. Those added ids are not in the text: span [0, 0), as HF's
  // offsets give them.
  auto plain = ctx.tok->encode(r.inputs, false);
  if (!plain.ok()) return send_error(req, res, ApiError::validation(plain.error().message), ctx.metrics);
  std::size_t text0 = 0;  // where the text's ids start among `ids`
  const std::vector<std::int32_t> ids = r.add_special_tokens ? ctx.tok->add_special_tokens(*plain, &text0) : *plain;
  // `parameters.truncate` keeps the last tokens, as for a prompt (TGI's /tokenize truncates too).
  const auto all = static_cast<std::int64_t>(ids.size());
  const std::int64_t first = r.truncate > 0 && all > r.truncate ? all - r.truncate : 0;
  // The same bound as a prompt's: the answer is ~50 bytes of JSON per token (a 7 MiB input made a
  // 380 MB answer and 5 GB of peak memory).
  if (const std::int64_t n = all - first; n > ctx.limits.max_input_tokens) {
    return send_error(req, res,
                      ApiError::validation(fmt::format("`inputs` must have at most {} tokens (--max-input-tokens). Given: {}",
                                                       ctx.limits.max_input_tokens, n)),
                      ctx.metrics);
  }
  json arr = json::array();
  // Byte offsets into the input: a StreamDecoder releases text only at whole UTF-8 characters, so
  // a character split over several byte tokens is attributed to the token that completes it and
  // the earlier pieces get empty spans (offsets never run past the input). The pieces are the
  // normalised text; NormalizedOffsets maps them back to the input (NFC changed it: e + U+0301).
  const std::size_t n_text = text0 < ids.size() ? plain->size() : 0;
  StreamDecoder stream(*ctx.tok);
  std::string decoded;
  std::vector<std::size_t> ends(n_text);
  for (std::size_t i = 0; i < n_text; ++i) {
    auto piece = stream.push((*plain)[i]);
    if (piece.ok()) decoded += piece.value();
    ends[i] = decoded.size();
  }
  const NormalizedOffsets map(r.inputs, decoded);
  for (std::int64_t i = first; i < all; ++i) {  // offsets stay those of the whole input
    const std::int32_t id = ids[static_cast<std::size_t>(i)];
    std::size_t start = 0, stop = 0;
    if (static_cast<std::size_t>(i) >= text0 && static_cast<std::size_t>(i) < text0 + n_text) {
      const std::size_t j = static_cast<std::size_t>(i) - text0;
      const std::size_t b = j == 0 ? 0 : ends[j - 1], e = ends[j];
      start = map.start(b);
      stop = std::max(start, map.stop(e));
    }
    arr.push_back(json{{"id", id}, {"text", token_text(ctx, id)}, {"start", start}, {"stop", stop}});
  }
  set_json_body(res, dump_json(arr));  // a large answer is followed by a heap trim (its DOM is ~10× its text)
}

/// vLLM's shape: the ids /v1/completions (or, for `messages`, /v1/chat/completions) would run.
void tokenize_vllm(ServerContext& ctx, const nlohmann::json& body, const httplib::Request& req, httplib::Response& res) {
  VllmTokenizeRequest r;
  if (auto e = parse_vllm_tokenize_request(body, r, &ctx.chat_format)) return send_error(req, res, *e, ctx.metrics);
  auto ids = ctx.tok->encode(r.text, r.add_special_tokens);
  if (!ids.ok()) return send_error(req, res, ApiError::validation(ids.error().message), ctx.metrics);
  const char* field = r.chat ? "`messages`" : "`prompt`";
  if (const auto n = static_cast<std::int64_t>(ids->size()); n > ctx.limits.max_input_tokens) {  // as TGI's shape: ~10 bytes of answer per id
    return send_error(req, res,
                      ApiError::validation(fmt::format("{} must have at most {} tokens (--max-input-tokens). Given: {}", field,
                                                       ctx.limits.max_input_tokens, n)),
                      ctx.metrics);
  }
  json out{{"count", ids->size()}, {"max_model_len", ctx.limits.max_total_tokens}, {"tokens", *ids}};
  if (r.return_token_strs) {
    json strs = json::array();
    for (const std::int32_t id : *ids) strs.push_back(ctx.tok->id_to_token(id).value_or(std::string()));
    out["token_strs"] = std::move(strs);
  }
  set_json_body(res, dump_json(out));
}

void handle_tokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const BodyBudget::Lease parsing = ctx.body_budget.acquire(req.body.size());  // the whole answer is made under it
  nlohmann::json body;
  if (auto e = parse_body_object(req.body, body)) return send_error(req, res, *e, ctx.metrics);
  // (A null `prompt` or `messages` is still vLLM's shape: its error names that field, not `inputs`.)
  const auto given = [&](const char* key) { return body.contains(key) && !body[key].is_null(); };
  const bool inputs = given("inputs");
  if (inputs && (given("prompt") || given("messages")))  // two texts: tokenizing one would silently drop the other
    return send_error(req, res,
                      ApiError::validation(fmt::format("give either `inputs` (TGI's /tokenize) or `{}` (vLLM's), not both",
                                                       given("prompt") ? "prompt" : "messages")),
                      ctx.metrics);
  if (!inputs && (body.contains("prompt") || body.contains("messages"))) return tokenize_vllm(ctx, body, req, res);
  tokenize_tgi(ctx, body, req, res);
}

void handle_detokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const BodyBudget::Lease parsing = ctx.body_budget.acquire(req.body.size());
  nlohmann::json body;
  if (auto e = parse_body_object(req.body, body)) return send_error(req, res, *e, ctx.metrics);
  std::vector<std::int32_t> ids;
  if (auto e = parse_vllm_detokenize_request(body, ids)) return send_error(req, res, *e, ctx.metrics);
  const std::int64_t vocab = ctx.tok->size();
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= vocab)
      return send_error(req, res, ApiError::validation(fmt::format("`tokens[{}]` = {} is outside the vocabulary [0, {})", i, ids[i], vocab)),
                        ctx.metrics);
  // As vLLM's: tokenizer.decode(tokens), the special tokens' text kept.
  auto text = ctx.tok->decode(ids, /*skip_special_tokens=*/false);
  if (!text.ok()) return send_error(req, res, ApiError::validation(text.error().message), ctx.metrics);
  set_json_body(res, dump_json(json{{"prompt", *text}}));
}

}  // namespace

void register_tokenize_routes(httplib::Server& svr, ServerContext& ctx) {
  ctx.routes.add(svr, "POST", "/tokenize", [&ctx](const httplib::Request& q, httplib::Response& s) { handle_tokenize(ctx, q, s); });
  ctx.routes.add(svr, "POST", "/detokenize", [&ctx](const httplib::Request& q, httplib::Response& s) { handle_detokenize(ctx, q, s); });
}

}  // namespace mamba::server
