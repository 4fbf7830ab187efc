// generate(): prefill + decode loop for one sequence (the CLI's path; the server batches the same
// SequenceGenerator over Model::step), and EOS ids from generation_config.json.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "generate/stop_matcher.h"
#include "io/generation_config.h"
#include "mamba/checkpoint.h"
#include "mamba/generate.h"

namespace mamba {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

namespace {

/// tokenizer_eos_id given tokenizer_config.json's eos_token (`eos_token`, already read).
std::optional<std::int32_t> tokenizer_eos_id_from(const std::optional<std::string>& eos_token, const Tokenizer& tok,
                                                  std::int64_t id_limit) {
  auto usable = [&](std::optional<std::int32_t> id) { return id && *id < id_limit; };
  if (eos_token)
    if (auto id = tok.token_to_id(*eos_token); usable(id)) return id;
  if (auto id = tok.token_to_id("<|endoftext|>"); usable(id) && tok.is_special(*id)) return id;
  return std::nullopt;
}

}  // namespace

Result<std::optional<std::int32_t>> tokenizer_eos_id(const std::string& model_dir, const Tokenizer& tok, std::int64_t id_limit) {
  MAMBA_ASSIGN_OR_RETURN(auto eos_token, io::read_tokenizer_eos_token(model_dir));
  return tokenizer_eos_id_from(eos_token, tok, id_limit);
}

namespace {

/// model_eos_ids' order given generation_config.json's ids (`generation`, already read) and a way
/// to get the tokenizer's EOS (`tokenizer_eos`, called only when nothing before names one).
template <class TokenizerEos>
Result<std::vector<std::int32_t>> eos_ids_from(const std::optional<std::vector<std::int32_t>>& generation, const ModelConfig& config,
                                               const Tokenizer* tok, TokenizerEos&& tokenizer_eos) {
  if (generation) return *generation;
  std::vector<std::int32_t> ids;
  for (auto id : config.eos_token_ids)
    if (id >= 0 && id <= INT32_MAX) ids.push_back(static_cast<std::int32_t>(id));
  if (ids.empty() && tok != nullptr) {
    MAMBA_ASSIGN_OR_RETURN(std::optional<std::int32_t> id, tokenizer_eos());
    if (id) ids.push_back(*id);
  }
  return ids;
}

}  // namespace

Result<std::vector<std::int32_t>> model_eos_ids(const std::string& model_dir, const ModelConfig& config, const Tokenizer* tok,
                                                const std::string& tokenizer_dir) {
  MAMBA_ASSIGN_OR_RETURN(auto generation, io::read_generation_eos_ids(model_dir, config.vocab_size));
  return eos_ids_from(generation, config, tok, [&]() -> Result<std::optional<std::int32_t>> {
    return tokenizer_eos_id(tokenizer_dir.empty() ? model_dir : tokenizer_dir, *tok, config.vocab_size);
  });
}

Result<std::vector<std::int32_t>> model_eos_ids(const Model& model, const Tokenizer* tok, const std::string& tokenizer_dir) {
  const Checkpoint& ck = model.checkpoint();
  const auto& generation = ck.generation_eos_ids();
  if (!generation.ok()) return generation.error();
  return eos_ids_from(*generation, model.config(), tok, [&]() -> Result<std::optional<std::int32_t>> {
    // The model directory's tokenizer_config.json as read at load (however the directory is
    // spelled: "m/", "./m"); another directory's is read now.
    std::error_code ec;
    if (!tokenizer_dir.empty() && !std::filesystem::equivalent(tokenizer_dir, ck.dir(), ec))
      return tokenizer_eos_id(tokenizer_dir, *tok, model.config().vocab_size);
    const auto& eos_token = ck.tokenizer_eos_token();
    if (!eos_token.ok()) return eos_token.error();
    return tokenizer_eos_id_from(*eos_token, *tok, model.config().vocab_size);
  });
}

Result<GenerateResult> generate(Model& model, const Tokenizer* tok, std::span<const std::int32_t> prompt,
                                const GenerateOptions& opts, const std::function<bool(const TokenEvent&)>& on_token) {
  State state = model.new_state();
  return generate(model, tok, state, prompt, opts, on_token);
}

Result<GenerateResult> generate(Model& model, const Tokenizer* tok, State& state, std::span<const std::int32_t> prompt,
                                const GenerateOptions& opts, const std::function<bool(const TokenEvent&)>& on_token) {
  const std::int64_t width = model.logits_width();
  const std::int64_t len = static_cast<std::int64_t>(prompt.size());
  if (len == 0) return make_error(ErrorCode::kInvalidArgument, "generate: the prompt is empty (at least one token is needed)");
  const std::int64_t vocab = vocab_limit(tok, model);
  for (std::int64_t i = 0; i < len; ++i)
    if (prompt[i] < 0 || prompt[i] >= vocab)
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("generate: prompt token {} (position {}) is outside the vocabulary [0, {})", prompt[i], i, vocab));
  MAMBA_RETURN_IF_ERROR(opts.sampling.validate());
  if (opts.max_new_tokens < 0)
    return make_error(ErrorCode::kInvalidArgument, fmt::format("max_new_tokens = {} must be >= 0", opts.max_new_tokens));
  if (opts.top_logprobs < 0)
    return make_error(ErrorCode::kInvalidArgument, fmt::format("top_logprobs = {} must be >= 0", opts.top_logprobs));
  if (Status st = validate_stop_strings(opts.stop, tok); !st.ok())
    return make_error(ErrorCode::kInvalidArgument, "generate: " + st.error().message);

