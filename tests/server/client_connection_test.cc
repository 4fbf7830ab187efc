// A non-stream request whose client leaves is cancelled like a stream's: ClientConnection finds
// the request's socket by its addresses and sees the peer's close; collect() then cancels the
// sequence (counted as cancelled, slot freed).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "server/client_connection.h"
#include "server/context.h"
#include "server/fake_model.h"
#include "server/scheduler.h"

namespace mamba::server {
namespace {

using namespace std::chrono_literals;

std::string ip_of(const sockaddr_in& a) {
  char buf[INET_ADDRSTRLEN];
  return inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
}

// A loopback TCP connection: `server` is the accepted end, `client` the connecting one.
struct Loopback {
  int listener = -1, client = -1, server = -1;
  httplib::Request req;  // the addresses cpp-httplib would fill in for `server`
  Loopback() {
    listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(listener, 1), 0);
    socklen_t len = sizeof a;
    getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
    client = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    server = accept(listener, nullptr, nullptr);
    EXPECT_GE(server, 0);
    sockaddr_in peer{}, local{};
    len = sizeof peer;
    getpeername(server, reinterpret_cast<sockaddr*>(&peer), &len);
    len = sizeof local;
    getsockname(server, reinterpret_cast<sockaddr*>(&local), &len);
    req.remote_addr = ip_of(peer);
    req.remote_port = ntohs(peer.sin_port);
    req.local_addr = ip_of(local);
    req.local_port = ntohs(local.sin_port);
  }
  ~Loopback() {
    for (int fd : {listener, client, server}) {
      if (fd >= 0) close(fd);
    }
  }
};

TEST(ClientConnection, SeesThePeerClose) {
  Loopback lo;
  ClientConnection conn(lo.req);
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

TEST(ClientConnection, UnknownAddressesAreNeverClosed) {
  Loopback lo;
  httplib::Request other = lo.req;
  other.remote_port = lo.req.remote_port == 1 ? 2 : 1;
  ClientConnection conn(other);
  EXPECT_FALSE(conn.found());
  close(lo.client);
  lo.client = -1;
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
