// SequenceGenerator and generate() against a scripted fake Model (the real tokenizer of the
// embedded model): text assembly, EOS / stop / length / cancel, logprob definitions, prompt
// logprobs, chunked prefill with progress, and errors.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <type_traits>

#include "mamba/checkpoint.h"
#include "mamba/generate.h"
#include "mamba/tokenizer.h"
#include "common/test_util.h"

namespace mamba {
namespace {

std::string model_dir() { return test::source_dir() + "/models/mamba2-books-7m-bpe8k"; }

/// A Model whose next token at absolute position p (tokens consumed) is script[p] (logit 10),
/// with a runner-up script[p]+1 (logit 5), every other tokenizer id 0, and padded rows
/// (ids >= vocab) 20 — which sampling must never pick.
class ScriptedModel final : public Model {
 public:
  using Model::prefill;  // the sized-buffer overloads stay visible
  using Model::step;
  ScriptedModel(Checkpoint ckpt, std::int64_t vocab, std::int64_t width, std::vector<std::int32_t> script)
      : ckpt_(std::move(ckpt)), vocab_(vocab), width_(width), script_(std::move(script)) {}
  const ModelConfig& config() const override { return ckpt_.config(); }
  const Checkpoint& checkpoint() const override { return ckpt_; }
  std::int64_t logits_width() const override { return width_; }
  State new_state() const override { return State{}; }

  Status prefill(std::span<const std::int32_t> tokens, State& state, LogitsMode mode, float* logits) override {
    prefill_calls.push_back(static_cast<std::int64_t>(tokens.size()));
    const std::int64_t n = static_cast<std::int64_t>(tokens.size());
    for (std::int64_t i = 0; i < n; ++i) {
      ++state.position;
      if (mode == LogitsMode::kAll) fill(state.position, logits + i * width_);
    }
    if (mode == LogitsMode::kLast) fill(state.position, logits);
    return {};
  }
  Status step(std::span<const std::int32_t> tokens, std::span<State* const> states, float* logits) override {
    for (std::size_t b = 0; b < tokens.size(); ++b) {
      ++states[b]->position;
      fill(states[b]->position, logits + static_cast<std::int64_t>(b) * width_);
    }
    return {};
  }
  void fill(std::int64_t pos, float* row) const {
    for (std::int64_t i = 0; i < width_; ++i) row[i] = i < vocab_ ? 0.0f : 20.0f;
    const std::int32_t t = pos < static_cast<std::int64_t>(script_.size()) ? script_[static_cast<std::size_t>(pos)] : 5;
    row[t] = 10.0f;
    row[(t + 1) % vocab_] = 5.0f;
    if (pos == nan_at) row[3] = NAN;
  }

  std::int64_t nan_at = -1;
  std::vector<std::int64_t> prefill_calls;

 private:
  Checkpoint ckpt_;
  std::int64_t vocab_, width_;
  std::vector<std::int32_t> script_;
};

class GenerateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tok = Tokenizer::from_file(model_dir() + "/tokenizer.json");
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    tok_.emplace(std::move(*tok));
  }
  std::vector<std::int32_t> enc(const std::string& s) {
    auto r = tok_->encode(s);
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : std::vector<std::int32_t>{};
  }
  /// A fake model scripted to continue `prompt` with `cont`; width = tokenizer size + 64 padded rows.
  std::unique_ptr<ScriptedModel> make(const std::vector<std::int32_t>& prompt, const std::vector<std::int32_t>& cont) {
    auto ck = Checkpoint::open(model_dir());
    EXPECT_TRUE(ck.ok()) << (ck.ok() ? "" : ck.error().message);
    std::vector<std::int32_t> script{0};  // position 0 is never asked for (no logits before a token)
    script.insert(script.end(), prompt.begin() + 1, prompt.end());
    script.insert(script.end(), cont.begin(), cont.end());
    return std::make_unique<ScriptedModel>(std::move(*ck), tok_->size(), tok_->size() + 64, script);
  }
  /// A prompt of n ids cycling through 100..149 (long prompts: prefilled in pieces).
  static std::vector<std::int32_t> filler_prompt(std::size_t n) {
    std::vector<std::int32_t> prompt(n);
    for (std::size_t i = 0; i < n; ++i) prompt[i] = static_cast<std::int32_t>(100 + i % 50);
    return prompt;
  }
  std::optional<Tokenizer> tok_;
};

