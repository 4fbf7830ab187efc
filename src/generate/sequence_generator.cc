// SequenceGenerator: one sequence's sample → detokenize → stop/EOS/length state machine.
#include <algorithm>
#include <optional>
#include <unordered_set>

#include <fmt/format.h>

#include "generate/stop_matcher.h"
#include "mamba/generate.h"

namespace mamba {

std::int64_t vocab_limit(const Tokenizer* tok, const Model& model) {
  const std::int64_t ids = std::min<std::int64_t>(model.config().vocab_size, model.logits_width());
  return tok != nullptr ? std::min<std::int64_t>(tok->size(), ids) : ids;
}

std::string tokenizer_vocab_mismatch(const Tokenizer& tok, const Model& model) {
  const std::int64_t ids = vocab_limit(nullptr, model);
  if (tok.size() <= ids) return {};
  return fmt::format("the tokenizer has {} ids and the model {}: text that tokenizes to an id >= {} will be refused; is the "
                     "tokenizer the model's own?", tok.size(), ids, ids);
}

std::vector<std::pair<std::int32_t, float>> top_logprobs(std::span<const float> logprobs, int k) {
  std::vector<std::pair<std::int32_t, float>> top;
  const std::size_t want = k > 0 ? std::min<std::size_t>(static_cast<std::size_t>(k), logprobs.size()) : 0;
  if (want == 0) return top;
  top.reserve(want + 1);
  // Ids ascending: a value enters before the first kept one it beats strictly, so equal values
  // stay in id order; the list is cut back to `want` after each insertion.
  for (std::size_t i = 0; i < logprobs.size(); ++i) {
    const float v = logprobs[i];
    if (top.size() == want && !(v > top.back().second)) continue;
    auto at = std::find_if(top.begin(), top.end(), [v](const auto& e) { return v > e.second; });
    top.insert(at, {static_cast<std::int32_t>(i), v});
    if (top.size() > want) top.pop_back();
  }
  return top;
}

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "";
    case FinishReason::kLength: return "length";
    case FinishReason::kEosToken: return "eos_token";
    case FinishReason::kStopSequence: return "stop_sequence";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "";
}

struct SequenceGenerator::Impl {
  Impl(const Tokenizer* t, std::int64_t limit, const GenerateOptions& o, std::vector<std::int32_t> eos)
      : tok(t), vocab_limit(limit), opts(o), eos_ids(eos.begin(), eos.end()), sampler(o.sampling, limit),
        stop(o.stop, o.include_stop_text), logprobs(static_cast<std::size_t>(limit)) {
    if (tok) decoder.emplace(*tok, o.skip_special_tokens);
    opts.stop = {};  // the matcher has them (a server request's may be megabytes)
  }
  const Tokenizer* tok;
  std::int64_t vocab_limit;            // ≥ 1 (sizes the buffers)
  Status invalid;                      // a constructor argument out of range: next() returns it
  GenerateOptions opts;
  std::unordered_set<std::int32_t> eos_ids;
  Sampler sampler;
  std::optional<StreamDecoder> decoder;
  StopMatcher stop;
  std::vector<float> logprobs;     // [vocab_limit] scratch

  /// Releases everything the decoder and the stop matcher hold (end of the sequence); what the
  /// decoder still held is also appended to `decoded` when given.
  std::string release_all(std::string* decoded = nullptr) {
    std::string out;
    if (decoder) {
      std::string rest = decoder->flush();
      if (decoded) *decoded += rest;
      out = stop.push(rest);
    }
    out += stop.flush();
    return out;
  }
};

