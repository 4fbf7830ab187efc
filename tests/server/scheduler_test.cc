// Scheduler: continuous batching gives each request exactly what it gets alone (ids and
// logprobs bitwise), prompts are split only at chunk multiples, slots are freed on cancel,
// concurrent decode steps are batched, the in-flight limit answers overloaded.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "mamba/generate.h"
#include "server/fake_model.h"
#include "server/stream_outcome.h"
#include "server/scheduler.h"

namespace mamba::server {
namespace {

using namespace std::chrono_literals;

using test::drain;
using test::Outcome;

std::vector<std::int32_t> make_prompt(int len, int salt) {
  std::vector<std::int32_t> p;
  for (int i = 0; i < len; ++i) p.push_back((i * 7 + salt * 13) % 60);
  return p;
}

/// User + system CPU time of this process so far, in seconds.
double process_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/// Polls `counter` every 5 ms until it reads `value` or `timeout` passes; returns the last read.
std::int64_t wait_for_value(const std::atomic<std::int64_t>& counter, std::int64_t value,
                            std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::int64_t v = counter.load();
  while (v != value && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    v = counter.load();
  }
  return v;
}

/// A greedy request for exactly `tokens` new tokens (EOS ignored) after a prompt of `len` ids.
SequenceRequest fixed_length(int len, int salt, int tokens) {
  SequenceRequest r{make_prompt(len, salt), {}};
  r.opts.max_new_tokens = tokens;
  r.opts.ignore_eos = true;
  return r;
}

GenerateOptions make_opts(int i) {
  GenerateOptions o;
  o.max_new_tokens = 5 + i % 9;
  o.top_logprobs = i % 3;
  o.prompt_logprobs = i % 4 == 0;
  if (i % 5 == 1) {  // some sampled requests with fixed seeds
    o.sampling.do_sample = true;
    o.sampling.temperature = 0.8f;
    o.sampling.top_k = 10;
    o.sampling.seed = 1000 + static_cast<std::uint64_t>(i);
    o.sampling.has_seed = true;
  }
  return o;
}

// Reference: the request run alone through the scheduler with an ample prefill budget.
Outcome run_alone(const SequenceRequest& req) {
  test::FakeModel model;
  Metrics m;
  SchedulerOptions so;
  so.slots = 1;
  so.max_batch_prefill_tokens = 100000;
  Scheduler sch(model, nullptr, {}, so, m);
  sch.start();
  auto s = sch.submit(req);
  EXPECT_NE(s, nullptr);
  Outcome o = drain(*s);
  sch.stop(1s);
  return o;
}

TEST(Scheduler, AloneMatchesGenerateLoop) {
  test::FakeModel model;
  SequenceRequest req{make_prompt(21, 3), make_opts(4)};
  req.opts.prompt_logprobs = true;
  req.opts.ignore_eos = true;  // keeps generate() off the checkpoint's EOS files (the fake has none)
  auto ref = generate(model, nullptr, req.prompt, req.opts);
  ASSERT_TRUE(ref.ok()) << ref.error().message;
  Outcome o = run_alone(req);
  ASSERT_EQ(o.ids.size(), ref->tokens.size());
  for (std::size_t i = 0; i < o.ids.size(); ++i) {
    EXPECT_EQ(o.ids[i], ref->tokens[i].id) << i;
    EXPECT_EQ(o.logprobs[i], ref->tokens[i].logprob) << i;  // bitwise
  }
  ASSERT_EQ(o.prompt_logprobs.size(), req.prompt.size() - 1);
  ASSERT_EQ(ref->prompt_logprobs.size(), req.prompt.size() - 1);
  for (std::size_t i = 0; i < o.prompt_logprobs.size(); ++i) EXPECT_EQ(o.prompt_logprobs[i], ref->prompt_logprobs[i]) << i;
  EXPECT_EQ(o.finish, FinishReason::kLength);
}

// The penalties see the prompt as generate() does (HF's repetition penalty, TGI's frequency and
// presence penalties over the whole context): a scheduler that skipped the prompt's tokens passed
// every other test (a mutant found by a fresh user's mutation testing).
TEST(Scheduler, PenaltiesCountThePromptAsGenerateDoes) {
  test::FakeModel model;
  std::vector<std::int32_t> prompt;
  for (int i = 0; i < 3; ++i)
    for (std::int32_t id = 0; id < 48; ++id) prompt.push_back(id);  // ids 0..47, each three times
  SequenceRequest plain{prompt, {}};
  plain.opts.max_new_tokens = 12;
  plain.opts.ignore_eos = true;
  const Outcome unpenalized = run_alone(plain);
  for (int k = 0; k < 3; ++k) {
    SequenceRequest req = plain;
    if (k == 0) req.opts.sampling.repetition_penalty = 4.0f;
    if (k == 1) req.opts.sampling.frequency_penalty = 2.0f;
    if (k == 2) req.opts.sampling.presence_penalty = 2.0f;
    auto ref = generate(model, nullptr, req.prompt, req.opts);
    ASSERT_TRUE(ref.ok()) << ref.error().message;
    const Outcome o = run_alone(req);
    ASSERT_EQ(o.ids.size(), ref->tokens.size());
    for (std::size_t i = 0; i < o.ids.size(); ++i) EXPECT_EQ(o.ids[i], ref->tokens[i].id) << "penalty " << k << ", token " << i;
    EXPECT_NE(o.ids, unpenalized.ids) << "penalty " << k << " changed nothing: the test would not see a prompt left out";
    // Most of the vocabulary is in the prompt: its first choice is one of the ids the prompt lacks.
    EXPECT_GE(o.ids[0], 48) << "penalty " << k;
  }
}

class ConcurrentBudgets : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(ConcurrentBudgets, EachRequestEqualsItselfAlone) {
  const auto [prefill_budget, max_batch] = GetParam();
  constexpr int kRequests = 24;
  std::vector<SequenceRequest> reqs;
  for (int i = 0; i < kRequests; ++i) reqs.push_back({make_prompt(1 + (i * 11) % 45, i), make_opts(i)});
  std::vector<Outcome> alone;
  for (const auto& r : reqs) alone.push_back(run_alone(r));

