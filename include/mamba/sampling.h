// Sampling with HF transformers / TGI semantics.
//
// Order of logits processors (as HF's generate: transformers/generation/utils.py
// _get_logits_processor, with OpenAI's logit_bias first, as vLLM applies it before its penalties):
// logit_bias → repetition_penalty → frequency/presence penalty → temperature → top_k →
// top_p → min_p → typical_p → draw (multinomial over the survivors). Greedy (argmax) when
// do_sample is false and no warper is set (TGI: temperature ≠ 1, top_k > 0, top_p < 1,
// typical_p < 1, min_p > 0 turn sampling on), or when temperature == 0.
// Ids ≥ vocab_limit (padded vocab rows) are never chosen.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "mamba/status.h"

namespace mamba {

struct SamplingParams {
  bool do_sample = false;           ///< true: sample; false: greedy unless a warper is set (TGI's rule, sampling(): temperature ≠ 1, top_k > 0, top_p < 1, typical_p < 1 or min_p > 0 sample too — unlike HF's do_sample=False)
  float temperature = 1.0f;         ///< ≥ 0; 0 = greedy
  int top_k = 0;                    ///< ≥ 0; 0 = off
  float top_p = 1.0f;               ///< (0, 1]
  float min_p = 0.0f;               ///< [0, 1)
  float typical_p = 1.0f;           ///< (0, 1]
  float repetition_penalty = 1.0f;  ///< > 0; HF: positive logits divided, negative multiplied
  float frequency_penalty = 0.0f;   ///< [-2, 2]; OpenAI: logit −= f · count(token)
  float presence_penalty = 0.0f;    ///< [-2, 2]; OpenAI: logit −= p · [count(token) > 0]
  /// What frequency/presence penalties count: true = prompt + generated tokens (TGI, whose
  /// frequency penalty runs over all input ids; mamba-cli); false = generated tokens only (OpenAI's
  /// definition, vLLM). The repetition penalty always covers prompt + generated (HF, TGI, vLLM).
  bool penalties_count_prompt = true;
  /// TGI's frequency penalty (its /generate; HeterogeneousFrequencyPenaltyLogitsProcessor): the
  /// token's count divided by the number of ids so far (prompt + generated), i.e. its frequency:
  /// logit −= f · count / length. Needs penalties_count_prompt. false: OpenAI's plain count.
  bool frequency_penalty_per_length = false;
  /// OpenAI's logit_bias: (token id, bias) pairs, bias added to that id's raw logit before every
  /// other processor (−100 in effect bans the id, +100 in effect forces it). Ids distinct, ≥ 0 and
  /// < the sampler's vocab_limit; biases in [−100, 100] (OpenAI's range) or −inf (the id banned, as
  /// llama.cpp's `ID-inf`; banning every id is an error of sample()).
  std::vector<std::pair<std::int32_t, float>> logit_bias;
  std::uint64_t seed = 0;           ///< same seed + same input → same output
  bool has_seed = false;            ///< false: seed drawn from std::random_device, below 2^53 (then reported)

  /// Errors (kInvalidArgument) name the parameter and the allowed range.
  Status validate() const;
  /// True when this draws at random (vs greedy).
  bool sampling() const;
};

/// Per-sequence sampler: owns its RNG and token counts (for penalties).
class Sampler {
 public:
  /// `vocab_limit`: ids ≥ this are masked (tokenizer size; or logits width without a tokenizer),
  /// ≥ 1. Invalid params (SamplingParams::validate), vocab_limit < 1 or a logit_bias id ≥
  /// vocab_limit make every sample() return that error (kInvalidArgument).
  Sampler(const SamplingParams& params, std::int64_t vocab_limit);
  /// Records a generated token (or any context token when the prompt's are not told apart) for
  /// the penalties. An id outside [0, vocab_limit) (one the sampler never picks, e.g. a padded
  /// row's) counts as a context position (the length of frequency_penalty_per_length) but adds to
  /// no token's count.
  void observe(std::int32_t id);
  /// Records a prompt token: the repetition penalty sees it; frequency/presence penalties only when
  /// params.penalties_count_prompt.
  void observe_prompt(std::int32_t id);
  /// Picks the next id from raw `logits` [width] (fp32; modified in place as scratch). The
  /// candidates are ids [0, min(width, vocab_limit)): entries past vocab_limit (the model's padded
  /// rows) are set to −inf; a row narrower than vocab_limit offers its own entries only.
  /// Errors: kNumerical if any candidate logit is NaN / +Inf, or all are −inf; kInvalidArgument
  /// for the constructor's invalid arguments, an empty row, or a logit_bias that bans (−inf) every
  /// candidate.
  Result<std::int32_t> sample(std::span<float> logits);
  /// The seed of this sampler's generator: params.seed when given, else the drawn one (53 bits, so
  /// a JSON number keeps it exactly); giving it back as params.seed reproduces the run.
  std::uint64_t seed() const { return seed_; }

 private:
  SamplingParams p_;
  Status params_status_;  ///< validate() of the constructor's arguments
  std::int64_t vocab_limit_;
  std::uint64_t seed_;
  std::mt19937_64 rng_;
  std::vector<std::int32_t> counts_;            ///< [vocab_limit] occurrences in prompt + generated
  std::vector<std::int32_t> generated_counts_;  ///< [vocab_limit] in generated tokens (empty when unused)
  std::int64_t observed_ = 0;                   ///< ids observed (prompt + generated): TGI's length
  std::vector<std::int32_t> scratch_idx_;
  std::vector<std::uint64_t> scratch_keys_[2];  ///< radix-sort buffers (sampler.cc sort_by_score)
  std::vector<float> scratch_terms_;            ///< softmax terms exp(score − max) of the survivors
  std::vector<double> scratch_prob_;            ///< their probabilities
};

/// log-softmax of raw logits over ids [0, vocab_limit) (padded rows excluded), into `out`
/// [vocab_limit]: out[i] = logits[i] − (max + log Σ_j exp(logits[j] − max)), the normaliser from the
/// vectorised ops::sum_exp (relative error ≤ ~4e-6, so each logprob is within ~4e-6 of the double
/// computation), the subtraction in double. Errors: kNumerical on NaN/Inf (naming the first such id),
/// kInvalidArgument on a vocab_limit outside [1, logits.size()] or a short `out`.
Status log_softmax(std::span<const float> logits, std::int64_t vocab_limit, std::span<float> out);

}  // namespace mamba
