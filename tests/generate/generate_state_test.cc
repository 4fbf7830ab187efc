// generate() continuing from a caller's State (prompt caching, branching, a second turn) and the
// EOS ids a loaded model keeps from its generation_config.json and tokenizer_config.json, on the
// embedded model.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "mamba/checkpoint.h"
#include "mamba/generate.h"
#include "mamba/model.h"
#include "mamba/tokenizer.h"
#include "common/test_util.h"

namespace mamba {
namespace {

namespace fs = std::filesystem;

std::string model_dir() { return test::source_dir() + "/models/mamba2-books-7m-bpe8k"; }

class GenerateStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The exact tier: these tests compare a state continued through decode steps with one prefill
    // of everything, which the bf16 tier (auto's choice for this bf16 model on AVX-512 BF16 CPUs)
    // matches only within its rounding (tests/models/bf16_tier_test.cc), flipping near-ties.
    auto m = Model::load(model_dir(), test::exact_tier());
    ASSERT_TRUE(m.ok()) << m.error().message;
    model_ = std::move(*m);
    auto tok = Tokenizer::from_file(model_dir() + "/tokenizer.json");
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    tok_.emplace(std::move(*tok));
  }
  std::vector<std::int32_t> enc(const std::string& s) { return *tok_->encode(s); }
  static std::vector<std::int32_t> ids(const GenerateResult& r) {
    std::vector<std::int32_t> out;
    for (const auto& ev : r.tokens) out.push_back(ev.id);
    return out;
  }
  static GenerateOptions greedy(int n) {
    GenerateOptions o;
    o.max_new_tokens = n;
    o.ignore_eos = true;
    return o;
  }
  /// generate() with `o` (3 tokens at most) stops at its EOS, the second token.
  void expect_eos_after_two(Model& m, const std::vector<std::int32_t>& prompt, const GenerateOptions& o) {
    auto r = generate(m, &*tok_, prompt, o);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->finish, FinishReason::kEosToken);
    EXPECT_EQ(r->tokens.size(), 2u);
  }
  std::unique_ptr<Model> model_;
  std::optional<Tokenizer> tok_;
};

// A prefix prefilled once (max_new_tokens 0), then its last token fed with the generation, gives
// the one-call generation — from two clones of the prefix's state alike.
TEST_F(GenerateStateTest, CachedPrefixGivesTheOneCallGeneration) {
  const auto prompt = enc("It was a dark and stormy night, and the old man");
  ASSERT_GT(prompt.size(), 3u);
  auto whole = generate(*model_, &*tok_, prompt, greedy(16));
  ASSERT_TRUE(whole.ok()) << whole.error().message;

  State prefix = model_->new_state();
  const std::span<const std::int32_t> p(prompt);
  auto pre = generate(*model_, &*tok_, prefix, p.first(p.size() - 1), greedy(0));
  ASSERT_TRUE(pre.ok()) << pre.error().message;
  EXPECT_TRUE(pre->tokens.empty());
  EXPECT_EQ(pre->finish, FinishReason::kLength);
  EXPECT_EQ(prefix.position, static_cast<std::int64_t>(prompt.size()) - 1);  // the whole (shortened) prompt
  for (int branch = 0; branch < 2; ++branch) {
    State s = prefix.clone();
    auto r = generate(*model_, &*tok_, s, p.last(1), greedy(16));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(ids(*r), ids(*whole)) << "branch " << branch;
    EXPECT_EQ(r->text, whole->text);
    for (std::size_t i = 0; i < r->tokens.size(); ++i) EXPECT_NEAR(r->tokens[i].logprob, whole->tokens[i].logprob, 1e-4);
    // Every generated token but the last is in the state.
    EXPECT_EQ(s.position, static_cast<std::int64_t>(prompt.size()) + 16 - 1);
  }
  EXPECT_EQ(prefix.position, static_cast<std::int64_t>(prompt.size()) - 1);  // the clones left it alone
}

// copy_from into another state of the model (no allocation) continues as the original does; a
// state of another shape is refused and left unchanged.
TEST_F(GenerateStateTest, CopyFromContinuesAsTheOriginal) {
  const auto prompt = enc("It was a dark and stormy night");
  State a = model_->new_state();
  auto first = generate(*model_, &*tok_, a, prompt, greedy(4));
  ASSERT_TRUE(first.ok()) << first.error().message;
  State b = model_->new_state();
  const void* b_data = b.ssm_state[0].data<void>();
  ASSERT_TRUE(b.copy_from(a));
  EXPECT_EQ(b.ssm_state[0].data<void>(), b_data);  // its own tensors, overwritten
  EXPECT_EQ(b.position, a.position);
  const std::vector<std::int32_t> next = {ids(*first).back()};
  auto ra = generate(*model_, &*tok_, a, next, greedy(8));
  auto rb = generate(*model_, &*tok_, b, next, greedy(8));
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(ids(*rb), ids(*ra));
  for (std::size_t i = 0; i < ra->tokens.size(); ++i) EXPECT_EQ(rb->tokens[i].logprob, ra->tokens[i].logprob);  // bitwise
  State other;  // no tensors
  const std::int64_t pos = b.position;
  EXPECT_FALSE(b.copy_from(other));
  EXPECT_EQ(b.position, pos);
}

