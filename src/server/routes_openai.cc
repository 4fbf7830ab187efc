// OpenAI routes: /v1/completions, /v1/chat/completions (stream: chunks then `data: [DONE]`),
// /v1/models. Shapes as the OpenAI API reference (text_completion, chat.completion,
// chat.completion.chunk); finish_reason "stop" for EOS and stop strings, "length" at max_tokens.
#include <chrono>
#include <cmath>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "core/utf8.h"
#include "server/bounded_http_server.h"
#include "server/client_connection.h"
#include "server/json_fields.h"
#include "server/normalized_offsets.h"
#include "server/openai_request.h"
#include "server/routes.h"
#include "tokenizer/unicode.h"

namespace mamba::server {

// Responses keep their keys in insertion order (ordered_json), as OpenAI's: `id` first, and each
// completions `top_logprobs` dict from the most to the least likely token.
using json = nlohmann::ordered_json;

namespace {

const char* openai_finish(FinishReason r) {
  switch (r) {
    case FinishReason::kLength: return "length";
    case FinishReason::kEosToken:
    case FinishReason::kStopSequence: return "stop";
    default: return "stop";
  }
}

json lp_json(float lp) { return std::isfinite(lp) ? json(lp) : json(-9999.0); }

/// OpenAI's `bytes`: the token's own bytes (Tokenizer::token_bytes) as integers 0–255, so the
/// tokens of one character join into its UTF-8 (their `token` texts each show U+FFFD).
json bytes_json(const std::string& s) {
  json b = json::array();
  for (unsigned char ch : s) b.push_back(static_cast<int>(ch));
  return b;
}

/// A completions top_logprobs entry: token text → logprob, from the likeliest (`top` is descending),
/// then the chosen token (sampled, or the prompt's) when it is not among them — as OpenAI's legacy
/// API ("up to logprobs + 1 elements") and vLLM; with logprobs 0 only the chosen one. A text seen
/// before keeps the likelier value.
json top_dict(const ServerContext& ctx, const std::vector<std::pair<std::int32_t, float>>& top, std::int32_t chosen,
              float chosen_lp) {
  json m = json::object();
  for (const auto& [id, lp] : top) {
    std::string s = token_text(ctx, id);
    if (!m.contains(s)) m[s] = lp_json(lp);
  }
  if (std::string s = token_text(ctx, chosen); !m.contains(s)) m[s] = lp_json(chosen_lp);
  return m;
}

/// A completion's `logprobs` ({tokens, token_logprobs, top_logprobs, text_offset}) written as text
/// entry by entry (JsonArrayWriter): with echo the prompt's tokens first (add_prompt), then the
/// generated ones (add_tokens).
class CompletionLogprobs {
 public:
  /// The generated tokens; `offset`: where the next token's text starts in the answer's text, in
  /// characters (advanced past each token, held-back stop text included).
  void add_tokens(const ServerContext& ctx, const std::vector<TokenEvent>& toks, std::size_t& offset) {
    for (const auto& t : toks) {
      tokens_.push(t.token_text);
      lps_.push(lp_json(t.logprob));
      offs_.push(offset);
      offset += utf8_char_count(t.decoded_delta);
      tops_.push(top_dict(ctx, t.top, t.id, t.logprob));
    }
  }
  /// The prompt's tokens (echo): token i's logprob given the ones before (prompt_lps[i − 1]; null
  /// for the first), its text_offset where its text starts in `echoed` (the prompt as sent: decoded
  /// offsets mapped through NormalizedOffsets), its top_logprobs dict (prompt_tops[i − 1] and the
  /// prompt token itself; null for the first, as OpenAI's and vLLM's).
  void add_prompt(const ServerContext& ctx, const std::vector<std::int32_t>& prompt, std::string_view echoed,
                  const std::vector<float>& prompt_lps, const std::vector<std::vector<std::pair<std::int32_t, float>>>& prompt_tops) {
    // Token starts in the decoded (normalised) prompt, then mapped to characters of the echoed one.
    StreamDecoder dec(*ctx.tok, /*skip_special_tokens=*/false);
    std::string decoded;
    std::vector<std::size_t> starts;
    for (std::int32_t id : prompt) {
      starts.push_back(decoded.size());
      if (auto piece = dec.push(id); piece.ok()) decoded += *piece;
    }
    const NormalizedOffsets map(echoed, decoded);
    std::size_t byte = 0, chars = 0;  // chars of echoed[0, byte): starts map monotonically
    static const std::vector<std::pair<std::int32_t, float>> kNone;
    for (std::size_t i = 0; i < prompt.size(); ++i) {
      tokens_.push(token_text(ctx, prompt[i]));
      const bool scored = i > 0 && i - 1 < prompt_lps.size();
      lps_.push(scored ? lp_json(prompt_lps[i - 1]) : json(nullptr));
      tops_.push(scored ? top_dict(ctx, i - 1 < prompt_tops.size() ? prompt_tops[i - 1] : kNone, prompt[i], prompt_lps[i - 1]) : json(nullptr));
      const std::size_t to = std::max(byte, map.start(starts[i]));
      chars += utf8_char_count(echoed.substr(byte, to - byte));
      byte = to;
      offs_.push(chars);
    }
  }
  /// The object's text (its arrays appended in place, each freed as it goes); the builder is left empty.
  std::string take() {
    std::string out = tokens_.take();
    out += lps_.take();
    out += tops_.take();
    out += offs_.take();
    out += '}';
    return out;
  }