double expected_logprob(double peak, std::int64_t vocab) {
  return peak - std::log(std::exp(10.0) + std::exp(5.0) + static_cast<double>(vocab - 2));
}

TEST_F(GenerateTest, ScriptedTextStreamsExactlyAndStopsAtLength) {
  const auto prompt = enc("It was a dark and stormy night");
  const std::string cont_text = ".\n\n\u201cI\u2019m glad to see you,\u201d said the old man";
  const auto cont = enc(cont_text);
  auto model = make(prompt, cont);
  GenerateOptions o;
  o.max_new_tokens = static_cast<int>(cont.size());
  o.eos_ids = {0};
  std::string streamed;
  auto r = generate(*model, &*tok_, prompt, o, [&](const TokenEvent& ev) {
    streamed += ev.text_delta;
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.error().message;
  std::vector<std::int32_t> ids;
  for (const auto& ev : r->tokens) ids.push_back(ev.id);
  EXPECT_EQ(ids, cont);
  EXPECT_EQ(r->text, cont_text);
  EXPECT_EQ(streamed, cont_text);
  EXPECT_EQ(r->finish, FinishReason::kLength);
  EXPECT_STREQ(finish_reason_name(r->finish), "length");
  for (const auto& ev : r->tokens) EXPECT_NEAR(ev.logprob, expected_logprob(10, tok_->size()), 1e-5);
  EXPECT_EQ(model->prefill_calls, std::vector<std::int64_t>{static_cast<std::int64_t>(prompt.size())});
}

// keep_output = false (a streamed, possibly endless generation): the same events reach on_token,
// and nothing is kept per token — no tokens, no text, no generated_ids — only the count.
TEST_F(GenerateTest, WithoutKeptOutputTheStreamIsTheSameAndNothingIsKept) {
  const auto prompt = enc("It was a dark and stormy night");
  const std::string cont_text = " and the old man said that the sea was calm";
  const auto cont = enc(cont_text);
  auto model = make(prompt, cont);
  GenerateOptions o;
  o.max_new_tokens = static_cast<int>(cont.size()) - 1;
  o.stop = {"sea was"};  // a stop string still holds text back and ends the stream
  o.top_logprobs = 2;
  auto run = [&](bool keep, std::vector<TokenEvent>& events) {
    o.keep_output = keep;
    return generate(*model, &*tok_, prompt, o, [&](const TokenEvent& ev) {
      events.push_back(ev);
      return true;
    });
  };
  std::vector<TokenEvent> kept_events, streamed_events;
  auto kept = run(true, kept_events);
  auto streamed = run(false, streamed_events);
  ASSERT_TRUE(kept.ok() && streamed.ok());
  EXPECT_EQ(kept->text, " and the old man said that the ");
  EXPECT_EQ(kept->n_generated, static_cast<std::int64_t>(kept->tokens.size()));
  EXPECT_EQ(streamed->n_generated, kept->n_generated);
  EXPECT_EQ(streamed->finish, FinishReason::kStopSequence);
  EXPECT_TRUE(streamed->tokens.empty());
  EXPECT_TRUE(streamed->text.empty());
  ASSERT_EQ(streamed_events.size(), kept_events.size());
  std::string text;
  for (std::size_t i = 0; i < kept_events.size(); ++i) {
    EXPECT_EQ(streamed_events[i].id, kept_events[i].id) << i;
    EXPECT_EQ(streamed_events[i].text_delta, kept_events[i].text_delta) << i;
    EXPECT_EQ(streamed_events[i].top, kept_events[i].top) << i;
    text += streamed_events[i].text_delta;
  }
  EXPECT_EQ(text, kept->text);

  SequenceGenerator gen(&*tok_, tok_->size(), o, {0});  // o.keep_output is false
  std::vector<float> row(static_cast<std::size_t>(model->logits_width()));
  for (int i = 0; i < 3; ++i) {
    model->fill(static_cast<std::int64_t>(prompt.size()) + i, row.data());
    ASSERT_TRUE(gen.next(row).ok());
  }
  EXPECT_EQ(gen.n_generated(), 3);
  EXPECT_TRUE(gen.generated_ids().empty());
  EXPECT_TRUE(gen.text().empty());
}

TEST_F(GenerateTest, EosEndsWithoutItsText) {
  const auto prompt = enc("Hello");
  auto cont = enc(" there, friend");
  cont.insert(cont.begin() + 2, 0);  // <|endoftext|> after two tokens
  auto model = make(prompt, cont);
  GenerateOptions o;
  o.max_new_tokens = 20;
  o.eos_ids = {0};
  auto r = generate(*model, &*tok_, prompt, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->finish, FinishReason::kEosToken);
  ASSERT_EQ(r->tokens.size(), 3u);
  EXPECT_EQ(r->tokens.back().id, 0);
  EXPECT_TRUE(r->tokens.back().special);
  EXPECT_EQ(r->tokens.back().token_text, "<|endoftext|>");
  EXPECT_EQ(r->text, *tok_->decode(std::span(cont).first(2)));

  o.ignore_eos = true;
  o.max_new_tokens = 4;
  auto ig = generate(*model, &*tok_, prompt, o);
  ASSERT_TRUE(ig.ok());
  EXPECT_EQ(ig->finish, FinishReason::kLength);
  EXPECT_EQ(ig->tokens.size(), 4u);
}

TEST_F(GenerateTest, EosIdsDefaultToGenerationConfig) {
  const auto prompt = enc("Hello");
  auto cont = enc(" there");
  cont.push_back(0);
  auto model = make(prompt, cont);
  GenerateOptions o;  // eos_ids empty → generation_config.json of the model dir (0)
  auto r = generate(*model, &*tok_, prompt, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->finish, FinishReason::kEosToken);
}

TEST_F(GenerateTest, StopStringSpanningTokensIsNotEmitted) {
  const auto prompt = enc("It was");
  const std::string cont_text = " the old man said that the sea was calm";
  const auto cont = enc(cont_text);
  auto model = make(prompt, cont);
  GenerateOptions o;
  o.max_new_tokens = 30;
  o.stop = {"man sa"};  // spans " man" and " said"
  std::string streamed;
  auto r = generate(*model, &*tok_, prompt, o, [&](const TokenEvent& ev) {
    streamed += ev.text_delta;
    return true;
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->finish, FinishReason::kStopSequence);
  EXPECT_EQ(r->text, " the old ");
  EXPECT_EQ(streamed, " the old ");
}

// An empty stop string (it would stop before the first token) and stop strings without a tokenizer
// (nothing to match them in) are errors naming the fault, as mamba-cli's --stop and the server
// refuse an empty one; generate() went on, silently ignoring them.
TEST_F(GenerateTest, AnEmptyStopStringOrStopStringsWithoutATokenizerAreErrors) {
  const auto prompt = enc("It was");
  auto model = make(prompt, enc(" the old man"));
  GenerateOptions o;
  o.max_new_tokens = 3;
  o.stop = {"man", ""};
  auto empty = generate(*model, &*tok_, prompt, o);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(empty.error().message.find("stop string 1 is empty"), std::string::npos) << empty.error().message;
  o.stop = {"man"};
  auto no_tok = generate(*model, nullptr, prompt, o);
  ASSERT_FALSE(no_tok.ok());
  EXPECT_NE(no_tok.error().message.find("1 stop string(s) given without a tokenizer"), std::string::npos) << no_tok.error().message;
  SequenceGenerator g(nullptr, 8, o, {});
  std::vector<float> row(8, 0.0f);
  auto r = g.next(row);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("without a tokenizer"), std::string::npos) << r.error().message;
  o.stop.clear();
  EXPECT_TRUE(generate(*model, nullptr, prompt, o).ok()) << "ids only, no stop strings: fine";
}

TEST_F(GenerateTest, LogprobsAreOverTokenizerIdsAndTopIsDescending) {
  const auto prompt = enc("The sea was");
  const auto cont = enc(" calm and grey");
  auto model = make(prompt, cont);
  GenerateOptions o;
  o.max_new_tokens = 3;
  o.top_logprobs = 3;
  o.prompt_logprobs = true;
  auto r = generate(*model, &*tok_, prompt, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto v = tok_->size();
  for (std::size_t i = 0; i < r->tokens.size(); ++i) {
    const auto& ev = r->tokens[i];
    EXPECT_EQ(ev.id, cont[i]);
    ASSERT_EQ(ev.top.size(), 3u);
    EXPECT_EQ(ev.top[0].first, cont[i]);
    EXPECT_EQ(ev.top[1].first, (cont[i] + 1) % v);
    EXPECT_NEAR(ev.top[0].second, expected_logprob(10, v), 1e-5);
    EXPECT_NEAR(ev.top[1].second, expected_logprob(5, v), 1e-5);
    EXPECT_NEAR(ev.top[2].second, expected_logprob(0, v), 1e-5);
    for (const auto& [id, lp] : ev.top) EXPECT_LT(id, v) << "a padded row appeared in top_logprobs";
  }
  ASSERT_EQ(r->prompt_logprobs.size(), prompt.size() - 1);
  for (float lp : r->prompt_logprobs) EXPECT_NEAR(lp, expected_logprob(10, v), 1e-5);
}

TEST(TopLogprobs, DescendingTiesByIdAndShortRows) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> row = {-3.0f, -1.0f, -inf, -1.0f, -0.5f, -3.0f, -inf};
  using Top = std::vector<std::pair<std::int32_t, float>>;
  EXPECT_EQ(top_logprobs(row, 4), (Top{{4, -0.5f}, {1, -1.0f}, {3, -1.0f}, {0, -3.0f}}));
  EXPECT_EQ(top_logprobs(row, 1), (Top{{4, -0.5f}}));
  EXPECT_EQ(top_logprobs(row, 7), (Top{{4, -0.5f}, {1, -1.0f}, {3, -1.0f}, {0, -3.0f}, {5, -3.0f}, {2, -inf}, {6, -inf}}));
  EXPECT_EQ(top_logprobs(row, 20).size(), row.size());
  EXPECT_TRUE(top_logprobs(row, 0).empty());
  EXPECT_TRUE(top_logprobs({}, 3).empty());
}

TEST_F(GenerateTest, SamplingNeverDrawsPaddedRows) {
  const auto prompt = enc("A");
  auto model = make(prompt, {});
  GenerateOptions o;
  o.max_new_tokens = 200;
  o.ignore_eos = true;
  o.sampling.temperature = 2.0f;
  o.sampling.do_sample = true;
  o.sampling.has_seed = true;
  o.sampling.seed = 3;
  auto r = generate(*model, &*tok_, prompt, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  for (const auto& ev : r->tokens) EXPECT_LT(ev.id, tok_->size());
  auto again = generate(*model, &*tok_, prompt, o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(r->text, again->text) << "same seed, same output";
}

TEST_F(GenerateTest, LongPromptIsPrefilledInChunkAlignedPiecesWithProgress) {
  const std::vector<std::int32_t> prompt = filler_prompt(1500);
  const auto cont = enc(" end");
  auto model = make(prompt, cont);
  GenerateOptions o;
  o.max_new_tokens = static_cast<int>(cont.size());
  o.prompt_logprobs = true;
  std::vector<std::pair<std::int64_t, std::int64_t>> progress;
  o.on_prefill_progress = [&](std::int64_t d, std::int64_t t) { progress.emplace_back(d, t); };
  auto r = generate(*model, &*tok_, prompt, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(model->prefill_calls, (std::vector<std::int64_t>{1024, 476}));  // 1024 = 16 chunks of 64
  EXPECT_EQ(progress, (std::vector<std::pair<std::int64_t, std::int64_t>>{{1024, 1500}, {1500, 1500}}));
  EXPECT_EQ(r->prompt_logprobs.size(), 1499u);
  EXPECT_EQ(r->text, " end");
}

// should_stop is polled between prefill pieces (Ctrl-C during a long prompt ends it at the next
// piece instead of after the whole prefill and one more token) and before each token.
TEST_F(GenerateTest, ShouldStopEndsThePrefillBetweenPiecesAndTheDecodeBetweenTokens) {
  const std::vector<std::int32_t> prompt = filler_prompt(2500);
  const auto cont = enc(" four five six seven");
  auto model = make(prompt, cont);
  GenerateOptions o;
  o.max_new_tokens = 10;
  int polls = 0;
  o.should_stop = [&] { return ++polls >= 2; };  // stop at the second poll: after the second piece
  auto r = generate(*model, &*tok_, prompt, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->finish, FinishReason::kCancelled);
  EXPECT_TRUE(r->tokens.empty());
  EXPECT_EQ(model->prefill_calls, (std::vector<std::int64_t>{1024, 1024}));  // the third piece never ran

  auto model2 = make(prompt, cont);
  polls = 0;
  o.should_stop = [&] { return ++polls >= 3 + 2; };  // 3 prefill pieces, then stop before the third token
  auto d = generate(*model2, &*tok_, prompt, o);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->finish, FinishReason::kCancelled);
  EXPECT_EQ(d->tokens.size(), 2u);
  EXPECT_EQ(model2->prefill_calls, (std::vector<std::int64_t>{1024, 1024, 452}));
}

// Text a partial stop-string match holds back is released at a cancellation, by either path
// (on_token returning false, should_stop), as cancelled_tail: streamed deltas + tail == text.
TEST_F(GenerateTest, CancellationReleasesTheHeldBackTextAsTheTail) {
  const auto prompt = enc("One two three");
  const auto cont = enc(" four five six seven");
  for (const bool by_should_stop : {false, true}) {
    for (const bool keep : {true, false}) {
      auto model = make(prompt, cont);
      GenerateOptions o;
      o.max_new_tokens = 10;
      o.stop = {"five six"};  // "five" may start it: held back
      o.keep_output = keep;
      int polls = 0;
      if (by_should_stop) o.should_stop = [&] { return ++polls >= 3; };  // after the prefill's and the first token's polls
      std::string streamed;
      int seen = 0;
      auto r = generate(*model, &*tok_, prompt, o, [&](const TokenEvent& ev) {
        streamed += ev.text_delta;
        return by_should_stop || ++seen < 2;
      });
      ASSERT_TRUE(r.ok()) << r.error().message;
      EXPECT_EQ(r->finish, FinishReason::kCancelled);
      EXPECT_EQ(r->n_generated, 2);
      EXPECT_EQ(streamed, " four ");  // the space before "five" is no part of the stop string
      EXPECT_EQ(r->cancelled_tail, "five");
      EXPECT_EQ(r->text, keep ? " four five" : "");
    }
  }
}

TEST_F(GenerateTest, CancelAndErrors) {
  const auto prompt = enc("One two three");
  const auto cont = enc(" four five six seven");
  auto model = make(prompt, cont);
  GenerateOptions o;
  o.max_new_tokens = 10;
  int seen = 0;
  auto r = generate(*model, &*tok_, prompt, o, [&](const TokenEvent&) { return ++seen < 2; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->finish, FinishReason::kCancelled);
  EXPECT_EQ(r->tokens.size(), 2u);

  model->nan_at = static_cast<std::int64_t>(prompt.size()) + 1;  // the second decode row
  auto bad = generate(*model, &*tok_, prompt, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kNumerical);
  model->nan_at = -1;

  EXPECT_FALSE(generate(*model, &*tok_, std::vector<std::int32_t>{}, o).ok());
  const std::vector<std::int32_t> out_of_range{1, static_cast<std::int32_t>(model->logits_width())};
  auto oor = generate(*model, &*tok_, out_of_range, o);
  ASSERT_FALSE(oor.ok());
  EXPECT_NE(oor.error().message.find("outside the vocabulary"), std::string::npos);
  // A padded logits row (past the tokenizer's ids) is no token either, as in perplexity and the
  // server; without a tokenizer the config's vocab_size bounds the ids (a state-spaces checkpoint
  // pads its 50277 ids to 50280 rows).
  const std::vector<std::int32_t> padding{1, static_cast<std::int32_t>(tok_->size())};
  auto pad = generate(*model, &*tok_, padding, o);
  ASSERT_FALSE(pad.ok());
  EXPECT_NE(pad.error().message.find(fmt::format("outside the vocabulary [0, {})", tok_->size())), std::string::npos)
      << pad.error().message;
  const std::int64_t cfg_vocab = model->config().vocab_size;
  ASSERT_LT(cfg_vocab, model->logits_width());
  auto pad_no_tok = generate(*model, nullptr, std::vector<std::int32_t>{1, static_cast<std::int32_t>(cfg_vocab)}, o);
  ASSERT_FALSE(pad_no_tok.ok());
  EXPECT_NE(pad_no_tok.error().message.find(fmt::format("outside the vocabulary [0, {})", cfg_vocab)), std::string::npos)
      << pad_no_tok.error().message;
  EXPECT_TRUE(generate(*model, nullptr, std::vector<std::int32_t>{1, static_cast<std::int32_t>(cfg_vocab - 1)}, o).ok());
  GenerateOptions bad_eos = o;  // an EOS id no logits row has could never end a sequence
  bad_eos.eos_ids = {-5};
  auto be = generate(*model, &*tok_, prompt, bad_eos);
  ASSERT_FALSE(be.ok());
  EXPECT_NE(be.error().message.find("eos_ids holds -5"), std::string::npos) << be.error().message;
  GenerateOptions badp = o;
  badp.sampling.top_p = 0.0f;
  auto bp = generate(*model, &*tok_, prompt, badp);
  ASSERT_FALSE(bp.ok());
  EXPECT_NE(bp.error().message.find("top_p"), std::string::npos);
}

// With a SentencePiece-style decoder (the first token's leading space dropped, as Mistral's and
// Llama's tokenizers do) the generated text continues the prompt's: "▁a" generated after a prompt
// reads " a" (TGI's and vLLM's incremental detokenization), and the details text is " a" too.
TEST(SequenceGenerator, TextContinuesThePromptsWithAMetaspaceDecoder) {
  const char* json = R"({"version":"1.0","added_tokens":[],"normalizer":null,
    "pre_tokenizer":{"type":"Metaspace","replacement":"\u2581","prepend_scheme":"first","split":true},
    "post_processor":null,
    "decoder":{"type":"Metaspace","replacement":"\u2581","prepend_scheme":"first","split":true},
    "model":{"type":"BPE","unk_token":"<unk>","vocab":{"<unk>":0,"\u2581":1,"a":2,"b":3,"\u2581a":4},
             "merges":[["\u2581","a"]]}})";
  auto tok = Tokenizer::from_json_text(json, "metaspace.json");
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  ASSERT_EQ(*tok->encode("a a"), (std::vector<std::int32_t>{4, 4}));
  GenerateOptions o;
  o.max_new_tokens = 2;
  for (bool with_prompt : {true, false}) {
    SequenceGenerator g(&*tok, 5, o, {});
    if (with_prompt) g.observe_prompt(std::vector<std::int32_t>{4});
    std::vector<float> row{0, 0, 0, 0, 9};
    auto a = g.next(row);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->token_text, " a");
    row = {0, 0, 0, 9, 0};
    ASSERT_TRUE(g.next(row).ok());
    g.flush();
    EXPECT_EQ(g.text(), with_prompt ? " ab" : "ab");  // without a prompt: decode(ids), as HF
  }
}

TEST(SequenceGenerator, IdsOnlyWithoutTokenizer) {
  GenerateOptions o;
  o.max_new_tokens = 3;
  SequenceGenerator g(nullptr, 6, o, {4});
  std::vector<float> row{0, 1, 0, 0, 0, 0};
  auto a = g.next(row);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->id, 1);
  EXPECT_EQ(a->text_delta, "");
  // Without a tokenizer logprobs are over the full width.
  EXPECT_NEAR(a->logprob, 1.0 - std::log(std::exp(1.0) + 5.0), 1e-6);
  row = {0, 0, 0, 0, 9, 0};
  auto b = g.next(row);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->id, 4);
  EXPECT_TRUE(g.finished());
  EXPECT_EQ(g.finish_reason(), FinishReason::kEosToken);
  EXPECT_EQ(g.generated_ids(), (std::vector<std::int32_t>{1, 4}));
  EXPECT_FALSE(g.next(row).ok()) << "next() after finish is an error";
}

