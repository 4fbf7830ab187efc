// Scheduler with the embedded model and its tokenizer, the decode rows sampled on ≥ 2 compute
// threads (ops::parallel_tasks): each request gets, bitwise, what it gets alone — ids, logprobs,
// top logprobs, token texts, text and finish reason — over every sampler path (greedy, the
// large-vocabulary ScoreBuckets draw with top_p / min_p, top_k, typical_p, penalties), stop strings
// and special-token skipping. A sampler scratch shared between threads fails it (made to fail:
// ScoreBuckets static instead of thread_local crashed or changed draws).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "common/test_util.h"
#include "mamba/model.h"
#include "mamba/tokenizer.h"
#include "ops/ops.h"
#include "server/scheduler.h"
#include "server/stream_outcome.h"

namespace mamba::server {
namespace {

using namespace std::chrono_literals;

using test::drain;
using test::Outcome;

/// Restores the CPU ops' thread count at scope exit.
struct ThreadCount {
  int saved = ops::num_threads();
  ~ThreadCount() { ops::set_num_threads(saved); }
};

TEST(ParallelSampling, ConcurrentRowsWithTokenizerEqualEachAlone) {
  const std::string dir = test::source_dir() + "/models/mamba2-books-7m-bpe8k";
  auto model = Model::load(dir);
  ASSERT_TRUE(model.ok()) << model.error().message;
  auto tok = Tokenizer::from_file(dir + "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  ASSERT_GE((**model).logits_width(), 512) << "the sampler's large-vocabulary path needs ≥ 512 ids";
  const ThreadCount restore;
  ops::set_num_threads(std::max(2, restore.saved));  // rows on two threads even on a 1-CPU runner

  const char* texts[] = {"Once upon a time", "The king said", "She walked into the room and",
                         "It was a dark and stormy night.", "\"Hello,\" he said, \"", "In the morning the"};
  std::vector<SequenceRequest> reqs;
  for (int i = 0; i < 24; ++i) {
    SequenceRequest r;
    auto ids = tok->encode(texts[i % 6], false);
    ASSERT_TRUE(ids.ok()) << ids.error().message;
    r.prompt = *ids;
    r.opts.max_new_tokens = 20 + i % 13;
    r.opts.top_logprobs = i % 4;
    r.opts.skip_special_tokens = i % 2 == 1;
    r.opts.include_stop_text = i % 3 == 0;
    if (i % 5 == 0) r.opts.stop = {".", "\n", "the k"};
    SamplingParams& sp = r.opts.sampling;
    sp.seed = 1000 + static_cast<std::uint64_t>(i);
    sp.has_seed = true;
    switch (i % 6) {
      case 0: break;  // greedy
      case 1: sp.do_sample = true; sp.temperature = 0.9f; break;                 // ScoreBuckets draw
      case 2: sp.do_sample = true; sp.top_p = 0.9f; sp.min_p = 0.02f; break;     // ScoreBuckets top_p / min_p
      case 3: sp.do_sample = true; sp.top_k = 40; sp.temperature = 1.3f; break;  // top_k, sorted
      case 4: sp.do_sample = true; sp.typical_p = 0.8f; sp.repetition_penalty = 1.3f; break;
      case 5: sp.do_sample = true; sp.frequency_penalty = 0.5f; sp.presence_penalty = 0.3f; sp.top_p = 0.5f; break;
    }
    reqs.push_back(std::move(r));
  }

  const std::vector<Outcome> alone = test::run_each_alone(**model, &*tok, reqs);
  for (int rep = 0; rep < 2; ++rep) {
    Metrics m;
    SchedulerOptions so;
    so.slots = 12;
    so.max_in_flight = 64;
    so.max_batch_prefill_tokens = 64;
    Scheduler sch(**model, &*tok, {}, so, m);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& r : reqs) {  // all queued before the scheduler starts: batches do not depend on timing
      streams.push_back(sch.submit(r));
      ASSERT_NE(streams.back(), nullptr);
    }
    sch.start();
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      const Outcome o = drain(*streams[i]);
      EXPECT_EQ(o.ids, alone[i].ids) << "request " << i;
      EXPECT_EQ(o.logprobs, alone[i].logprobs) << "request " << i;
      EXPECT_EQ(o.top, alone[i].top) << "request " << i;
      EXPECT_EQ(o.token_texts, alone[i].token_texts) << "request " << i;
      EXPECT_EQ(o.text, alone[i].text) << "request " << i;
      EXPECT_EQ(o.finish, alone[i].finish) << "request " << i;
    }
    sch.stop(1s);
    EXPECT_GT(m.decode_batch_sum.load(), 2 * m.decode_steps.load()) << "decode steps were not batched";
  }
}

}  // namespace
}  // namespace mamba::server