  test::FakeModel model(64, 8);
  Metrics m;
  SchedulerOptions so;
  so.slots = 16;  // fewer slots than requests: some queue
  so.max_in_flight = 64;
  so.max_batch_size = max_batch;
  so.max_batch_prefill_tokens = prefill_budget;
  Scheduler sch(model, nullptr, {}, so, m);
  // Every request is queued before the scheduler thread starts, so the batches it forms do not
  // depend on thread timing (the batch-size assertion below failed on a loaded machine otherwise).
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& r : reqs) {
    streams.push_back(sch.submit(r));
    ASSERT_NE(streams.back(), nullptr);
  }
  sch.start();
  for (int i = 0; i < kRequests; ++i) {
    Outcome o = drain(*streams[static_cast<std::size_t>(i)]);
    EXPECT_EQ(o.ids, alone[static_cast<std::size_t>(i)].ids) << "request " << i;
    EXPECT_EQ(o.logprobs, alone[static_cast<std::size_t>(i)].logprobs) << "request " << i;
    EXPECT_EQ(o.prompt_logprobs, alone[static_cast<std::size_t>(i)].prompt_logprobs) << "request " << i;
  }
  sch.stop(1s);
  // every prompt piece starts at a multiple of chunk_size (8)
  for (const auto& p : model.pieces) EXPECT_EQ(p.start % 8, 0) << "piece at " << p.start << " len " << p.len;
  for (int b : model.batch_sizes) EXPECT_LE(b, max_batch);
  EXPECT_GT(static_cast<double>(m.decode_batch_sum.load()) / static_cast<double>(m.decode_steps.load()), 1.0);
  EXPECT_EQ(m.slots_in_use.load(), 0);
  EXPECT_EQ(m.requests_ok.load(), kRequests);
  // One observation per finished request; the token-time ones only where there are tokens.
  std::int64_t with_a_token = 0, with_two = 0;
  for (const Outcome& o : alone) {
    with_a_token += !o.ids.empty();
    with_two += o.ids.size() >= 2;
  }
  EXPECT_GT(with_two, 0);
  EXPECT_EQ(m.request_duration.count(), kRequests);
  EXPECT_EQ(m.queue_duration.count(), kRequests);
  EXPECT_EQ(m.time_to_first_token.count(), with_a_token);
  EXPECT_EQ(m.time_per_output_token.count(), with_two);
}

INSTANTIATE_TEST_SUITE_P(Budgets, ConcurrentBudgets,
                         ::testing::Values(std::pair{1, 16}, std::pair{8, 2}, std::pair{13, 17}, std::pair{20, 64},
                                           std::pair{4096, 16}));

TEST(Scheduler, ANonFiniteLogitFailsOnlyItsOwnRequest) {
  // One request's NaN in a batched decode step (its state overflowed) fails that request alone:
  // its batch mates' logits are their own (bitwise as alone), so they finish as they would alone.
  // Before, every request of that step ended with the NaN request's 424.
  std::vector<SequenceRequest> reqs;
  for (int i = 0; i < 5; ++i) {
    GenerateOptions o;
    o.max_new_tokens = 12;
    reqs.push_back({make_prompt(3 + i, i), o});
  }
  reqs[2].prompt[0] = 61;  // the poisoned one (make_prompt's ids are < 60)
  std::vector<SequenceRequest> healthy = reqs;
  healthy.erase(healthy.begin() + 2);
  test::FakeModel reference_model;
  const std::vector<Outcome> alone = test::run_each_alone(reference_model, nullptr, healthy);

  test::FakeModel model;
  model.poison_first_token = 61;
  model.poison_position = 9;  // prompt of 5 tokens: the 4th decode step
  Metrics m;
  SchedulerOptions so;
  so.slots = 8;
  Scheduler sch(model, nullptr, {}, so, m);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& r : reqs) streams.push_back(sch.submit(r));
  sch.start();
  std::size_t k = 0;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    if (i == 2) {
      RequestStream::Update u;
      std::vector<std::int32_t> ids;
      bool done = false;
      for (int guard = 0; guard < 100 && !done; ++guard) {
        if (!streams[i]->take(u, 100ms)) continue;
        for (auto& t : u.tokens) ids.push_back(t.id);
        done = u.done;
      }
      ASSERT_TRUE(done);
      ASSERT_TRUE(u.error.has_value());
      EXPECT_EQ(u.error->code, ErrorCode::kNumerical);
      EXPECT_NE(u.error->message.find("non-finite logit nan at id 0"), std::string::npos) << u.error->message;
      EXPECT_EQ(ids.size(), 4u);  // the prefill's token and those of the three steps before
      continue;
    }
    Outcome o = drain(*streams[i]);
    EXPECT_EQ(o.ids, alone[k].ids) << "request " << i;
    EXPECT_EQ(o.logprobs, alone[k].logprobs) << "request " << i;
    ++k;
  }
  sch.stop(1s);
  EXPECT_GT(static_cast<double>(m.decode_batch_sum.load()) / static_cast<double>(m.decode_steps.load()), 1.0);
  EXPECT_EQ(m.requests_ok.load(), 4);
  EXPECT_EQ(m.request_duration.count(), 4) << "the failed requests' latencies are not observed";
  EXPECT_EQ(m.slots_in_use.load(), 0);
}