// A vocabulary limit below 1 is an error of next() (it was clamped to 1: every sample was id 0).
// Move-only: a copy would share the sampler's random stream.
static_assert(!std::is_copy_constructible_v<SequenceGenerator> && std::is_nothrow_move_constructible_v<SequenceGenerator>);
TEST(SequenceGenerator, VocabLimitBelowOneIsAnError) {
  GenerateOptions o;
  o.max_new_tokens = 3;
  for (std::int64_t limit : {0, -5}) {
    SequenceGenerator g(nullptr, limit, o, {});
    std::vector<float> row{0, 1, 0};
    auto r = g.next(row);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find(fmt::format("vocab_limit = {} must be >= 1", limit)), std::string::npos) << r.error().message;
    EXPECT_EQ(g.finish_reason(), FinishReason::kError);
  }
  // As generate(): max_new_tokens < 0 and a negative EOS id are errors (they were accepted).
  GenerateOptions negative = o;
  negative.max_new_tokens = -3;
  SequenceGenerator neg(nullptr, 3, negative, {});
  std::vector<float> r3{0, 1, 0};
  auto rn = neg.next(r3);
  ASSERT_FALSE(rn.ok());
  EXPECT_NE(rn.error().message.find("max_new_tokens = -3 must be >= 0"), std::string::npos) << rn.error().message;
  SequenceGenerator bad_eos(nullptr, 3, o, {2, -3});
  auto re = bad_eos.next(r3);
  ASSERT_FALSE(re.ok());
  EXPECT_NE(re.error().message.find("eos_ids holds -3"), std::string::npos) << re.error().message;
  SequenceGenerator moved = SequenceGenerator(nullptr, 2, o, {});
  std::vector<float> row{0, 1};
  auto r = moved.next(row);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->id, 1);
}

