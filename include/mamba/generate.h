// Generation: the per-sequence state machine (sample → detokenize → stop/EOS/length checks)
// separated from model calls, so the CLI loop and the server's batched scheduler share it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "mamba/model.h"
#include "mamba/sampling.h"
#include "mamba/status.h"
#include "mamba/tokenizer.h"

namespace mamba {

/// Why a generation ended.
enum class FinishReason : std::uint8_t {
  kNone,          ///< still running
  kLength,        ///< max_new_tokens generated (or the server's context bound reached)
  kEosToken,      ///< an EOS id was generated (GenerateOptions::eos_ids / model_eos_ids)
  kStopSequence,  ///< a stop string matched the decoded text
  kCancelled,     ///< the caller stopped it (on_token returned false, a client left)
  kError,         ///< a step failed (e.g. non-finite logits: kNumerical)
};
/// TGI names: "length", "eos_token", "stop_sequence", ...
const char* finish_reason_name(FinishReason r);

/// The ids a model's text can use: min(tokenizer size (when `tok` is not null), the config's
/// vocab_size, logits_width). Logits rows past it are padding (a state-spaces checkpoint's vocab
/// 50277 padded to 50280 rows, an HF one's 50280 rows for a 50277-id tokenizer): never sampled,
/// scored or accepted in prompts.
std::int64_t vocab_limit(const Tokenizer* tok, const Model& model);

/// When `tok` has more ids than `model` takes (vocab_limit(nullptr, model)), most likely another
/// model's tokenizer: a warning's text naming both sizes ("the tokenizer has 50277 ids and the model
/// 8192: text that tokenizes to an id >= 8192 will be refused; is the tokenizer the model's own?");
/// else empty. mamba-cli and mamba-server log it at load (the mismatch otherwise shows only once a
/// prompt reaches those ids).
std::string tokenizer_vocab_mismatch(const Tokenizer& tok, const Model& model);

/// The k likeliest ids of a logprobs row (ids 0..size−1): (id, logprob) pairs in descending
/// logprob, equal values by ascending id; min(k, size) of them (k ≤ 0: none). One pass over the row
/// (TokenEvent::top, and the prompt positions' top_logprobs in the server).
std::vector<std::pair<std::int32_t, float>> top_logprobs(std::span<const float> logprobs, int k);

struct GenerateOptions {
  int max_new_tokens = 64;             ///< tokens to generate at most (0: finish at once, kLength; < 0: error)
  SamplingParams sampling;
  /// Stop strings: text before kept, the rest not emitted. Each non-empty, and they need a tokenizer
  /// (they are matched in the decoded text): else generate() / SequenceGenerator give kInvalidArgument.
  std::vector<std::string> stop;
  /// true: the matched stop string ends the text (TGI's /generate keeps it); false: the text ends
  /// before it (OpenAI, mamba-cli). Either way nothing after the stop string is emitted.
  bool include_stop_text = false;
  std::vector<std::int32_t> eos_ids;   ///< empty = model_eos_ids(model, tok) (generation_config.json as read at load, config.json, the tokenizer's); each in [0, logits_width)
  bool ignore_eos = false;             ///< generate past EOS (the EOS files are then not read)
  int top_logprobs = 0;                ///< K best (id, logprob) per generated step, K ≥ 0 (else kInvalidArgument; the server bounds it further); 0 = none
  bool prompt_logprobs = false;        ///< logprob of each prompt token given the ones before
  bool skip_special_tokens = true;     ///< special tokens left out of the text (TGI)
  /// false: nothing is kept per generated token — GenerateResult::tokens and ::text stay empty (each
  /// TokenEvent goes to on_token only; GenerateResult::n_generated counts them) and a
  /// SequenceGenerator keeps no text() / generated_ids() — so memory stays constant however long
  /// the generation runs (mamba-cli run streaming with -n -1; ~150 bytes per token otherwise).
  bool keep_output = true;
  /// Called by generate() after each prefill piece with (prompt tokens done, prompt length);
  /// prompts longer than kPromptLogprobsPiece are prefilled in chunk-aligned pieces (bitwise identical).
  std::function<void(std::int64_t, std::int64_t)> on_prefill_progress;
  /// Polled by generate() after each prefill piece (≤ kPromptLogprobsPiece tokens, rounded to
  /// chunk_size) and after each generated token, before the model consumes it: true ends the
  /// generation with FinishReason::kCancelled and the tokens so far (none when it comes during or
  /// right after the prefill: the state then holds the prompt's first pieces, or all of it, and
  /// prompt_logprobs those pieces' values; with a caller's State, re-feed the prompt's last token
  /// to continue — its logits are gone). Lets Ctrl-C stop a long prompt's prefill.
  std::function<bool()> should_stop;
};

/// Prompt tokens per prefill call in generate() (rounded up to a multiple of the model's
/// chunk_size): bounds the [piece, logits_width] logits buffer when prompt_logprobs is requested.
/// (Model::prefill cuts its own, smaller pieces inside each call.)
inline constexpr std::int64_t kPromptLogprobsPiece = 1024;

/// EOS ids of a model: generation_config.json's `eos_token_id` (an int or a list) in `model_dir`
/// when that file exists and has the key (a null value counts as absent), else `config.eos_token_ids` (config.json); when neither
/// names one and `tok` is given, the tokenizer's EOS (tokenizer_eos_id): the original state-spaces
/// checkpoints' config.json has no EOS, and mamba_ssm's generation stops at GPT-NeoX's
/// `<|endoftext|>` (id 0) through the tokenizer, as llama.cpp does. Empty: no EOS (generation runs
/// to its token limit). `tokenizer_dir`: where the tokenizer's tokenizer_config.json is read (the
/// directory of a tokenizer given apart from the model, `--tokenizer`); empty = `model_dir`.
/// Errors: kFormat naming generation_config.json / tokenizer_config.json when malformed; kIo when
/// one cannot be read; kInvalidArgument when an EOS id it names is outside the vocabulary.
Result<std::vector<std::int32_t>> model_eos_ids(const std::string& model_dir, const ModelConfig& config,
                                                const Tokenizer* tok = nullptr, const std::string& tokenizer_dir = "");
/// The same for a loaded model, without reading the model directory's files again: the ids its
/// Checkpoint read at load (Checkpoint::generation_eos_ids()), then config.json's, then (`tok`
/// given) the tokenizer's: from the tokenizer_config.json read at load
/// (Checkpoint::tokenizer_eos_token()) when `tokenizer_dir` is empty or the model's directory
/// (std::filesystem::equivalent), else from `tokenizer_dir`'s file, read now. What generate() uses
/// when GenerateOptions::eos_ids is empty. Errors: generation_eos_ids()'s kept error; when the
/// tokenizer's EOS is needed, tokenizer_eos_token()'s kept error or tokenizer_eos_id's (kFormat
/// naming tokenizer_config.json and the field, kIo).
Result<std::vector<std::int32_t>> model_eos_ids(const Model& model, const Tokenizer* tok = nullptr, const std::string& tokenizer_dir = "");

/// The tokenizer's own EOS, an id below `id_limit` (the model's vocab_size: a model cannot produce
/// another): tokenizer_config.json's `eos_token` (a string, or an object with "content") in
/// `model_dir` when that file has it and the tokenizer knows the token, else the added token
/// `<|endoftext|>` when it is flagged special (GPT-2 / GPT-NeoX); nullopt otherwise.
/// Errors: kFormat naming tokenizer_config.json when it is not a JSON object or `eos_token` has
/// another type.
Result<std::optional<std::int32_t>> tokenizer_eos_id(const std::string& model_dir, const Tokenizer& tok, std::int64_t id_limit);

/// One generated token.
struct TokenEvent {
  std::int32_t id = 0;
  float logprob = 0.0f;                ///< log-softmax of the raw logits (see sampling.h)
  bool special = false;                ///< a special token (Tokenizer::is_special): its text is left out when skip_special_tokens
  std::string token_text;              ///< Tokenizer::token_text(id) (for details / logprobs)
  std::string text_delta;              ///< text released to the user at this step (stop-safe, UTF-8 complete)
  /// Text this token completes in the decoded output, before stop strings hold any back (UTF-8
  /// complete; a token ending the sequence also carries what the decoder still held): the running
  /// sum of these is where each token's text starts (OpenAI's text_offset), whatever was released.
  std::string decoded_delta;
  std::vector<std::pair<std::int32_t, float>> top;  ///< top_logprobs best, descending
};

/// Drives one sequence's sampling and text assembly given logits rows. Owns its Sampler,
/// StreamDecoder and stop-string buffer (src/generate/stop_matcher.h). Tokenizer may be null (ids
/// only). Sampling and logprobs are over ids < vocab_limit (the model's vocab_limit(tok, model)).
/// Finish: an id in `eos_ids` (unless opts.ignore_eos; its text is not emitted) → kEosToken; a stop
/// string → kStopSequence; max_new_tokens ids generated → kLength (max_new_tokens 0: finished with
/// kLength from the start, next() is never called); a sampling error → kError. Move-only: it owns
/// its sampler's random stream (a copy would repeat or share it); a moved-from one may only be
/// destroyed or assigned to.
class SequenceGenerator {
 public:
  /// `tok` (may be null) must outlive this object. `opts.sampling` must be valid (validate()),
  /// `vocab_limit` ≥ 1, opts.max_new_tokens ≥ 0, the `eos_ids` ≥ 0 and opts.stop's strings non-empty
  /// (and none without a tokenizer): otherwise next() returns kInvalidArgument naming the value.
  SequenceGenerator(const Tokenizer* tok, std::int64_t vocab_limit, const GenerateOptions& opts,
                    std::vector<std::int32_t> eos_ids);
  SequenceGenerator(SequenceGenerator&&) noexcept;
  SequenceGenerator& operator=(SequenceGenerator&&) noexcept;
  ~SequenceGenerator();
  /// Registers the prompt ids (penalties count them; the generated text continues the prompt's, so
  /// a Metaspace / Strip decoder keeps the first generated token's leading space). Before next().
  void observe_prompt(std::span<const std::int32_t> prompt);
  /// Consumes the logits row that follows the last token ([logits_width] fp32, at least vocab_limit
  /// values; used as scratch); samples, updates text,
  /// decides finish. Returns the event of the sampled token. Errors: kNumerical (NaN/Inf logits;
  /// finish becomes kError), kInvalidArgument after finished() or for a row shorter than the vocabulary.
  Result<TokenEvent> next(std::span<float> logits);
  bool finished() const { return finish_ != FinishReason::kNone; }
  FinishReason finish_reason() const { return finish_; }
  /// Text of the whole generation as returned to the user (stop text removed); empty when
  /// GenerateOptions::keep_output is false.
  const std::string& text() const { return text_; }
  /// Releases any text still held back (call after finish).
  std::string flush();
  /// The ids generated so far; empty when GenerateOptions::keep_output is false (n_generated() counts).
  const std::vector<std::int32_t>& generated_ids() const { return ids_; }
  /// How many ids next() has generated (kept or not).
  std::int64_t n_generated() const { return n_generated_; }
  /// The sampler's seed (Sampler::seed: the given one or the drawn one, 53 bits), to reproduce the run.
  std::uint64_t seed() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  FinishReason finish_ = FinishReason::kNone;
  std::string text_;
  std::vector<std::int32_t> ids_;
  std::int64_t n_generated_ = 0;
};

struct GenerateResult {
  std::vector<TokenEvent> tokens;  ///< one per generated token (empty when !GenerateOptions::keep_output)
  std::string text;                ///< the generated text (empty when !GenerateOptions::keep_output)
  std::int64_t n_generated = 0;    ///< generated tokens, kept or not
  /// Text still held back when the generation was cancelled (the start of a stop string that never
  /// completed, a character whose last bytes never came), released then (SequenceGenerator::flush):
  /// no event's text_delta carries it, so a caller that streams text_delta prints it last (the
  /// streamed text then equals `text`, which includes it). Empty unless finish is kCancelled.
  std::string cancelled_tail;
  FinishReason finish = FinishReason::kNone;
  std::vector<float> prompt_logprobs;  ///< [prompt_len − 1] when requested (token i given < i)
  std::uint64_t seed = 0;              ///< the sampling seed used (given or drawn: SequenceGenerator::seed)
  double prefill_seconds = 0, decode_seconds = 0;
};

/// Prefill + decode loop for one sequence from an empty state: prefill(prompt) (LogitsMode::kAll
/// only when prompt_logprobs), then SequenceGenerator::next / Model::step until finished.
/// `tok` may be null. `on_token` (optional) is called for each event; returning false cancels
/// (finish kCancelled). EOS: opts.eos_ids, else model_eos_ids(model, tok) (generation_config.json
/// as read at load). Errors: kInvalidArgument (empty prompt, an id ≥ vocab_limit(tok, model)
/// — min(tokenizer size, the config's vocab_size, logits width) —, bad options),
/// model_eos_ids' errors when opts.eos_ids is empty (a malformed generation_config.json or
/// tokenizer_config.json, as read at load: kFormat naming it), and errors from the model or sampler. prompt_logprobs[i] = logprob of prompt[i+1].
Result<GenerateResult> generate(Model& model, const Tokenizer* tok, std::span<const std::int32_t> prompt,
                                const GenerateOptions& opts,
                                const std::function<bool(const TokenEvent&)>& on_token = {});

/// The same, continuing from `state` (caller-owned, from model.new_state(); updated in place): the
/// prompt is fed after what the state already holds, so a conversation's next turn, or several
/// continuations of one prefix (each from its own `state.clone()`), skip re-reading what came
/// before. On return `state` holds the prompt and every generated token except the last one (the
/// model has not consumed it: no logits are needed for it), so a next turn's prompt starts with
/// `result.tokens.back().id` (when there is one) — llama.cpp's n_past convention; with
/// max_new_tokens 0 it holds the whole prompt. Repetition penalties and the detokenizer's context
/// see only `prompt`. Prefill pieces end at absolute multiples of the piece size, so the state is
/// what one Model::prefill of the prompt gives, wherever it started. Errors: as above; on an error
/// or a cancellation during the prefill the state may be partly advanced (state.position tells how
/// far): clone it first to keep it. EOS: as the overload above (the model directory's files as read
/// at load).
/// examples/continue_state.cc shows a two-turn use.
Result<GenerateResult> generate(Model& model, const Tokenizer* tok, State& state, std::span<const std::int32_t> prompt,
                                const GenerateOptions& opts,
                                const std::function<bool(const TokenEvent&)>& on_token = {});

}  // namespace mamba