// Turn 2 (its prompt = turn 1's last token + new text) continues turn 1's state: the same tokens as
// one generation over turn 1's prompt, its generated ids and turn 2's text.
TEST_F(GenerateStateTest, SecondTurnContinuesTheFirst) {
  const auto p1 = enc("The sea was calm");
  const auto p2 = enc(" and then the wind");
  State s = model_->new_state();
  auto t1 = generate(*model_, &*tok_, s, p1, greedy(6));
  ASSERT_TRUE(t1.ok()) << t1.error().message;
  ASSERT_EQ(t1->tokens.size(), 6u);
  std::vector<std::int32_t> turn2{t1->tokens.back().id};
  turn2.insert(turn2.end(), p2.begin(), p2.end());
  auto t2 = generate(*model_, &*tok_, s, turn2, greedy(10));
  ASSERT_TRUE(t2.ok()) << t2.error().message;

  std::vector<std::int32_t> all = p1;
  for (auto id : ids(*t1)) all.push_back(id);
  all.insert(all.end(), p2.begin(), p2.end());
  auto once = generate(*model_, &*tok_, all, greedy(10));
  ASSERT_TRUE(once.ok()) << once.error().message;
  EXPECT_EQ(ids(*t2), ids(*once));
  for (std::size_t i = 0; i < t2->tokens.size(); ++i) EXPECT_NEAR(t2->tokens[i].logprob, once->tokens[i].logprob, 1e-4);
}

// Cancelled by should_stop after some tokens: the state holds every generated token but the last,
// as for any other finish (it had consumed the last one too), so the next turn continues exactly.
TEST_F(GenerateStateTest, CancelledGenerationLeavesTheLastTokenOut) {
  const auto p1 = enc("The sea was calm and the old man");
  State s = model_->new_state();
  GenerateOptions o = greedy(20);
  int polls = 0;
  o.should_stop = [&] { return ++polls == 5; };  // one poll after the prefill, then one per token
  auto t1 = generate(*model_, &*tok_, s, p1, o);
  ASSERT_TRUE(t1.ok()) << t1.error().message;
  EXPECT_EQ(t1->finish, FinishReason::kCancelled);
  ASSERT_EQ(t1->tokens.size(), 4u);
  EXPECT_EQ(s.position, static_cast<std::int64_t>(p1.size() + t1->tokens.size()) - 1);
  std::vector<std::int32_t> turn2{t1->tokens.back().id, 42, 43};
  auto t2 = generate(*model_, &*tok_, s, turn2, greedy(6));
  ASSERT_TRUE(t2.ok()) << t2.error().message;
  std::vector<std::int32_t> all = p1;
  for (auto id : ids(*t1)) all.push_back(id);
  all.insert(all.end(), {42, 43});
  auto once = generate(*model_, &*tok_, all, greedy(6));
  ASSERT_TRUE(once.ok());
  EXPECT_EQ(ids(*t2), ids(*once));
}

// A long prompt fed to a state that does not start at a piece boundary: generate()'s pieces end at
// absolute positions, so the state is bitwise what one Model::prefill of the prompt gives from the
// same state (they were counted from the prompt's start: 3 + 1024 was not a chunk boundary).
TEST_F(GenerateStateTest, LongPromptOnAContinuedStateMatchesOnePrefillBitwise) {
  std::vector<std::int32_t> prompt(2500);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<std::int32_t>(100 + (i * 37) % 3000);
  const std::vector<std::int32_t> head{5, 6, 7};
  State a = model_->new_state(), b = model_->new_state();
  std::vector<float> logits(static_cast<std::size_t>(model_->logits_width()));
  ASSERT_TRUE(model_->prefill(head, a, LogitsMode::kNone, nullptr).ok());
  ASSERT_TRUE(model_->prefill(head, b, LogitsMode::kNone, nullptr).ok());
  ASSERT_TRUE(generate(*model_, &*tok_, a, prompt, greedy(0)).ok());
  ASSERT_TRUE(model_->prefill(prompt, b, LogitsMode::kNone, nullptr).ok());
  ASSERT_EQ(a.position, b.position);
  std::vector<float> la(logits.size()), lb(logits.size());
  const std::int32_t next[1] = {9};
  State* sa[1] = {&a};
  State* sb[1] = {&b};
  ASSERT_TRUE(model_->step(next, sa, la.data()).ok());
  ASSERT_TRUE(model_->step(next, sb, lb.data()).ok());
  EXPECT_EQ(la, lb);
}

