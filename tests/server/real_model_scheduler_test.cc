// Scheduler on real checkpoints (../shared fixtures): concurrent requests under several prefill
// budgets and decode batch sizes give, bitwise, the ids, logprobs and prompt logprobs that each
// request gets alone. mamba2-odd (chunk_size 8, n_groups 4) makes prompts split into several
// SSD-chunk-aligned pieces; mamba1-odd covers the Mamba-1 path.
#include <gtest/gtest.h>

#include <algorithm>

#include <chrono>
#include <random>

#include "common/test_util.h"
#include "mamba/model.h"
#include "server/scheduler.h"
#include "server/stream_outcome.h"

namespace mamba::server {
namespace {

using namespace std::chrono_literals;

using test::drain;
using test::Outcome;

std::vector<SequenceRequest> make_requests(std::int64_t vocab) {
  std::mt19937 rng(7);
  std::vector<SequenceRequest> reqs;
  for (int i = 0; i < 12; ++i) {
    SequenceRequest r;
    const int len = 1 + (i * 5) % 37;
    for (int k = 0; k < len; ++k) r.prompt.push_back(static_cast<std::int32_t>(rng() % static_cast<std::uint32_t>(vocab)));
    r.opts.max_new_tokens = 3 + i % 5;
    r.opts.top_logprobs = i % 3;
    r.opts.prompt_logprobs = i % 2 == 0;
    r.opts.ignore_eos = true;  // fixtures have no EOS worth stopping at
    if (i % 4 == 1) {
      r.opts.sampling.do_sample = true;
      r.opts.sampling.temperature = 0.7f;
      r.opts.sampling.seed = 11 + static_cast<std::uint64_t>(i);
      r.opts.sampling.has_seed = true;
    }
    reqs.push_back(std::move(r));
  }
  return reqs;
}

/// Runs `reqs` through a scheduler with `so` (all submitted at once) and expects each request's ids,
/// logprobs, top logprobs and prompt logprobs to be bitwise `alone[i]`'s. Returns the scheduler's
/// prefill budget (as raised to a granule).
std::int64_t expect_as_alone(Model& m, const std::vector<SequenceRequest>& reqs, const std::vector<Outcome>& alone,
                             const SchedulerOptions& so, Metrics& metrics) {
  Scheduler sch(m, nullptr, {}, so, metrics);
  sch.start();
  // A prompt group's choices together (submit_all, as the server submits them): one at a time, the
  // scheduler could start the first one's prefill before the next was queued (then each prefills).
  std::vector<std::shared_ptr<RequestStream>> ss;
  for (std::size_t i = 0; i < reqs.size();) {
    std::size_t j = i + 1;
    while (reqs[i].prompt_group != 0 && j < reqs.size() && reqs[j].prompt_group == reqs[i].prompt_group) ++j;
    const std::vector<SequenceRequest> group(reqs.begin() + static_cast<std::ptrdiff_t>(i), reqs.begin() + static_cast<std::ptrdiff_t>(j));
    for (auto& st : sch.submit_all(group)) ss.push_back(std::move(st));
    ss.resize(j);  // (an empty answer: nulls, which the loop below reports)
    i = j;
  }
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_NE(ss[i], nullptr);
    if (ss[i] == nullptr) continue;
    Outcome o = drain(*ss[i]);
    EXPECT_EQ(o.ids, alone[i].ids) << "request " << i;
    EXPECT_EQ(o.logprobs, alone[i].logprobs) << "request " << i;
    EXPECT_EQ(o.top, alone[i].top) << "request " << i;
    EXPECT_EQ(o.prompt_logprobs, alone[i].prompt_logprobs) << "request " << i;
  }
  const std::int64_t budget = sch.prefill_budget();
  sch.stop(1s);
  return budget;
}

void check_fixture(const std::string& dir) {
  auto model = Model::load(dir);
  ASSERT_TRUE(model.ok()) << model.error().message;
  Model& m = **model;
  const auto reqs = make_requests(m.config().vocab_size);

  const std::vector<Outcome> alone = test::run_each_alone(m, nullptr, reqs);
  const std::pair<int, int> configs[] = {{1, 64}, {8, 2}, {13, 17}, {4096, 1}};
  for (const auto& [budget, batch] : configs) {
    SCOPED_TRACE(::testing::Message() << "budget " << budget << " max_batch " << batch);
    Metrics metrics;
    SchedulerOptions so;
    so.slots = 8;
    so.max_in_flight = 64;
    so.max_batch_size = batch;
    so.max_batch_prefill_tokens = budget;
    const std::int64_t tokens_per_iteration = expect_as_alone(m, reqs, alone, so, metrics);
    // A budget below one prompt granule (Mamba-2's chunk_size) is raised to it.
    EXPECT_EQ(tokens_per_iteration, std::max<std::int64_t>(budget, m.config().prompt_granule()));
    // Sequences decode together unless prompts trickle in one token per iteration (a budget of 1
    // with Mamba-1's granule of 1 token: each finishes before the next prompt is in).
    if (batch > 1 && tokens_per_iteration > 1) {
      EXPECT_GT(metrics.decode_batch_sum.load(), metrics.decode_steps.load());
    }
  }
}

TEST(RealModelScheduler, Mamba2OddConcurrentEqualsAlone) {
  MAMBA_REQUIRE_SHARED(shared);
  check_fixture(shared + "/fixtures/mamba2-odd/model");
}

TEST(RealModelScheduler, Mamba1OddConcurrentEqualsAlone) {
  MAMBA_REQUIRE_SHARED(shared);
  check_fixture(shared + "/fixtures/mamba1-odd/model");
}

// The choices of one prompt (SequenceRequest::prompt_group, OpenAI's `n`): admitted together, the
// prompt is prefilled once, in pieces while the others wait, and each choice's ids, logprobs and
// prompt logprobs are bitwise those of its own request alone.
void check_prompt_group(const std::string& dir) {
  auto model = Model::load(dir);
  ASSERT_TRUE(model.ok()) << model.error().message;
  Model& m = **model;
  std::mt19937 rng(3);
  const auto vocab = static_cast<std::uint32_t>(m.config().vocab_size);
  std::vector<std::int32_t> p1, p2;
  for (int k = 0; k < 29; ++k) p1.push_back(static_cast<std::int32_t>(rng() % vocab));
  for (int k = 0; k < 11; ++k) p2.push_back(static_cast<std::int32_t>(rng() % vocab));
  std::vector<SequenceRequest> reqs;
  for (int i = 0; i < 4; ++i) {  // group 1: sampled, seed 5 + i, with prompt logprobs and top-2
    SequenceRequest r;
    r.prompt = p1;
    r.opts.max_new_tokens = 5;
    r.opts.ignore_eos = true;
    r.opts.top_logprobs = 2;
    r.opts.prompt_logprobs = true;
    r.prompt_top_logprobs = true;
    r.opts.sampling.do_sample = true;
    r.opts.sampling.temperature = 0.8f;
    r.opts.sampling.seed = 5 + static_cast<std::uint64_t>(i);
    r.opts.sampling.has_seed = true;
    reqs.push_back(std::move(r));
  }
  for (int i = 0; i < 3; ++i) {  // group 2: greedy
    SequenceRequest r;
    r.prompt = p2;
    r.opts.max_new_tokens = 4;
    r.opts.ignore_eos = true;
    reqs.push_back(std::move(r));
  }
  const std::vector<Outcome> alone = test::run_each_alone(m, nullptr, reqs);
  for (std::size_t i = 0; i < reqs.size(); ++i) reqs[i].prompt_group = i < 4 ? 1 : 2;
  for (const int budget : {7, 4096}) {
    SCOPED_TRACE(::testing::Message() << "budget " << budget);
    Metrics metrics;
    SchedulerOptions so;
    so.slots = 8;
    so.max_batch_prefill_tokens = budget;
    expect_as_alone(m, reqs, alone, so, metrics);
    EXPECT_EQ(metrics.prefill_tokens.load(), static_cast<std::int64_t>(p1.size() + p2.size())) << "each prompt once";
  }
  // One slot: the choices run one after another, each prefilling its own prompt.
  SCOPED_TRACE("one slot");
  Metrics metrics;
  SchedulerOptions so;
  so.slots = 1;
  expect_as_alone(m, reqs, alone, so, metrics);
  EXPECT_EQ(metrics.prefill_tokens.load(), static_cast<std::int64_t>(4 * p1.size() + 3 * p2.size()));
}

TEST(RealModelScheduler, Mamba2OddPromptGroupPrefillsOnce) {
  MAMBA_REQUIRE_SHARED(shared);
  check_prompt_group(shared + "/fixtures/mamba2-odd/model");
}

TEST(RealModelScheduler, Mamba1OddPromptGroupPrefillsOnce) {
  MAMBA_REQUIRE_SHARED(shared);
  check_prompt_group(shared + "/fixtures/mamba1-odd/model");
}

// The prefix cache (SchedulerOptions::prefix_cache_bytes): prompts that extend earlier ones start
// from the cached State of their longest kept prefix, and every answer is bitwise the uncached one
// (the state is kept only at whole granules, where a resumed prefill equals the unsplit one).
void check_prefix_cache(const std::string& dir) {
  auto model = Model::load(dir);
  ASSERT_TRUE(model.ok()) << model.error().message;
  Model& m = **model;
  std::mt19937 rng(9);
  const auto vocab = static_cast<std::uint32_t>(m.config().vocab_size);
  auto random_ids = [&](int n) {
    std::vector<std::int32_t> v;
    for (int k = 0; k < n; ++k) v.push_back(static_cast<std::int32_t>(rng() % vocab));
    return v;
  };
  const std::vector<std::int32_t> base = random_ids(41), ext = random_ids(20), other = random_ids(33);
  auto join = [](std::vector<std::int32_t> a, std::span<const std::int32_t> b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  std::vector<SequenceRequest> reqs;
  for (const auto& prompt : {base, join(base, std::span(ext).first(7)), join(base, ext), other, join(base, std::span(ext).first(7)),
                             std::vector<std::int32_t>(base.begin(), base.begin() + 30)}) {
    SequenceRequest r;
    r.prompt = prompt;
    r.opts.max_new_tokens = 4;
    r.opts.ignore_eos = true;
    r.opts.top_logprobs = 2;
    reqs.push_back(std::move(r));
  }
  reqs[2].opts.sampling.do_sample = true;  // a sampled one too
  reqs[2].opts.sampling.seed = 3;
  reqs[2].opts.sampling.has_seed = true;
  SequenceRequest scored = reqs[1];  // every prompt position's logprobs: prefilled whole, not from the cache
  scored.opts.prompt_logprobs = true;
  reqs.push_back(scored);
  // A shared "system prompt" before different user texts: kept from the second such prompt on
  // (where it parts from the first one's kept prefix), so the third starts from it.
  const std::vector<std::int32_t> system = random_ids(37);
  for (int u = 0; u < 3; ++u) {
    SequenceRequest r = reqs[0];
    r.prompt = join(system, random_ids(10));
    reqs.push_back(std::move(r));
  }
  const std::vector<Outcome> alone = test::run_each_alone(m, nullptr, reqs);  // no cache there

  for (const std::int64_t budget_states : {std::int64_t{64}, std::int64_t{1}}) {
    SCOPED_TRACE(::testing::Message() << "cache of " << budget_states << " state(s)");
    Metrics metrics;
    SchedulerOptions so;
    so.slots = 2;
    so.max_batch_prefill_tokens = 16;  // pieces: the save point cuts one
    so.prefix_cache_bytes = budget_states * (m.config().state_bytes() + 1024);  // an entry counts its ids too
    Scheduler sch(m, nullptr, {}, so, metrics);
    sch.start();
    std::vector<int> cached;
    for (std::size_t i = 0; i < reqs.size(); ++i) {  // one after another: each sees the cache the earlier ones left
      auto st = sch.submit(reqs[i]);
      ASSERT_NE(st, nullptr);
      Outcome o = drain(*st);
      EXPECT_EQ(o.ids, alone[i].ids) << "request " << i;
      EXPECT_EQ(o.logprobs, alone[i].logprobs) << "request " << i;
      EXPECT_EQ(o.top, alone[i].top) << "request " << i;
      EXPECT_EQ(o.prompt_logprobs, alone[i].prompt_logprobs) << "request " << i;
      cached.push_back(o.cached_tokens);
    }
    sch.stop(1s);
    // Kept: each prompt's state at its last whole granule short of its end.
    const std::int64_t g = m.config().prompt_granule();
    auto save_point = [&](std::size_t i) { return static_cast<int>((static_cast<std::int64_t>(reqs[i].prompt.size()) - 1) / g * g); };
    EXPECT_EQ(cached[0], 0);
    EXPECT_EQ(cached[1], save_point(0)) << "base + 7 begins with base's kept prefix";
    EXPECT_EQ(cached[2], budget_states > 1 ? std::max(save_point(0), save_point(1)) : save_point(1)) << "base + 20: the longest kept";
    EXPECT_EQ(cached[3], 0) << "another prompt";
    if (budget_states > 1) {
      EXPECT_EQ(cached[4], save_point(1) < 48 ? save_point(1) : save_point(0)) << "base + 7 again";
    } else {
      EXPECT_EQ(cached[4], 0) << "evicted by `other`'s state";
    }
    EXPECT_EQ(cached[6], 0) << "prompt logprobs: prefilled whole";
    EXPECT_EQ(cached[7], 0);
    EXPECT_EQ(cached[8], 0) << "the first prompt to share the system prompt: kept where they part";
    if (budget_states > 1) {
      EXPECT_EQ(cached[9], static_cast<int>(std::int64_t{37} / g * g)) << "the system prompt, kept";
    }
    int hits = 0, tokens = 0;
    for (const int c : cached) hits += c > 0, tokens += c;
    EXPECT_EQ(metrics.prefix_cache_hits.load(), hits);
    EXPECT_EQ(metrics.prefix_cache_tokens.load(), tokens);
    EXPECT_LE(metrics.prefix_cache_entries.load(), budget_states);
    EXPECT_LE(metrics.prefix_cache_bytes.load(), so.prefix_cache_bytes) << "states and ids within the budget";
  }
}

TEST(RealModelScheduler, Mamba2OddPrefixCacheAnswersAsUncached) {
  MAMBA_REQUIRE_SHARED(shared);
  check_prefix_cache(shared + "/fixtures/mamba2-odd/model");
}

TEST(RealModelScheduler, Mamba1OddPrefixCacheAnswersAsUncached) {
  MAMBA_REQUIRE_SHARED(shared);
  check_prefix_cache(shared + "/fixtures/mamba1-odd/model");
}

}  // namespace
}  // namespace mamba::server