 private:
  JsonArrayWriter tokens_{R"({"tokens":)"}, lps_{R"(,"token_logprobs":)"}, tops_{R"(,"top_logprobs":)"}, offs_{R"(,"text_offset":)"};
};

/// The bytes of a generated token whose text (TokenEvent::token_text: token_bytes made valid UTF-8)
/// is `text`: that text itself unless it holds a U+FFFD (then part of a character, or a replacement
/// character of the vocabulary's own), which only token_bytes tells apart — so most tokens are
/// decoded once, not a second time for their bytes.
std::string generated_token_bytes(const ServerContext& ctx, std::int32_t id, const std::string& text) {
  return text.find("\xEF\xBF\xBD") == std::string::npos ? text : token_bytes(ctx, id);
}

/// A chat answer's `logprobs` ({content: [{token, logprob, bytes, top_logprobs}], refusal: null}) as text. Each
/// candidate is decoded once: its `token` is its bytes made valid UTF-8, as Tokenizer::token_text
/// makes them (which decodes them again).
std::string chat_logprobs(const ServerContext& ctx, const std::vector<TokenEvent>& toks) {
  JsonArrayWriter content(R"({"content":)");
  for (const auto& t : toks) {
    json tl = json::array();
    for (const auto& [id, lp] : t.top) {
      const std::string bytes = token_bytes(ctx, id);
      tl.push_back(json{{"token", tok::utf8_lossy(bytes)}, {"logprob", lp_json(lp)}, {"bytes", bytes_json(bytes)}});
    }
    content.push(json{{"token", t.token_text},
                      {"logprob", lp_json(t.logprob)},
                      {"bytes", bytes_json(generated_token_bytes(ctx, t.id, t.token_text))},
                      {"top_logprobs", std::move(tl)}});
  }
  std::string out = content.take();
  out += R"(,"refusal":null})";  // OpenAI's type has it (null: this server never refuses)
  return out;
}

/// `usage` of an answer with these choices: the prompt counted once (OpenAI, vLLM), the completion
/// tokens of every choice; `prompt_tokens_details.cached_tokens` (OpenAI's, vLLM's): the prompt's
/// tokens taken from the prefix cache (the choice that prefilled it; the others copied its state).
json usage_json(const std::vector<SequenceStats>& choices) {
  const int prompt = choices.empty() ? 0 : choices[0].prompt_tokens;
  int completion = 0, cached = 0;
  for (const SequenceStats& st : choices) {
    completion += st.generated_tokens;
    cached = std::max(cached, st.cached_tokens);
  }
  return json{{"prompt_tokens", prompt},
              {"completion_tokens", completion},
              {"total_tokens", prompt + completion},
              {"prompt_tokens_details", json{{"cached_tokens", cached}}}};
}

void handle(ServerContext& ctx, const httplib::Request& req, httplib::Response& res, bool chat) {
  BodyBudget::Lease parsing = ctx.body_budget.acquire(req.body.size());  // until the prompt's ids are made
  nlohmann::json body;
  if (auto e = parse_body_object(req.body, body)) return send_error(req, res, *e, ctx.metrics);
  auto r = std::make_shared<OpenAiRequest>();
  if (auto e = chat ? parse_chat_request(body, ctx.limits, *r, &ctx.chat_format) : parse_completion_request(body, ctx.limits, *r)) {
    return send_error(req, res, *e, ctx.metrics);
  }
  // Fields the server does not read are ignored, as vLLM ignores them, and logged, as vLLM logs them
  // (a typo such as max_tokenz otherwise passes unseen).
  if (const auto unread = unread_openai_fields(body, chat); !unread.empty()) {
    std::string names;
    for (std::size_t i = 0; i < unread.size() && i < 10; ++i) names += fmt::format("{}{:?}", i ? ", " : "", shown_text(unread[i], 64));
    spdlog::warn("{} client={}: ignored {} field{} the server does not read: {}{}", req.path, req.remote_addr, unread.size(),
                 unread.size() == 1 ? "" : "s", names, unread.size() > 10 ? ", …" : "");
  }
  drop_body_dom(body);
  r->opts.skip_special_tokens = true;
  SequenceRequest sreq;
  const PromptFields fields{r->chat ? "`messages`" : "`prompt`", r->max_tokens_field};
  if (auto e = prepare_prompt(ctx, r->prompt, r->add_special_tokens, r->prompt_ids, 0, r->opts.max_new_tokens, r->max_tokens_given, fields, sreq.prompt)) {
    return send_error(req, res, *e, ctx.metrics);
  }
  const std::int64_t vocab = vocab_limit(ctx.tok.get(), *ctx.model);
  for (const auto& [id, bias] : r->opts.sampling.logit_bias)
    if (id >= vocab)
      return send_error(req, res, ApiError::validation(fmt::format("`logit_bias` token id {} is outside the vocabulary [0, {})", id, vocab)), ctx.metrics);
  if (r->echo && r->prompt.empty()) {
    auto d = ctx.tok->decode(sreq.prompt, false);
    if (d.ok()) r->prompt = d.value();
  }
  sreq.opts = r->opts;
  r->opts.stop = {};  // one copy of the stop strings (up to 8 MiB) goes with the request
  // Completions with echo and logprobs also give the prompt's tokens (OpenAI's legacy API): their
  // logprobs come from the prefill (the first is null); a stream sends them in its echo chunk.
  const bool echo_logprobs = !chat && r->echo && r->logprobs;
  if (echo_logprobs) sreq.opts.prompt_logprobs = sreq.prompt_top_logprobs = true;
  sreq.publish_prompt_scores = echo_logprobs && r->stream;
  const std::vector<std::int32_t> prompt_ids = echo_logprobs ? sreq.prompt : std::vector<std::int32_t>{};
  parsing.release();
  // `n` choices: n sequences of the prompt, each in its own state slot and counted as a request
  // (in-flight limit, /metrics). With a seed, choice i samples with seed + i: each choice is
  // reproducible alone (n = 1 with seed + i gives choice i) and the choices differ from each other.
  // (n ≤ --max-concurrent-requests: the parser's check, ctx.limits.max_choices.)
  if (r->n > 1) sreq.prompt_group = ctx.next_prompt_group++;  // the prompt prefilled once for all (scheduler.h)
  std::vector<SequenceRequest> choice_reqs;
  for (int i = 0; i < r->n; ++i) {
    choice_reqs.push_back(i + 1 < r->n ? sreq : std::move(sreq));
    if (choice_reqs.back().opts.sampling.has_seed) choice_reqs.back().opts.sampling.seed += static_cast<std::uint64_t>(i);  // wraps
  }
  std::vector<std::shared_ptr<RequestStream>> streams;
  if (auto e = submit_all(ctx, std::move(choice_reqs), streams)) return send_error(req, res, *e, ctx.metrics);  // all or none
  const std::uint64_t id = ctx.next_request_id++;
  const char* route = chat ? "/v1/chat/completions" : "/v1/completions";
  const std::string oid = fmt::format("{}-{}-{}", chat ? "chatcmpl" : "cmpl", ctx.instance, id);
  // On the answer's head (a stream's too), and on its error if the generation fails: the client's
  // valid x-request-id, else the body's id (the client's never goes into the body).
  set_request_id_header(req, res, oid);
  const std::string client_rid = client_request_id(req);
  const std::int64_t created = std::chrono::duration_cast<std::chrono::seconds>(
                                   std::chrono::system_clock::now().time_since_epoch()).count();
  // The served model's id whatever the request named (one model per server; TGI takes any name and
  // answers with its own, vLLM refuses others — an answer never names a model that did not run).
  const std::string model = ctx.opts.model_id;
  const std::string echo_prefix = (!chat && r->echo) ? r->prompt : std::string();

  if (r->stream) {
    // Per choice: its text_offset, and whether its first chunk (chat: the role's) is still to come.
    auto offset = std::make_shared<std::vector<std::size_t>>(streams.size(), utf8_char_count(echo_prefix));
    auto first = std::make_shared<std::vector<char>>(streams.size(), 1);
    const char* object = chat ? "chat.completion.chunk" : "text_completion";
    // One chunk: `choice` with `logprobs` (JSON text) added.
    auto chunk = [r, oid, created, model, object](const json& choice, const std::string& logprobs = "null") {
      json c{{"id", oid}, {"object", object}, {"created", created}, {"model", model}, {"choices", nullptr}};
      if (r->include_usage) c["usage"] = nullptr;  // OpenAI: every chunk but the usage one has "usage": null
      return sse_data(dump_with_member(c, "choices", fmt::format("[{}]", dump_with_member(choice, "logprobs", logprobs))));
    };
    SseHandlers h;
    if (echo_logprobs) {  // the echo chunk with the prompt's logprobs, once its prefill is done
      h.on_prompt = [&ctx, first, chunk, echo_prefix, prompt_ids](std::size_t choice, const RequestStream::PromptScores& ps) {
        (*first)[choice] = 0;
        CompletionLogprobs lp;
        lp.add_prompt(ctx, prompt_ids, echo_prefix, ps.logprobs, ps.top);
        return chunk(json{{"index", choice}, {"text", echo_prefix}, {"logprobs", nullptr}, {"finish_reason", nullptr}}, lp.take());
      };
    }
    h.on_tokens = [&ctx, r, chunk, chat, offset, first, echo_prefix](std::size_t choice, const std::vector<TokenEvent>& toks,
                                                                     bool done, const SequenceStats& st) {
      std::string out;
      if ((*first)[choice]) {
        (*first)[choice] = 0;
        if (chat) {
          out += chunk(json{{"index", choice}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}});
        } else if (!echo_prefix.empty()) {
          out += chunk(json{{"index", choice}, {"text", echo_prefix}, {"logprobs", nullptr}, {"finish_reason", nullptr}});
        }
      }
      for (std::size_t i = 0; i < toks.size(); ++i) {
        const TokenEvent& t = toks[i];
        const bool last = done && i + 1 == toks.size();
        // A token that released no text yet (a held-back stop prefix, part of a UTF-8 character)
        // has nothing to say without logprobs: no empty chunk (OpenAI sends none).
        if (!last && t.text_delta.empty() && !r->logprobs) continue;
        json c{{"index", choice}};
        std::string logprobs = "null";
        const std::vector<TokenEvent> one{t};
        if (chat) {
          c["delta"] = json{{"content", t.text_delta}};
          if (r->logprobs) logprobs = chat_logprobs(ctx, one);
        } else {
          c["text"] = t.text_delta;
          if (r->logprobs) {
            CompletionLogprobs lp;
            lp.add_tokens(ctx, one, (*offset)[choice]);  // advances the offset
            logprobs = lp.take();
          }
        }
        c["logprobs"] = nullptr;  // its place: chunk() puts the text there
        c["finish_reason"] = last ? json(openai_finish(st.finish)) : json(nullptr);
        out += chunk(c, logprobs);
      }
      if (done && toks.empty()) {  // max_tokens 0 with echo: no token, the end still says why
        out += chunk(json{{"index", choice}, {"text", ""}, {"logprobs", nullptr}, {"finish_reason", openai_finish(st.finish)}});
      }
      return out;
    };
    if (r->include_usage) {  // after every choice's last chunk
      h.on_all_done = [object, oid, created, model](const std::vector<SequenceStats>& st) {
        return sse_data(dump_json(json{{"id", oid}, {"object", object}, {"created", created}, {"model", model},
                                       {"choices", json::array()}, {"usage", usage_json(st)}}));
      };
    }
    h.on_error = [](const ApiError& e) { return sse_data(e.openai_body()); };
    h.on_end = [] { return std::string("data: [DONE]\n\n"); };
    h.on_close = [id, route, client = req.remote_addr, client_rid](const SequenceStats& st, const std::optional<Error>& err) {
      log_request(id, route, client, client_rid, st, err);
    };
    set_sse_response(req, res, std::move(streams), std::move(h));
    return;
  }