TEST(Scheduler, OutOfMemoryInAStepFailsTheRunningRequestsAndTheSchedulerGoesOn) {
  // std::bad_alloc out of a decode step (a buffer that could not grow) reached std::terminate
  // through the scheduler thread: the server exited ("error: out of memory", status 2) with every
  // request lost. Now the requests then running fail with kIo and the next one is served.
  test::FakeModel model;
  model.throw_bad_alloc_at_step = 2;
  Metrics m;
  SchedulerOptions so;
  so.slots = 4;
  Scheduler sch(model, nullptr, {}, so, m);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 3; ++i) streams.push_back(sch.submit(fixed_length(4 + i, i, 10)));
  sch.start();
  for (auto& s : streams) {
    RequestStream::Update u;
    bool done = false;
    for (int guard = 0; guard < 100 && !done; ++guard)
      if (s->take(u, 100ms)) done = u.done;
    ASSERT_TRUE(done);
    ASSERT_TRUE(u.error.has_value());
    EXPECT_EQ(u.error->code, ErrorCode::kIo);
    EXPECT_NE(u.error->message.find("out of memory in the scheduler"), std::string::npos) << u.error->message;
  }
  auto next = sch.submit(fixed_length(5, 7, 6));
  ASSERT_NE(next, nullptr);
  const Outcome o = drain(*next);
  EXPECT_EQ(o.ids.size(), 6u);
  sch.stop(1s);
  EXPECT_EQ(m.requests_failed.load(), 3);
  EXPECT_EQ(m.requests_ok.load(), 1);
  EXPECT_EQ(m.slots_in_use.load(), 0);
}

