// A non-stream request whose client leaves is cancelled like a stream's: ClientConnection sees the
// peer's close on the request's socket; collect() then cancels the sequence (counted as cancelled,
// slot freed).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "server/bounded_http_server.h"
#include "server/client_connection.h"
#include "server/context.h"
#include "server/loopback.h"
#include "server/fake_model.h"
#include "server/scheduler.h"

namespace mamba::server {
namespace {

using namespace std::chrono_literals;

TEST(ClientConnection, CloseLingeringEndsTheConnectionWithoutAReset) {
  // What a refused, unread body (e.g. a chunked upload) leaves: bytes the server never read. The
  // client must see an orderly end of the answer (FIN), not a reset, and the server side must read
  // nothing more as a next request.
  Loopback lo;
  ASSERT_EQ(write(lo.server, "answer", 6), 6);
  const std::string unread(100000, 'x');
  std::thread sender([&] { (void)!write(lo.client, unread.data(), unread.size()); shutdown(lo.client, SHUT_WR); });
  close_lingering(lo.server, 2000, 30000, std::size_t{1} << 30);
  sender.join();
  char buf[16];
  EXPECT_EQ(read(lo.client, buf, sizeof buf), 6);
  EXPECT_EQ(read(lo.client, buf, sizeof buf), 0) << "FIN after the answer";
  EXPECT_EQ(read(lo.server, buf, sizeof buf), 0) << "the unread body was drained and reading stopped";
}

TEST(ClientConnection, SeesThePeerClose) {
  Loopback lo;
  ClientConnection conn(lo.server);
  ASSERT_TRUE(conn.found());
  EXPECT_FALSE(conn.closed());
  // pipelined data from a live client is not a close
  ASSERT_EQ(write(lo.client, "GET / HTTP/1.1\r\n\r\n", 18), 18);
  EXPECT_FALSE(conn.closed());
  close(lo.client);
  lo.client = -1;
  bool seen = false;
  for (int i = 0; i < 100 && !seen; ++i) {
    seen = conn.closed();
    if (!seen) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(seen);
}

TEST(ClientConnection, NoSocketIsNeverClosed) {
  ClientConnection conn(-1);  // a handler run outside the connection loop
  EXPECT_FALSE(conn.found());
  EXPECT_FALSE(conn.closed());
}

TEST(ClientConnection, CollectCancelsWhenTheClientLeaves) {
  test::FakeModel model;
  Metrics m;
  SchedulerOptions so;
  so.slots = 1;
  Scheduler sch(model, nullptr, {}, so, m);
  sch.start();
  SequenceRequest req{{1, 2, 3}, {}};
  req.opts.max_new_tokens = 1000000;
  req.opts.ignore_eos = true;
  auto s = sch.submit(req);
  ASSERT_NE(s, nullptr);
  std::atomic<bool> gone{false};
  std::thread leaver([&] {
    std::this_thread::sleep_for(100ms);
    gone = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  Collected c = collect(*s, [&] { return gone.load(); });
  leaver.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(c.stats.finish, FinishReason::kCancelled);
  EXPECT_FALSE(c.error);
  for (int i = 0; i < 100 && m.slots_in_use.load() != 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(m.slots_in_use.load(), 0);
  EXPECT_EQ(m.requests_cancelled.load(), 1);
  sch.stop(1s);
}

}  // namespace
}  // namespace mamba::server