  const ClientConnection conn(BoundedHttpServer::current_socket());  // a client that leaves cancels the sequences, as a stream's does
  std::vector<RequestStream*> raw;
  for (auto& st : streams) raw.push_back(st.get());
  std::vector<Collected> cs = collect_all(raw, [&conn] { return conn.closed(); });
  streams.clear();
  std::vector<SequenceStats> stats;
  for (const Collected& c : cs) {
    log_request(id, route, req.remote_addr, client_rid, c.stats, c.error);
    stats.push_back(c.stats);
  }
  if (const auto e = answer_error(cs)) return send_error(req, res, *e, ctx.metrics);
  const json out{{"id", oid},
                 {"object", chat ? "chat.completion" : "text_completion"},
                 {"created", created},
                 {"model", model},
                 {"choices", nullptr},
                 {"usage", usage_json(stats)}};
  res.set_header("x-prompt-tokens", std::to_string(stats[0].prompt_tokens));
  res.set_header("x-generated-tokens", std::to_string(out["usage"]["completion_tokens"].get<int>()));
  // Each choice as text around its logprobs, which are written entry by entry (a DOM of a long
  // answer's logprobs took ~12 times the answer's size) and never copied into an intermediate.
  std::string choices = "[";
  for (std::size_t i = 0; i < cs.size(); ++i) {
    Collected& c = cs[i];
    json choice{{"index", i}};
    std::string logprobs = "null";
    if (chat) {
      // `refusal` as OpenAI's ChatCompletionMessage (a required, nullable field): null, as vLLM.
      choice["message"] = json{{"role", "assistant"}, {"content", c.text}, {"refusal", nullptr}};
      if (r->logprobs) logprobs = chat_logprobs(ctx, c.tokens);
    } else {
      choice["text"] = echo_prefix + c.text;
      if (r->logprobs) {
        CompletionLogprobs lp;
        if (echo_logprobs) lp.add_prompt(ctx, prompt_ids, echo_prefix, c.stats.prompt_logprobs, c.stats.prompt_top_logprobs);
        std::size_t offset = utf8_char_count(echo_prefix);
        lp.add_tokens(ctx, c.tokens, offset);
        logprobs = lp.take();
      }
    }
    choice["logprobs"] = nullptr;  // its place: the text goes there
    choice["finish_reason"] = openai_finish(c.stats.finish);
    c = Collected();  // the tokens' copies, before the choice's text is made
    const auto [choice_before, choice_after] = dump_around_member(choice, "logprobs");
    if (i > 0) choices += ',';
    choices.append(choice_before).append(logprobs).append(choice_after);
  }
  choices += ']';
  const auto [outer_before, outer_after] = dump_around_member(out, "choices");
  std::string answer;
  answer.reserve(outer_before.size() + choices.size() + outer_after.size());
  answer.append(outer_before).append(choices);
  choices = std::string();
  answer.append(outer_after);
  set_json_body(res, std::move(answer));
}

}  // namespace

void register_openai_routes(httplib::Server& svr, ServerContext& ctx) {
  ctx.routes.add(svr, "POST", "/v1/completions", [&ctx](const httplib::Request& q, httplib::Response& s) { handle(ctx, q, s, false); });
  ctx.routes.add(svr, "POST", "/v1/chat/completions", [&ctx](const httplib::Request& q, httplib::Response& s) { handle(ctx, q, s, true); });
  const auto model_object = [&ctx] {
    return json{{"id", ctx.opts.model_id}, {"object", "model"}, {"created", ctx.created_unix}, {"owned_by", "mamba.cpp"}};
  };
  ctx.routes.add(svr, "GET", "/v1/models", [model_object](const httplib::Request&, httplib::Response& s) {
    s.set_content(dump_json(json{{"object", "list"}, {"data", json::array({model_object()})}}), "application/json");
  });
  // The OpenAI SDK's models.retrieve(id): the served model by its id (another id: the 404 of an unknown route).
  ctx.routes.add(svr, "GET", "/v1/models/" + ctx.opts.model_id, [model_object](const httplib::Request&, httplib::Response& s) {
    s.set_content(dump_json(model_object()), "application/json");
  });
}

}  // namespace mamba::server
