// TGI routes, JSON shapes as text-generation-inference (router/src/lib.rs, server.rs):
// GenerateResponse {generated_text, details{finish_reason, generated_tokens, seed, prefill[],
// tokens[], top_tokens[]}}, StreamResponse {index, token, top_tokens, generated_text, details}.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/utf8.h"
#include "server/bounded_http_server.h"
#include "server/client_connection.h"
#include "server/json_fields.h"
#include "server/routes.h"

namespace mamba::server {

// Answers keep their keys in insertion order (ordered_json), TGI's struct order: a token is
// {id, text, logprob, special}, a stream event {index, token, top_tokens, generated_text, details}
// (nlohmann::json sorted them: {id, logprob, special, text}). Request bodies stay nlohmann::json.
using json = nlohmann::ordered_json;

namespace {

enum class TgiMode { kGenerate, kStream, kCompat };

json logprob_json(float lp) { return std::isfinite(lp) ? json(lp) : json(nullptr); }

json token_json(const TokenEvent& t, const std::string& text) {
  return json{{"id", t.id}, {"text", text}, {"logprob", logprob_json(t.logprob)}, {"special", t.special}};
}

json top_tokens_json(const ServerContext& ctx, const TokenEvent& t) {
  json arr = json::array();
  for (const auto& [id, lp] : t.top) {
    arr.push_back(json{{"id", id}, {"text", token_text(ctx, id)}, {"logprob", logprob_json(lp)},
                       {"special", ctx.tok->is_special(id)}});
  }
  return arr;
}

json seed_json(const TgiRequest& r, const SequenceStats& st) {
  return r.opts.sampling.sampling() ? json(st.seed) : json(nullptr);
}

void set_timing_headers(httplib::Response& res, const SequenceStats& st, std::size_t chars) {
  const double inference_ms = st.prefill_ms + st.decode_ms;
  res.set_header("x-compute-type", "cpu");
  res.set_header("x-compute-time", fmt::format("{:.6f}", st.total_ms / 1000.0));
  res.set_header("x-compute-characters", std::to_string(chars));
  res.set_header("x-total-time", fmt::format("{:.0f}", st.total_ms));
  res.set_header("x-validation-time", "0");
  res.set_header("x-queue-time", fmt::format("{:.0f}", st.queue_ms));
  res.set_header("x-inference-time", fmt::format("{:.0f}", inference_ms));
  res.set_header("x-time-per-token",
                 fmt::format("{:.0f}", st.generated_tokens > 0 ? inference_ms / st.generated_tokens : 0.0));
  res.set_header("x-prompt-tokens", std::to_string(st.prompt_tokens));
  res.set_header("x-generated-tokens", std::to_string(st.generated_tokens));
}

/// The JSON text of one sequence's details, TGI's Details {finish_reason, generated_tokens, seed,
/// prefill, tokens, best_of_sequences (when `best_of_sequences` is not empty: that JSON array's
/// text), top_tokens (with top_n_tokens)}; with `generated_text` (not null) its BestOfSequence
/// instead: that text first, no best_of_sequences. The per-token arrays are written entry by entry
/// (a DOM of a long answer's details took ~11 times the answer's size).
std::string details_json(const ServerContext& ctx, const TgiRequest& r, const std::vector<std::int32_t>& prompt_ids, const Collected& c,
                         const std::string* generated_text, std::string best_of_sequences = {}) {
  JsonArrayWriter prefill, tokens, top;
  if (r.decoder_input_details) {
    for (std::size_t i = 0; i < prompt_ids.size(); ++i) {
      const std::int32_t pid = prompt_ids[i];
      json lp = i == 0 || i - 1 >= c.stats.prompt_logprobs.size() ? json(nullptr) : logprob_json(c.stats.prompt_logprobs[i - 1]);
      prefill.push_raw(dump_json(json{{"id", pid}, {"text", token_text(ctx, pid)}, {"logprob", lp}}));
    }
  }
  for (const auto& t : c.tokens) {
    tokens.push_raw(dump_json(token_json(t, t.token_text)));
    if (r.opts.top_logprobs > 0) top.push_raw(dump_json(top_tokens_json(ctx, t)));
  }
  nlohmann::ordered_json d;
  if (generated_text != nullptr) d["generated_text"] = *generated_text;
  d["finish_reason"] = finish_reason_name(c.stats.finish);
  d["generated_tokens"] = c.stats.generated_tokens;
  d["seed"] = seed_json(r, c.stats);
  d["prefill"] = nullptr;  // places, for the arrays' text
  d["tokens"] = nullptr;
  const std::string prefill_text = prefill.take(), tokens_text = tokens.take(), top_text = top.take();
  std::vector<std::pair<std::string_view, std::string_view>> raw{{"prefill", prefill_text}, {"tokens", tokens_text}};
  if (!best_of_sequences.empty()) raw.emplace_back("best_of_sequences", best_of_sequences);
  if (r.opts.top_logprobs > 0) raw.emplace_back("top_tokens", top_text);
  return dump_with_members(d, raw);
}

/// The sum of the generated tokens' logprobs (TGI's measure for best_of); a token without a
/// finite one makes it −inf.
double sequence_logprob(const Collected& c) {
  double sum = 0.0;
  for (const auto& t : c.tokens) sum += std::isfinite(t.logprob) ? t.logprob : -std::numeric_limits<double>::infinity();
  return sum;
}

void handle_generate(ServerContext& ctx, const httplib::Request& req, httplib::Response& res, TgiMode mode) {
  BodyBudget::Lease parsing = ctx.body_budget.acquire(req.body.size());  // until the prompt's ids are made
  nlohmann::json body;
  if (auto e = parse_body_object(req.body, body)) return send_error(req, res, *e, ctx.metrics);
  auto r = std::make_shared<TgiRequest>();
  if (auto e = parse_tgi_request(body, ctx.limits, *r)) return send_error(req, res, *e, ctx.metrics);
  drop_body_dom(body);
  const bool stream = mode == TgiMode::kStream || (mode == TgiMode::kCompat && r->stream);
  if (stream && r->decoder_input_details)  // as TGI: the prompt's details have no place in a stream
    return send_error(req, res, ApiError::validation("`decoder_input_details` == true is not supported when streaming tokens"), ctx.metrics);
  if (stream && r->best_of > 1)  // as TGI: one answer is picked after all end
    return send_error(req, res, ApiError::validation("`best_of` != 1 is not supported when streaming tokens"), ctx.metrics);
  r->opts.skip_special_tokens = true;
  SequenceRequest sreq;
  if (auto e = prepare_prompt(ctx, r->inputs, r->add_special_tokens, {}, r->truncate, r->opts.max_new_tokens, r->max_new_tokens_given, kTgiFields,
                              sreq.prompt)) {
    return send_error(req, res, *e, ctx.metrics);
  }
  auto prompt_ids = std::make_shared<std::vector<std::int32_t>>(sreq.prompt);
  sreq.opts = r->opts;
  r->opts.stop = {};  // one copy of the stop strings (up to 8 MiB) goes with the request
  parsing.release();
  // best_of: that many sequences of the prompt (prefilled once: the scheduler's prompt group), each
  // in its own state slot, counted as a request and sampling with its own random seed (a seed is
  // refused with best_of).
  std::vector<std::shared_ptr<RequestStream>> streams;
  if (r->best_of > 1) {
    sreq.prompt_group = ctx.next_prompt_group++;
    std::vector<SequenceRequest> reqs(static_cast<std::size_t>(r->best_of - 1), sreq);
    reqs.push_back(std::move(sreq));
    if (auto e = submit_all(ctx, std::move(reqs), streams)) return send_error(req, res, *e, ctx.metrics);  // all or none
  } else {
    streams.emplace_back();
    if (auto e = submit(ctx, std::move(sreq), streams[0])) return send_error(req, res, *e, ctx.metrics);
  }
  const std::uint64_t id = ctx.next_request_id++;
  const char* route = mode == TgiMode::kGenerate ? "/generate" : (mode == TgiMode::kStream ? "/generate_stream" : "/");
  // x-request-id: the client's valid one, else "req-<instance>-<id>" (the log's req=<id>; TGI's
  // answers have no id of their own), on the answer's head (a stream's too) and its errors.
  set_request_id_header(req, res, fmt::format("req-{}-{}", ctx.instance, id));
  const std::string client_rid = client_request_id(req);
  const std::string prefix = r->return_full_text ? r->inputs : std::string();

  if (stream) {
    struct StreamState {
      std::string text;
      int index = 0;
    };
    auto state = std::make_shared<StreamState>();
    state->text = prefix;
    SseHandlers h;
    h.on_tokens = [&ctx, r, state](std::size_t /*choice: one*/, const std::vector<TokenEvent>& toks, bool done,
                                   const SequenceStats& st) {
      std::string out;
      for (std::size_t i = 0; i < toks.size(); ++i) {
        const TokenEvent& t = toks[i];
        state->text += t.text_delta;
        const bool last = done && i + 1 == toks.size();
        // A special token (EOS) carries its own text, as in /generate's details and in TGI; the
        // generated text leaves it out.
        json ev{{"index", ++state->index}, {"token", token_json(t, t.special ? t.token_text : t.text_delta)}};
        if (r->opts.top_logprobs > 0) ev["top_tokens"] = top_tokens_json(ctx, t);
        ev["generated_text"] = last ? json(state->text) : json(nullptr);
        if (last && r->details) {
          ev["details"] = json{{"finish_reason", finish_reason_name(st.finish)},
                               {"generated_tokens", st.generated_tokens},
                               {"seed", seed_json(*r, st)},
                               {"input_length", st.prompt_tokens}};
        } else {
          ev["details"] = nullptr;
        }
        out += sse_data(dump_json(ev));
      }
      return out;
    };
    h.on_error = [](const ApiError& e) { return sse_data(e.tgi_body()); };
    h.on_close = [id, route, client = req.remote_addr, client_rid](const SequenceStats& st, const std::optional<Error>& err) {
      log_request(id, route, client, client_rid, st, err);
    };
    res.set_header("x-compute-type", "cpu");
    set_sse_response(req, res, std::move(streams), std::move(h));
    return;
  }

  const ClientConnection conn(BoundedHttpServer::current_socket());  // a client that leaves cancels the sequences, as a stream's does
  std::vector<RequestStream*> raw;
  for (auto& st : streams) raw.push_back(st.get());
  std::vector<Collected> cs = collect_all(raw, [&conn] { return conn.closed(); });
  streams.clear();
  for (const Collected& c : cs) log_request(id, route, req.remote_addr, client_rid, c.stats, c.error);
  if (const auto e = answer_error(cs)) return send_error(req, res, *e, ctx.metrics);
  // best_of: the sequence whose tokens' logprobs sum highest (the first of equals), as TGI's
  // generate_best_of; the others go to details.best_of_sequences.
  std::size_t best = 0;
  for (std::size_t i = 1; i < cs.size(); ++i)
    if (sequence_logprob(cs[i]) > sequence_logprob(cs[best])) best = i;
  Collected& c = cs[best];
  const nlohmann::ordered_json out{{"generated_text", prefix + c.text}};  // "details" only when asked, as TGI
  std::string details;
  if (r->details) {
    JsonArrayWriter others;
    for (std::size_t i = 0; i < cs.size(); ++i)
      if (i != best) {
        const std::string text = prefix + cs[i].text;
        others.push_raw(details_json(ctx, *r, *prompt_ids, cs[i], &text));
      }
    details = details_json(ctx, *r, *prompt_ids, c, nullptr, cs.size() > 1 ? others.take() : std::string());
  }
  // TGI's x-compute-characters counts characters (Rust's chars()), not bytes: the body is valid UTF-8.
  const std::size_t chars = utf8_char_count(r->inputs);
  set_timing_headers(res, c.stats, chars);
  cs.clear();  // the tokens' copies, before the answer's text is made
  std::string answer = r->details ? dump_with_member(out, "details", details) : dump_json(out);
  details = std::string();
  if (mode == TgiMode::kCompat) answer = fmt::format("[{}]", answer);
  set_json_body(res, std::move(answer));
}

}  // namespace

void register_tgi_routes(httplib::Server& svr, ServerContext& ctx) {
  ctx.routes.add(svr, "POST", "/generate", [&ctx](const httplib::Request& q, httplib::Response& s) { handle_generate(ctx, q, s, TgiMode::kGenerate); });
  ctx.routes.add(svr, "POST", "/generate_stream", [&ctx](const httplib::Request& q, httplib::Response& s) { handle_generate(ctx, q, s, TgiMode::kStream); });
  ctx.routes.add(svr, "POST", "/", [&ctx](const httplib::Request& q, httplib::Response& s) { handle_generate(ctx, q, s, TgiMode::kCompat); });
  // /health (TGI's) and /ping (vLLM's, GET or POST, as SageMaker probes it): 200, 503 while draining.
  const auto health = [&ctx](const httplib::Request&, httplib::Response& s) {
    if (ctx.draining.load()) {
      s.status = 503;
      s.set_content(ApiError{503, "unavailable", "shutting down"}.tgi_body(), "application/json");
    } else {
      s.status = 200;
    }
  };
  ctx.routes.add(svr, "GET", "/health", health);
  ctx.routes.add(svr, "GET", "/ping", health);
  ctx.routes.add(svr, "POST", "/ping", health);
  ctx.routes.add(svr, "GET", "/version", [](const httplib::Request&, httplib::Response& s) {  // vLLM's
    set_json_body(s, json{{"version", MAMBA_VERSION}}.dump());
  });
  ctx.routes.add(svr, "GET", "/metrics", [&ctx](const httplib::Request&, httplib::Response& s) {
    if (ctx.http != nullptr) {
      ctx.metrics.http_connections_parked = static_cast<std::int64_t>(ctx.http->parked_connections());
      ctx.metrics.http_read_ahead_bytes = static_cast<std::int64_t>(ctx.http->read_ahead_bytes());
    }
    s.set_content(ctx.metrics.render(), "text/plain; version=0.0.4");
  });
  ctx.routes.add(svr, "GET", "/info", [&ctx](const httplib::Request&, httplib::Response& s) {
    const ModelConfig& cfg = ctx.model->config();
    json info{{"model_id", ctx.opts.model_id},
              {"model_sha", nullptr},
              // compute dtype (the projections' in the bf16 tier), or q8/q4 weights
              {"model_dtype", !cfg.quant_type.empty()                        ? cfg.quant_type
                              : ctx.model->precision() == Precision::kBF16 ? std::string("bfloat16")
                                                                             : std::string("float32")},
              {"precision", precision_name(ctx.model->precision())},
              {"model_device_type", "cpu"},
              {"model_pipeline_tag", "text-generation"},
              {"architecture", arch_name(cfg.arch)},
              {"max_concurrent_requests", ctx.opts.max_concurrent_requests},
              {"max_best_of", ctx.limits.max_best_of},
              {"max_stop_sequences", ctx.limits.max_stop_sequences},
              {"max_input_tokens", ctx.limits.max_input_tokens},
              {"max_input_length", ctx.limits.max_input_tokens},
              {"max_total_tokens", ctx.limits.max_total_tokens},
              {"max_batch_prefill_tokens", ctx.opts.max_batch_prefill_tokens},
              {"max_batch_size", ctx.opts.max_batch_size > 0 ? ctx.opts.max_batch_size : ctx.scheduler->slots()},
              {"max_client_batch_size", 1},
              {"state_slots", ctx.scheduler->slots()},
              {"state_bytes_per_sequence", ctx.metrics.state_bytes_per_slot.load()},
              {"validation_workers", 0},
              {"router", "mamba-server"},
              {"version", MAMBA_VERSION},
              {"sha", nullptr},
              {"docker_label", nullptr}};
    s.set_content(dump_json(info), "application/json");
  });
}

}  // namespace mamba::server