TEST(Scheduler, IdenticalConcurrentRequestsIdentical) {
  test::FakeModel model;
  Metrics m;
  SchedulerOptions so;
  so.slots = 8;
  so.max_batch_prefill_tokens = 16;
  Scheduler sch(model, nullptr, {}, so, m);
  sch.start();
  SequenceRequest r{make_prompt(30, 1), make_opts(2)};
  std::vector<std::shared_ptr<RequestStream>> ss;
  for (int i = 0; i < 8; ++i) ss.push_back(sch.submit(r));
  Outcome first = drain(*ss[0]);
  for (int i = 1; i < 8; ++i) {
    Outcome o = drain(*ss[static_cast<std::size_t>(i)]);
    EXPECT_EQ(o.ids, first.ids);
    EXPECT_EQ(o.logprobs, first.logprobs);
  }
  sch.stop(1s);
}

TEST(Scheduler, AShortPromptIsNotHeldBehindALongOnesPrefill) {
  // Budget 16, chunk 8: the 160-token prompt needs 10+ iterations. The 3-token prompt submitted
  // with it must get its piece within the next iteration (round robin), not after all of them; the
  // results are the same as alone either way (checked by ConcurrentBudgets).
  test::FakeModel model;
  Metrics m;
  SchedulerOptions so;
  so.slots = 2;
  so.max_batch_prefill_tokens = 16;
  Scheduler sch(model, nullptr, {}, so, m);
  GenerateOptions o;
  o.max_new_tokens = 2;
  auto longer = sch.submit(SequenceRequest{make_prompt(160, 1), o});
  auto shorter = sch.submit(SequenceRequest{make_prompt(3, 2), o});
  ASSERT_NE(longer, nullptr);
  ASSERT_NE(shorter, nullptr);
  sch.start();
  drain(*shorter);
  drain(*longer);
  sch.stop(1s);
  std::size_t short_at = model.pieces.size(), long_pieces = 0;
  for (std::size_t i = 0; i < model.pieces.size(); ++i) {
    if (model.pieces[i].len == 3 && model.pieces[i].start == 0) short_at = std::min(short_at, i);
    else ++long_pieces;
  }
  ASSERT_LT(short_at, model.pieces.size()) << "the short prompt was never prefilled";
  EXPECT_GE(long_pieces, 10u);
  EXPECT_LE(short_at, 1u) << "the short prompt waited behind " << short_at << " pieces of the long one";
}

/// A request that runs until cancelled (a 5-token prompt, a million new tokens, EOS ignored).
SequenceRequest endless_request() {
  SequenceRequest r{make_prompt(5, 2), {}};
  r.opts.max_new_tokens = 1000000;
  r.opts.ignore_eos = true;
  return r;
}