TEST(ModelEosIds, GenerationConfigThenConfig) {
  ModelConfig cfg;
  cfg.eos_token_ids = {7};
  cfg.vocab_size = 10;
  auto emb = model_eos_ids(model_dir(), cfg);
  ASSERT_TRUE(emb.ok());
  EXPECT_EQ(*emb, std::vector<std::int32_t>{0});
  const auto dir = std::filesystem::path(test::binary_dir()) / "eos-test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": [2, 3]})";
  auto list = model_eos_ids(dir.string(), cfg);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (std::vector<std::int32_t>{2, 3}));
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": "x"})";
  auto bad = model_eos_ids(dir.string(), cfg);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("generation_config.json"), std::string::npos);
  // As config.json's: an id the model cannot generate is an error, and so is broken JSON (named so).
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": [2, 10]})";
  auto oov = model_eos_ids(dir.string(), cfg);
  ASSERT_FALSE(oov.ok());
  EXPECT_NE(oov.error().message.find("eos_token_id = 10: expected a token id in [0, vocab_size = 10)"), std::string::npos)
      << oov.error().message;
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": )";
  auto broken = model_eos_ids(dir.string(), cfg);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.error().message.find("generation_config.json: invalid JSON"), std::string::npos) << broken.error().message;
  std::ofstream(dir / "generation_config.json") << R"([1, 2])";
  auto array = model_eos_ids(dir.string(), cfg);
  ASSERT_FALSE(array.ok());
  EXPECT_NE(array.error().message.find("expected a JSON object, got array"), std::string::npos) << array.error().message;
  std::filesystem::remove(dir / "generation_config.json");
  auto fallback = model_eos_ids(dir.string(), cfg);
  ASSERT_TRUE(fallback.ok());
  EXPECT_EQ(*fallback, std::vector<std::int32_t>{7});
}