// A state of another shape is refused before anything runs, and the state is untouched.
TEST_F(GenerateStateTest, ForeignStateIsRefused) {
  State s;  // no tensors
  auto r = generate(*model_, &*tok_, s, enc("Hello"), greedy(4));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << r.error().message;
  EXPECT_EQ(s.position, 0);
}

// generation_config.json is read when the model loads (as transformers' from_pretrained): editing or
// deleting it afterwards does not change where generate() stops; a broken one fails the first
// generation that needs it (naming the file), not the load.
TEST_F(GenerateStateTest, EosIdsAreThoseReadAtLoad) {
  const fs::path dir = fs::path(test::binary_dir()) / "generate-state-eos";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"}) fs::copy_file(fs::path(model_dir()) / f, dir / f);
  const auto prompt = enc("It was a dark and stormy night");
  auto plain = generate(*model_, &*tok_, prompt, greedy(3));
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  const std::int32_t second = plain->tokens[1].id;  // made the EOS: generation ends at token 2

  std::ofstream(dir / "generation_config.json") << "{\"eos_token_id\": [" << second << "]}";
  auto m = Model::load(dir.string());
  ASSERT_TRUE(m.ok()) << m.error().message;
  fs::remove(dir / "generation_config.json");
  GenerateOptions o;
  o.max_new_tokens = 3;
  expect_eos_after_two(**m, prompt, o);
  auto eos = model_eos_ids(**m, &*tok_);
  ASSERT_TRUE(eos.ok());
  EXPECT_EQ(*eos, std::vector<std::int32_t>{second});
  // The directory-based lookup reads the files as they are now: config.json's EOS.
  auto now = model_eos_ids(dir.string(), (*m)->config(), &*tok_);
  ASSERT_TRUE(now.ok());
  EXPECT_NE(*now, std::vector<std::int32_t>{second});

  std::ofstream(dir / "generation_config.json") << "{\"eos_token_id\": ";
  auto broken = Model::load(dir.string());
  ASSERT_TRUE(broken.ok()) << broken.error().message;  // usable for prefill, quantize, inspect
  auto g = generate(**broken, &*tok_, prompt, o);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message.find("generation_config.json: invalid JSON"), std::string::npos) << g.error().message;
  o.eos_ids = {second};  // given by the caller: the file is not needed
  EXPECT_TRUE(generate(**broken, &*tok_, prompt, o).ok());
  fs::remove_all(dir);
}

// With no EOS in generation_config.json or config.json (the state-spaces checkpoints), the
// tokenizer's EOS comes from the model directory's tokenizer_config.json as read at load too: an
// edit afterwards changes nothing, a broken file fails the first generation that needs it.
TEST_F(GenerateStateTest, TokenizerConfigEosIsReadAtLoad) {
  const fs::path dir = fs::path(test::binary_dir()) / "generate-state-tokenizer-eos";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"model.safetensors", "tokenizer.json"}) fs::copy_file(fs::path(model_dir()) / f, dir / f);
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(fs::path(model_dir()) / "config.json"));
  cfg.erase("eos_token_id");
  std::ofstream(dir / "config.json") << cfg.dump();
  const auto prompt = enc("It was a dark and stormy night");
  auto plain = generate(*model_, &*tok_, prompt, greedy(3));
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  const std::int32_t second = plain->tokens[1].id;
  const std::optional<std::string> second_text = tok_->id_to_token(second);
  ASSERT_TRUE(second_text.has_value());

  std::ofstream(dir / "tokenizer_config.json") << nlohmann::json{{"eos_token", {{"content", *second_text}}}}.dump();
  auto m = Model::load(dir.string());
  ASSERT_TRUE(m.ok()) << m.error().message;
  std::ofstream(dir / "tokenizer_config.json") << "{\"eos_token\": 5}";  // edited after the load: not read
  GenerateOptions o;
  o.max_new_tokens = 3;
  expect_eos_after_two(**m, prompt, o);
  // The model's directory spelled another way is still the one read at load; another directory's
  // tokenizer_config.json is read now (here: the broken one, copied).
  auto same = model_eos_ids(**m, &*tok_, (dir / ".").string());
  ASSERT_TRUE(same.ok()) << same.error().message;
  EXPECT_EQ(*same, std::vector<std::int32_t>{second});
  const fs::path other_dir = dir / "other-tokenizer";
  fs::create_directories(other_dir);
  fs::copy_file(dir / "tokenizer_config.json", other_dir / "tokenizer_config.json");
  auto other = model_eos_ids(**m, &*tok_, other_dir.string());
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message.find("tokenizer_config.json: eos_token: expected a string, got 5"), std::string::npos)
      << other.error().message;

  auto broken = Model::load(dir.string());
  ASSERT_TRUE(broken.ok()) << broken.error().message;
  auto g = generate(**broken, &*tok_, prompt, o);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().code, ErrorCode::kFormat) << g.error().message;
  EXPECT_NE(g.error().message.find("tokenizer_config.json: eos_token: expected a string, got 5"), std::string::npos)
      << g.error().message;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mamba