// The choices of one request are admitted all or none: a group that does not fit leaves no trace
// (no place taken, nothing queued), so a single request that fits right after it is admitted.
TEST(Scheduler, SubmitAllAdmitsEveryRequestOrNone) {
  test::FakeModel model;
  Metrics m;
  SchedulerOptions so;
  so.slots = 1;
  so.max_in_flight = 3;
  Scheduler sch(model, nullptr, {}, so, m);
  sch.start();
  const SequenceRequest long_req = endless_request();
  auto two = sch.submit_all({long_req, long_req});
  ASSERT_EQ(two.size(), 2u);
  EXPECT_TRUE(sch.submit_all({long_req, long_req}).empty()) << "2 choices with 1 place left";
  EXPECT_TRUE(sch.submit_all({long_req, long_req, long_req, long_req}).empty());
  auto one = sch.submit(long_req);
  ASSERT_NE(one, nullptr) << "the refused groups took no place";
  EXPECT_EQ(sch.submit(long_req), nullptr);
  // The scheduler thread publishes the counts when it next admits (a loaded machine: not yet).
  for (int i = 0; i < 200 && m.queue_size.load() + m.running.load() != 3; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(m.queue_size.load() + m.running.load(), 3);
  for (auto* s : {two[0].get(), two[1].get(), one.get()}) s->cancel(CancelReason::kClientGone);
  for (auto* s : {two[0].get(), two[1].get(), one.get()}) EXPECT_EQ(drain(*s).finish, FinishReason::kCancelled);
  sch.stop(1s);
}

TEST(Scheduler, InFlightLimitAndCancelFreesSlot) {
  test::FakeModel model;
  Metrics m;
  SchedulerOptions so;
  so.slots = 1;
  so.max_in_flight = 2;
  Scheduler sch(model, nullptr, {}, so, m);
  sch.start();
  const SequenceRequest long_req = endless_request();
  auto a = sch.submit(long_req);
  auto b = sch.submit(long_req);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(sch.submit(long_req), nullptr) << "third request beyond max_in_flight must be refused";
  // a runs (tokens arrive), b waits for the only slot
  RequestStream::Update u;
  ASSERT_TRUE(a->take(u, 2000ms));
  EXPECT_FALSE(u.tokens.empty());
  a->cancel(CancelReason::kClientNotReading);
  a->cancel(CancelReason::kShutdown);  // the first reason is kept
  Outcome oa = drain(*a);
  EXPECT_EQ(oa.finish, FinishReason::kCancelled);
  EXPECT_EQ(a->stats().cancelled_by, CancelReason::kClientNotReading);
  // b gets the slot and produces tokens
  RequestStream::Update ub;
  bool got = false;
  for (int i = 0; i < 50 && !got; ++i) got = b->take(ub, 100ms) && !ub.tokens.empty();
  EXPECT_TRUE(got);
  EXPECT_EQ(m.slots_in_use.load(), 1);
  b->cancel(CancelReason::kClientGone);
  drain(*b);
  EXPECT_EQ(b->stats().cancelled_by, CancelReason::kClientGone);
  EXPECT_EQ(wait_for_value(m.slots_in_use, 0, 500ms), 0);
  EXPECT_EQ(m.requests_cancelled.load(), 2);
  sch.stop(1s);
}

// A stream whose consumer stops taking (its client stopped reading: the HTTP thread is blocked in a
// write) is paused at max_stream_backlog events: no decode steps for it (the generated count
// stands still, the scheduler idles instead of spinning), while another request
// runs to its end; once the consumer takes, it resumes, and it delivers exactly what it does alone.
TEST(Scheduler, StalledStreamPausesAndResumesUnchanged) {
  SequenceRequest stalled = fixed_length(6, 3, 300);
  stalled.opts.top_logprobs = 2;
  const SequenceRequest other = fixed_length(4, 5, 200);
  const Outcome stalled_alone = run_alone(stalled), other_alone = run_alone(other);

  test::FakeModel model;
  Metrics m;
  SchedulerOptions so;
  so.slots = 2;
  so.max_stream_backlog = 16;
  Scheduler sch(model, nullptr, {}, so, m);
  sch.start();
  auto a = sch.submit(stalled);
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(wait_for_value(m.streams_paused, 1), 1) << "the stream was never paused";
  EXPECT_EQ(a->backlog(), 16u);
  const std::int64_t generated = m.generated_tokens.load();
  const double cpu0 = process_cpu_seconds();
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(m.generated_tokens.load(), generated) << "a paused stream kept generating";
  EXPECT_LT(process_cpu_seconds() - cpu0, 0.05) << "the scheduler spun while every sequence was paused";
  EXPECT_EQ(a->backlog(), 16u);

  // Another request runs to its end meanwhile; a stays paused.
  auto b = sch.submit(other);
  ASSERT_NE(b, nullptr);
  const Outcome ob = drain(*b);
  EXPECT_EQ(ob.ids, other_alone.ids);
  EXPECT_EQ(ob.logprobs, other_alone.logprobs);
  EXPECT_EQ(a->backlog(), 16u);

  // The consumer takes: a resumes and ends with exactly its tokens alone.
  const Outcome oa = drain(*a);
  EXPECT_EQ(oa.finish, FinishReason::kLength);
  EXPECT_EQ(oa.ids, stalled_alone.ids);
  EXPECT_EQ(oa.logprobs, stalled_alone.logprobs);
  EXPECT_EQ(oa.top, stalled_alone.top);
  EXPECT_EQ(wait_for_value(m.streams_paused, 0, 500ms), 0);
  sch.stop(1s);
}

// A stream is paused for at most max_stream_pause in all: then it is decoded to its end with nobody
// taking (a client reading a few bytes now and then held its slot for hours), with the same tokens.
TEST(Scheduler, StreamPauseIsBoundedInTotal) {
  const SequenceRequest req = fixed_length(6, 4, 200);
  const Outcome alone = run_alone(req);
  test::FakeModel model;
  Metrics m;
  SchedulerOptions so;
  so.slots = 1;
  so.max_stream_backlog = 16;
  so.max_stream_pause = 300ms;
  Scheduler sch(model, nullptr, {}, so, m);
  sch.start();
  auto a = sch.submit(req);
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(wait_for_value(m.streams_paused, 1), 1) << "the stream was never paused";
  EXPECT_EQ(m.requests_ok.load(), 0);
  EXPECT_EQ(wait_for_value(m.requests_ok, 1), 1) << "still paused after max_stream_pause";
  EXPECT_EQ(a->backlog(), 199u);  // every event but the last (delivered with the end)
  const Outcome o = drain(*a);
  EXPECT_EQ(o.ids, alone.ids);
  EXPECT_EQ(o.logprobs, alone.logprobs);
  sch.stop(1s);
}

// max_stream_backlog ≤ 0: a stream is never paused, however far its consumer lags.
TEST(Scheduler, StreamBacklogLimitOffNeverPauses) {
  test::FakeModel model;
  Metrics m;
  SchedulerOptions so;
  so.slots = 1;
  so.max_stream_backlog = 0;
  Scheduler sch(model, nullptr, {}, so, m);
  sch.start();
  auto a = sch.submit(fixed_length(5, 1, 150));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(wait_for_value(m.requests_ok, 1), 1) << "generation stopped without a consumer";
  EXPECT_EQ(drain(*a).ids.size(), 150u);
  sch.stop(1s);
}

TEST(Scheduler, StopDrainsThenCancels) {
  test::FakeModel model;
  Metrics m;
  SchedulerOptions so;
  so.slots = 2;
  Scheduler sch(model, nullptr, {}, so, m);
  sch.start();
  SequenceRequest short_req{make_prompt(5, 2), {}};
  short_req.opts.max_new_tokens = 20;
  short_req.opts.ignore_eos = true;
  SequenceRequest endless = short_req;
  endless.opts.max_new_tokens = 100000000;
  auto s1 = sch.submit(short_req);
  auto s2 = sch.submit(endless);
  sch.stop(300ms);  // short finishes, endless is cancelled at the deadline
  EXPECT_EQ(sch.submit(short_req), nullptr);
  Outcome o1 = drain(*s1);
  Outcome o2 = drain(*s2);
  EXPECT_EQ(o1.finish, FinishReason::kLength);
  EXPECT_EQ(o1.ids.size(), 20u);
  EXPECT_EQ(o2.finish, FinishReason::kCancelled);
}

// on_end: a consumer that leaves early (its client gone) learns the counts its sequence reached
// when the scheduler ends it, however late; once, whichever of on_end and finish / fail comes first.
TEST(RequestStream, OnEndRunsOnceWithTheFinalStats) {
  {
    RequestStream s;
    int calls = 0;
    SequenceStats got;
    s.on_end([&](const SequenceStats& st, const std::optional<Error>& err) {
      ++calls;
      got = st;
      EXPECT_FALSE(err.has_value());
    });
    EXPECT_EQ(calls, 0);
    SequenceStats st;
    st.prompt_tokens = 3;
    st.generated_tokens = 7;
    st.finish = FinishReason::kCancelled;
    s.finish(st);
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(got.prompt_tokens, 3);
    EXPECT_EQ(got.generated_tokens, 7);
    EXPECT_EQ(got.finish, FinishReason::kCancelled);
  }
  {
    RequestStream s;
    SequenceStats st;
    st.generated_tokens = 2;
    s.fail(Error{ErrorCode::kNumerical, "boom"}, st);
    int calls = 0;
    s.on_end([&](const SequenceStats& got, const std::optional<Error>& err) {
      ++calls;
      EXPECT_EQ(got.generated_tokens, 2);
      ASSERT_TRUE(err.has_value());
      EXPECT_EQ(err->message, "boom");
    });
    EXPECT_EQ(calls, 1);  // already ended: at once
  }
  for (int round = 0; round < 200; ++round) {  // racing the producer: still exactly once
    RequestStream s;
    std::atomic<int> calls{0};
    std::thread producer([&] {
      SequenceStats st;
      st.generated_tokens = round;
      s.finish(st);
    });
    s.on_end([&](const SequenceStats& got, const std::optional<Error>&) {
      EXPECT_EQ(got.generated_tokens, round);
      ++calls;
    });
    producer.join();
    EXPECT_EQ(calls.load(), 1) << "round " << round;
  }
}

}  // namespace
}  // namespace mamba::server