// A model without EOS (the original state-spaces config.json) stops at the tokenizer's: its
// tokenizer_config.json eos_token, else a special <|endoftext|>; the model's own ids win.
TEST(ModelEosIds, TokenizerFallback) {
  auto make_tok = [](bool eot_special) {
    const std::string json = std::string(R"({"version": "1.0", "added_tokens": [
        {"id": 3, "content": "<|endoftext|>", "special": )") + (eot_special ? "true" : "false") +
                             R"(, "normalized": false, "lstrip": false, "rstrip": false, "single_word": false},
        {"id": 4, "content": "</s>", "special": true, "normalized": false, "lstrip": false, "rstrip": false, "single_word": false}],
      "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": null,
      "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2}, "merges": []}})";
    auto t = Tokenizer::from_json_text(json, "eos-tok.json");
    EXPECT_TRUE(t.ok()) << t.error().message;
    return std::move(t).value();
  };
  const Tokenizer tok = make_tok(true);
  ModelConfig cfg;
  cfg.vocab_size = 8;
  const auto dir = std::filesystem::path(test::binary_dir()) / "eos-tok-test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto none = model_eos_ids(dir.string(), cfg);  // no tokenizer given: no EOS
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto eot = model_eos_ids(dir.string(), cfg, &tok);
  ASSERT_TRUE(eot.ok()) << eot.error().message;
  EXPECT_EQ(*eot, std::vector<std::int32_t>{3});
  // <|endoftext|> not flagged special is text, not an EOS.
  const Tokenizer plain = make_tok(false);
  auto not_special = model_eos_ids(dir.string(), cfg, &plain);
  ASSERT_TRUE(not_special.ok());
  EXPECT_TRUE(not_special->empty());
  // tokenizer_config.json's eos_token, as a string or an AddedToken object.
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": "</s>"})";
  auto cfg_str = model_eos_ids(dir.string(), cfg, &tok);
  ASSERT_TRUE(cfg_str.ok());
  EXPECT_EQ(*cfg_str, std::vector<std::int32_t>{4});
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": {"content": "</s>", "special": true}})";
  auto cfg_obj = model_eos_ids(dir.string(), cfg, &tok);
  ASSERT_TRUE(cfg_obj.ok());
  EXPECT_EQ(*cfg_obj, std::vector<std::int32_t>{4});
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": 5})";
  auto bad = model_eos_ids(dir.string(), cfg, &tok);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("tokenizer_config.json: eos_token: expected a string, got 5"), std::string::npos)
      << bad.error().message;
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": {"content": 5}})";
  auto bad_content = model_eos_ids(dir.string(), cfg, &tok);
  ASSERT_FALSE(bad_content.ok());
  EXPECT_NE(bad_content.error().message.find("tokenizer_config.json: eos_token.content: expected a string, got 5"), std::string::npos)
      << bad_content.error().message;
  // An eos_token the tokenizer does not know falls back to <|endoftext|>.
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": "<eos>"})";
  auto unknown = model_eos_ids(dir.string(), cfg, &tok);
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(*unknown, std::vector<std::int32_t>{3});
  // The model's own EOS wins over the tokenizer's; an id past the model's vocabulary is not used
  // (the next candidate is: <|endoftext|>, id 3, below vocab_size 4).
  cfg.eos_token_ids = {1};
  auto own = model_eos_ids(dir.string(), cfg, &tok);
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(*own, std::vector<std::int32_t>{1});
  cfg.eos_token_ids.clear();
  cfg.vocab_size = 4;
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": "</s>"})";
  auto past = model_eos_ids(dir.string(), cfg, &tok);
  ASSERT_TRUE(past.ok());
  EXPECT_EQ(*past, std::vector<std::int32_t>{3});
  cfg.vocab_size = 3;
  auto none_below = model_eos_ids(dir.string(), cfg, &tok);
  ASSERT_TRUE(none_below.ok());
  EXPECT_TRUE(none_below->empty());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mamba
