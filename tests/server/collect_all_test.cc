// collect_all (server/context.h) and StreamSignal (server/request_stream.h): one consumer reading
// the streams of several choices (OpenAI's `n`) as their events come.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server/context.h"
#include "server/request_stream.h"

namespace mamba::server {
namespace {

using namespace std::chrono_literals;

TokenEvent token(const std::string& text) {
  TokenEvent ev;
  ev.text_delta = text;
  return ev;
}

SequenceStats finished(int generated) {
  SequenceStats st;
  st.generated_tokens = generated;
  st.finish = FinishReason::kLength;
  return st;
}

/// Waits up to `limit` for `pred`.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 5000ms) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(StreamSignal, WaitReturnsOnANotifyAfterTheCountWasReadAndTimesOutWithout) {
  StreamSignal s;
  const std::uint64_t seen = s.count();
  EXPECT_FALSE(s.wait(seen, 20ms));
  s.notify();  // before the wait: not lost
  EXPECT_TRUE(s.wait(seen, 0ms));
  const std::uint64_t seen2 = s.count();
  std::thread t([&] {
    std::this_thread::sleep_for(20ms);
    s.notify();
  });
  EXPECT_TRUE(s.wait(seen2, 5000ms));
  t.join();
}

TEST(StreamSignal, AnAttachedStreamNotifiesOnEachEvent) {
  auto signal = std::make_shared<StreamSignal>();
  RequestStream rs;
  rs.push(token("before"));  // before attach: only take() sees it
  const std::uint64_t c0 = signal->count();
  rs.attach(signal);
  rs.push(token("a"));
  EXPECT_EQ(signal->count(), c0 + 1);
  rs.publish_prompt({});
  EXPECT_EQ(signal->count(), c0 + 2);
  rs.finish(finished(2));
  EXPECT_EQ(signal->count(), c0 + 3);
}

// Each stream is read while the others wait: a producer that needs stream 1 emptied (its backlog
// at 0, as the scheduler pauses an unread stream) before it ends stream 0 would wait for ever on a
// consumer that read the streams one after another.
TEST(CollectAll, TakesEveryStreamsEventsAsTheyComeAndKeepsThemApart) {
  RequestStream s0, s1, s2;
  std::thread producer([&] {
    for (int i = 0; i < 10; ++i) s1.push(token("b"));
    const bool taken = eventually([&] { return s1.backlog() == 0; });
    s0.push(token(taken ? "a" : "stream 1 was not read while stream 0 was open"));
    s2.push(token("c"));
    s2.finish(finished(1));
    s0.finish(finished(1));
    s1.push(token("B"));
    s1.finish(finished(11));
  });
  RequestStream* const streams[] = {&s0, &s1, &s2};
  std::vector<Collected> c = collect_all(streams);
  producer.join();
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].text, "a");
  EXPECT_EQ(c[1].text, "bbbbbbbbbbB");
  EXPECT_EQ(c[2].text, "c");
  EXPECT_EQ(c[1].tokens.size(), 11u);
  EXPECT_EQ(c[1].stats.generated_tokens, 11);
  for (const Collected& x : c) {
    EXPECT_FALSE(x.error);
    EXPECT_FALSE(x.client_left);
    EXPECT_EQ(x.stats.finish, FinishReason::kLength);
  }
}

TEST(CollectAll, AFailedChoiceCancelsTheOthers) {
  RequestStream s0, s1;
  std::thread producer([&] {
    s0.push(token("a"));
    s1.fail(Error{ErrorCode::kInternal, "non-finite logits"}, SequenceStats{});
    // The scheduler drops a cancelled sequence at its next step and ends its stream.
    EXPECT_TRUE(eventually([&] { return s0.cancelled(); }));
    SequenceStats st;
    st.finish = FinishReason::kCancelled;
    st.cancelled_by = s0.cancel_reason();
    s0.finish(st);
  });
  RequestStream* const streams[] = {&s0, &s1};
  std::vector<Collected> c = collect_all(streams);
  producer.join();
  EXPECT_EQ(s0.cancel_reason(), CancelReason::kAnswerEnded);
  ASSERT_TRUE(c[1].error);
  EXPECT_EQ(c[1].error->message, "non-finite logits");
  EXPECT_EQ(c[0].stats.finish, FinishReason::kCancelled);
  EXPECT_EQ(c[0].text, "a");
}

TEST(CollectAll, AClientThatLeftCancelsEveryChoice) {
  RequestStream s0, s1;
  std::thread producer([&] {
    for (RequestStream* s : {&s0, &s1}) {
      EXPECT_TRUE(eventually([&] { return s->cancelled(); }));
      SequenceStats st;
      st.finish = FinishReason::kCancelled;
      s->finish(st);
    }
  });
  RequestStream* const streams[] = {&s0, &s1};
  std::vector<Collected> c = collect_all(streams, [] { return true; });
  producer.join();
  EXPECT_EQ(s0.cancel_reason(), CancelReason::kClientGone);
  EXPECT_EQ(s1.cancel_reason(), CancelReason::kClientGone);
  EXPECT_TRUE(c[0].client_left);
  EXPECT_TRUE(c[1].client_left);
}

}  // namespace
}  // namespace mamba::server