  for (std::int32_t id : opts.eos_ids)
    if (id < 0 || id >= width)
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("generate: eos_ids holds {}, outside the logits' ids [0, {}) (it could never end a sequence)", id, width));
  std::vector<std::int32_t> eos = opts.eos_ids;
  if (eos.empty() && !opts.ignore_eos) {
    MAMBA_ASSIGN_OR_RETURN(eos, model_eos_ids(model, tok));
  }
  SequenceGenerator gen(tok, vocab, opts, std::move(eos));
  gen.observe_prompt(prompt);

  GenerateResult res;
  res.seed = gen.seed();

  // Prefill in pieces aligned to chunk_size (identical to one call; bounds the kAll buffer).
  std::vector<float> logits;
  std::vector<float> row(static_cast<std::size_t>(width));
  std::vector<float> lp(opts.prompt_logprobs ? static_cast<std::size_t>(vocab) : 0);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::int64_t off = 0, n = 0; off < len; off += n) {
    // Pieces on the absolute grid (a continued state may start anywhere): the same SSD chunks as
    // one prefill call.
    n = model.config().prompt_piece(state.position, len - off, kPromptLogprobsPiece);
    const bool last = off + n == len;
    const LogitsMode mode = opts.prompt_logprobs ? LogitsMode::kAll : (last ? LogitsMode::kLast : LogitsMode::kNone);
    logits.resize(static_cast<std::size_t>((mode == LogitsMode::kAll ? n : 1) * width));
    MAMBA_RETURN_IF_ERROR(model.prefill(prompt.subspan(static_cast<std::size_t>(off), static_cast<std::size_t>(n)), state,
                                        mode, logits.data()));
    if (opts.prompt_logprobs) {
      for (std::int64_t i = 0; i < n && off + i + 1 < len; ++i) {
        std::span<const float> r(logits.data() + i * width, static_cast<std::size_t>(width));
        MAMBA_RETURN_IF_ERROR(log_softmax(r, vocab, lp));
        const std::int32_t next = prompt[static_cast<std::size_t>(off + i + 1)];
        res.prompt_logprobs.push_back(next < vocab ? lp[static_cast<std::size_t>(next)]
                                                         : -std::numeric_limits<float>::infinity());
      }
    }
    if (last) {
      const float* src = logits.data() + (mode == LogitsMode::kAll ? (n - 1) * width : 0);
      std::copy(src, src + width, row.begin());
    }
    if (opts.on_prefill_progress) opts.on_prefill_progress(off + n, len);
    if (opts.should_stop && opts.should_stop()) {  // (after the last piece too: no token is drawn then)
      res.prefill_seconds = seconds_since(t0);
      res.finish = FinishReason::kCancelled;
      return res;
    }
  }
  res.prefill_seconds = seconds_since(t0);

  const auto t1 = std::chrono::steady_clock::now();
  if (opts.max_new_tokens == 0) {
    res.finish = FinishReason::kLength;
    return res;
  }
  State* states[1] = {&state};
  while (true) {
    MAMBA_ASSIGN_OR_RETURN(TokenEvent ev, gen.next(row));
    const std::int32_t id = ev.id;
    ++res.n_generated;
    if (opts.keep_output) res.tokens.push_back(ev);
    if (on_token && !on_token(opts.keep_output ? res.tokens.back() : ev)) {
      res.cancelled_tail = gen.flush();
      res.finish = FinishReason::kCancelled;
      break;
    }
    if (gen.finished()) {
      res.finish = gen.finish_reason();
      break;
    }
    // Polled before the token is fed: a cancelled generation's state, like a finished one's, holds
    // every generated token but the last.
    if (opts.should_stop && opts.should_stop()) {
      res.cancelled_tail = gen.flush();
      res.finish = FinishReason::kCancelled;
      break;
    }
    const std::int32_t toks[1] = {id};
    MAMBA_RETURN_IF_ERROR(model.step(toks, states, row.data()));
  }
  res.decode_seconds = seconds_since(t1);
  res.text = gen.text();
  return res;
}

}  // namespace mamba