SequenceGenerator::SequenceGenerator(const Tokenizer* tok, std::int64_t vocab_limit, const GenerateOptions& opts,
                                     std::vector<std::int32_t> eos_ids) {
  impl_ = std::make_unique<Impl>(tok, std::max<std::int64_t>(vocab_limit, 1), opts, std::move(eos_ids));
  auto invalid = [](std::string message) { return make_error(ErrorCode::kInvalidArgument, "SequenceGenerator: " + message); };
  if (vocab_limit < 1) impl_->invalid = invalid(fmt::format("vocab_limit = {} must be >= 1", vocab_limit));
  if (opts.max_new_tokens < 0) impl_->invalid = invalid(fmt::format("max_new_tokens = {} must be >= 0", opts.max_new_tokens));
  for (std::int32_t id : impl_->eos_ids)
    if (id < 0) impl_->invalid = invalid(fmt::format("eos_ids holds {}: ids are >= 0", id));
  if (Status st = validate_stop_strings(opts.stop, tok); !st.ok()) impl_->invalid = invalid(st.error().message);
  if (opts.max_new_tokens == 0) finish_ = FinishReason::kLength;  // nothing to generate (prompt scoring)
}

SequenceGenerator::SequenceGenerator(SequenceGenerator&&) noexcept = default;
SequenceGenerator& SequenceGenerator::operator=(SequenceGenerator&&) noexcept = default;
SequenceGenerator::~SequenceGenerator() = default;

void SequenceGenerator::observe_prompt(std::span<const std::int32_t> prompt) {
  for (auto id : prompt) impl_->sampler.observe_prompt(id);
  // The generated text continues the prompt's (a leading space a first-token rule would drop stays).
  if (impl_->decoder && n_generated_ == 0) impl_->decoder.emplace(*impl_->tok, impl_->opts.skip_special_tokens, prompt);
}

std::uint64_t SequenceGenerator::seed() const { return impl_->sampler.seed(); }

Result<TokenEvent> SequenceGenerator::next(std::span<float> logits) {
  Impl& s = *impl_;
  if (finished())
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("SequenceGenerator::next called after finish ({})", finish_reason_name(finish_)));
  if (!s.invalid.ok()) {
    finish_ = FinishReason::kError;
    return s.invalid.error();
  }
  if (static_cast<std::int64_t>(logits.size()) < s.vocab_limit) {
    finish_ = FinishReason::kError;
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("SequenceGenerator: logits row has {} values, expected >= {}", logits.size(), s.vocab_limit));
  }
  if (Status st = log_softmax(logits, s.vocab_limit, s.logprobs); !st.ok()) {
    finish_ = FinishReason::kError;
    return st.error();
  }
  auto sampled = s.sampler.sample(logits);
  if (!sampled.ok()) {
    finish_ = FinishReason::kError;
    return sampled.error();
  }
  const std::int32_t id = *sampled;
  s.sampler.observe(id);
  ++n_generated_;
  if (s.opts.keep_output) ids_.push_back(id);

  TokenEvent ev;
  ev.id = id;
  ev.logprob = s.logprobs[static_cast<std::size_t>(id)];
  ev.top = top_logprobs(s.logprobs, s.opts.top_logprobs);

  std::string released;
  if (s.tok) {
    ev.special = s.tok->is_special(id);
    auto piece = s.tok->token_text(id);
    if (piece.ok()) ev.token_text = std::move(*piece);
  }
  if (!s.opts.ignore_eos && s.eos_ids.count(id)) {
    finish_ = FinishReason::kEosToken;  // the EOS token's own text is not emitted
    released = s.release_all(&ev.decoded_delta);
  } else {
    if (s.decoder) {
      auto delta = s.decoder->push(id);
      if (!delta.ok()) {
        finish_ = FinishReason::kError;
        return delta.error();
      }
      ev.decoded_delta = *delta;
      released = s.stop.push(*delta);
    }
    if (s.stop.stopped()) {
      finish_ = FinishReason::kStopSequence;
    } else if (n_generated_ >= s.opts.max_new_tokens) {
      released += s.release_all(&ev.decoded_delta);
      finish_ = s.stop.stopped() ? FinishReason::kStopSequence : FinishReason::kLength;
    }
  }
  if (s.opts.keep_output) text_ += released;
  ev.text_delta = std::move(released);
  return ev;
}

std::string SequenceGenerator::flush() {
  if (impl_->stop.stopped()) return {};
  std::string out = impl_->release_all();
  if (impl_->opts.keep_output) text_ += out;
  return out;
}

}  // namespace mamba
