// BoundedHttpServer: our connection loop around cpp-httplib 0.11's request processing, driven over
// real loopback TCP. Pipelined requests get the same answers however the client's bytes are split
// into writes; a head past its bounds gets one answer and the connection ends there (its rest is
// never read as a request); close_after_answer() ends the connection after the answer; handlers
// see their own socket.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "server/bounded_http_server.h"
#include "server/client_connection.h"

namespace mamba::server {
namespace {

constexpr std::size_t kMaxHead = 16384;

/// A BoundedHttpServer on a loopback port with a few plain routes; stopped by its destructor.
/// `parking`: on `workers` threads of start_workers(), waiting connections parked (at most
/// `max_parked`); else on cpp-httplib's own pool, each connection's worker waiting for it.
struct TestServer {
  BoundedHttpServer http;
  std::thread thread;
  int port = -1;
  int listen_fd = -1;

  explicit TestServer(bool parking = false, std::size_t workers = 4, std::size_t max_parked = 256,
                      std::chrono::milliseconds head_timeout = std::chrono::milliseconds(1500),
                      std::size_t read_ahead_bytes = BoundedHttpServer::kReadAheadBytes)
      : http(kMaxHead, head_timeout) {
    if (parking) {
      EXPECT_TRUE(http.start_workers(workers, max_parked, read_ahead_bytes).ok());
    }
    http.set_keep_alive_max_count(100);
    http.Get("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.get_header_value("X-Id"), "text/plain");
    });
    http.Post("/len", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(std::to_string(req.body.size()), "text/plain");
    });
    http.Get("/big", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(std::size_t{16} << 20, 'b'), "text/plain");
    });
    http.Get("/close", [](const httplib::Request&, httplib::Response& res) {
      res.set_header("Connection", "close");
      BoundedHttpServer::close_after_answer();
      res.set_content("bye", "text/plain");
    });
    http.Get("/socket", [](const httplib::Request& req, httplib::Response& res) {
      // the handler's socket is the request's: its peer is the request's remote end
      const int fd = BoundedHttpServer::current_socket();
      sockaddr_in peer{};
      socklen_t len = sizeof peer;
      const bool same = fd >= 0 && getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0 &&
                        ntohs(peer.sin_port) == req.remote_port && ClientConnection(fd).found();
      res.set_content(same ? "same" : "other", "text/plain");
    });
    // /refuse: answered before its body is read, the connection then ends the lingering way (as
    // the server's 405 / 401 / 413 answers)
    http.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
      if (req.path != "/refuse") return httplib::Server::HandlerResponse::Unhandled;
      res.status = 405;
      res.set_header("Connection", "close");
      BoundedHttpServer::close_after_answer(true);
      res.set_content("refused", "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    });
    http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
      if (BoundedHttpServer::head_fault() == HeadFault::kTooLong) res.status = 431;
      res.set_content("limit " + std::to_string(static_cast<int>(BoundedHttpServer::head_fault())), "text/plain");
    });
    http.set_socket_options([this](int sock) {
      int one = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      listen_fd = sock;
    });
    port = http.bind_to_any_port("127.0.0.1");
    EXPECT_GT(port, 0);
    ::listen(listen_fd, SOMAXCONN);  // cpp-httplib's backlog of 5 makes the 6th connect wait ~1 s
    thread = std::thread([this] { http.listen_after_bind(); });
  }
  ~TestServer() {
    http.stop();
    thread.join();
  }
};

struct Answer {
  int status = 0;
  std::string body;
  bool closes = false;  // said "Connection: close"
  bool operator==(const Answer&) const = default;
  friend void PrintTo(const Answer& a, std::ostream* os) {
    *os << a.status << " '" << a.body.substr(0, 40) << "'" << (a.closes ? " (closes)" : "");
  }
};

/// A connected socket to the loopback `port` with a `timeout_s` receive timeout.
int connect_to(int port, int timeout_s = 10) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  timeval tv{timeout_s, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

/// Sends `pieces` one write each (with `pause` after each), half-closes, and reads until the server
/// ends the connection. The answers, in order (each with a Content-Length: these routes' all have).
std::vector<Answer> exchange(int port, const std::vector<std::string>& pieces, std::chrono::microseconds pause = {}) {
  const int fd = connect_to(port, 20);
  std::string in;
  std::thread reader([&] {
    char buf[65536];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) in.append(buf, static_cast<std::size_t>(n));
  });
  for (const std::string& p : pieces) {
    if (send(fd, p.data(), p.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(p.size())) break;  // the server may end it early
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
  }
  shutdown(fd, SHUT_WR);
  reader.join();
  close(fd);
  std::vector<Answer> out;
  for (std::size_t at = 0; at < in.size();) {
    const std::size_t head_end = in.find("\r\n\r\n", at);
    if (head_end == std::string::npos) {
      ADD_FAILURE() << "an answer without its head's end: " << in.substr(at, 200);
      break;
    }
    const std::string head = in.substr(at, head_end - at);
    Answer ans;
    ans.status = std::stoi(head.substr(9, 3));
    ans.closes = head.find("\r\nConnection: close") != std::string::npos;
    const std::size_t cl = head.find("\r\nContent-Length: ");
    const std::size_t len = cl == std::string::npos ? 0 : std::stoul(head.substr(cl + 18));
    ans.body = in.substr(head_end + 4, len);
    out.push_back(ans);
    at = head_end + 4 + len;
  }
  return out;
}

/// Several requests in one stream of bytes: GETs and POSTs whose bodies are small, one read-ahead
/// buffer long and larger (the stream's large reads bypass its buffer), and what they are answered.
std::pair<std::string, std::vector<Answer>> pipelined_requests() {
  std::string bytes;
  std::vector<Answer> want;
  const std::size_t body_sizes[] = {0, 5, 4095, 4096, 10000, 70000};
  for (int i = 0; i < 6; ++i) {
    bytes += "GET /echo HTTP/1.1\r\nHost: x\r\nX-Id: id" + std::to_string(i) + "\r\n\r\n";
    want.push_back({200, "id" + std::to_string(i), false});
    const std::string body(body_sizes[i], static_cast<char>('a' + i));
    bytes += "POST /len HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
             "\r\n\r\n" + body;
    want.push_back({200, std::to_string(body.size()), false});
  }
  return {bytes, want};
}

/// Each case runs with waiting connections parked ("Parked") and without ("WorkerWaits").
class BoundedHttpServerLoop : public ::testing::TestWithParam<bool> {};

TEST_P(BoundedHttpServerLoop, PipelinedRequestsAreAllAnsweredInOrderHoweverTheBytesAreSplit) {
  TestServer srv(GetParam());
  const auto [bytes, want] = pipelined_requests();
  EXPECT_EQ(exchange(srv.port, {bytes}), want) << "one write";
  std::mt19937 rng(7);
  for (int trial = 0; trial < 12; ++trial) {
    std::vector<std::string> pieces;
    for (std::size_t at = 0; at < bytes.size();) {
      const std::size_t n = std::min(bytes.size() - at, std::size_t{1} + rng() % (trial % 3 == 0 ? 7 : 9000));
      pieces.push_back(bytes.substr(at, n));
      at += n;
    }
    EXPECT_EQ(exchange(srv.port, pieces, std::chrono::microseconds(trial % 3 != 0 && trial % 2 == 1 ? 200 : 0)), want)
        << "trial " << trial << ": " << pieces.size() << " writes";
  }
}

TEST_P(BoundedHttpServerLoop, AHeadOverTheLimitGetsOneAnswerAndTheConnectionEnds) {
  TestServer srv(GetParam());
  std::string head = "GET /echo HTTP/1.1\r\nHost: x\r\n";
  while (head.size() <= kMaxHead) head += "X-Pad: " + std::string(1000, 'p') + "\r\n";
  const std::string next = "GET /echo HTTP/1.1\r\nHost: x\r\nX-Id: next\r\n\r\n";
  const auto got = exchange(srv.port, {head + "\r\n" + next});
  ASSERT_EQ(got.size(), 1u) << "the head's rest or the next request was read as a request";
  EXPECT_EQ(got[0].status, 431);
  EXPECT_EQ(got[0].body, "limit 2");
  // Just under the limit is served (the blank line ends the head: the body is not counted).
  std::string under = "POST /len HTTP/1.1\r\nHost: x\r\nContent-Length: 30000\r\n";
  while (under.size() + 1010 < kMaxHead) under += "X-Pad: " + std::string(1000, 'p') + "\r\n";
  EXPECT_EQ(exchange(srv.port, {under + "\r\n" + std::string(30000, 'b') + next}),
            (std::vector<Answer>{{200, "30000", false}, {200, "next", false}}));
}

TEST_P(BoundedHttpServerLoop, AnOverlongLineIsRefusedByCppHttplibAndTheConnectionEnds) {
  TestServer srv(GetParam());
  const std::string next = "GET /echo HTTP/1.1\r\nHost: x\r\nX-Id: next\r\n\r\n";
  // cpp-httplib's own answers: 414 for the request line, 400 for a header line, after 8193 bytes
  auto got = exchange(srv.port, {"GET /" + std::string(1 << 20, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n" + next});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, 414);
  got = exchange(srv.port, {"GET /echo HTTP/1.1\r\nX-Long: " + std::string(1 << 20, 'h') + "\r\n\r\n" + next});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, 400);
  EXPECT_EQ(got[0].body, "limit 1");
  // a line of exactly 8192 bytes with its CRLF is within cpp-httplib's limit
  std::string line = "X-Fill: ";
  line += std::string(BoundedHttpServer::kMaxHeadLine - line.size() - 2, 'f') + "\r\n";
  EXPECT_EQ(exchange(srv.port, {"GET /echo HTTP/1.1\r\nX-Id: ok\r\n" + line + "\r\n" + next}),
            (std::vector<Answer>{{200, "ok", false}, {200, "next", false}}));
}

TEST_P(BoundedHttpServerLoop, MalformedHeaderLinesEndTheHeadWithOneAnswer) {
  TestServer srv(GetParam());
  const std::string next = "GET /echo HTTP/1.1\r\nX-Id: next\r\n\r\n";
  // each would be skipped or misread by cpp-httplib 0.11 (the first dropped its Transfer-Encoding)
  for (const std::string line : {"Transfer-Encoding : chunked", "NoColon", " folded", ": empty name", "X-Cr: a\rb"}) {
    const auto got = exchange(srv.port, {"GET /echo HTTP/1.1\r\nX-Id: a\r\n" + line + "\r\n\r\n" + next});
    ASSERT_EQ(got.size(), 1u) << line;
    EXPECT_EQ(got[0].body, "limit 3") << line;
  }
  // cpp-httplib drops a header with an empty value: an empty Content-Length beside "Content-Length: 0"
  // left the body to be read as a request
  for (const std::string& line : {std::string("Content-Length: "), std::string("transfer-encoding:\t"), std::string("X-Nul: a\0b", 11)}) {
    const auto got = exchange(srv.port, {"POST /len HTTP/1.1\r\nContent-Length: 0\r\n" + line + "\r\n\r\n" + next});
    ASSERT_EQ(got.size(), 1u) << line;
    EXPECT_EQ(got[0].body, "limit 3") << line;
  }
  auto got = exchange(srv.port, {"GET /echo HTTP/1.1\r\nX-Id: a\nX-B: b\r\n\r\n" + next});  // a bare LF ending
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].body, "limit 3");
  // a value may hold ':' and whitespace; a request line is cpp-httplib's to judge
  EXPECT_EQ(exchange(srv.port, {"GET /echo HTTP/1.1\r\nX-Id:  a: b \t\r\n\r\n" + next}),
            (std::vector<Answer>{{200, "a: b", false}, {200, "next", false}}));
}

TEST_P(BoundedHttpServerLoop, ExpectIsCaseInsensitiveAndIgnoredForHttp10) {
  TestServer srv(GetParam());
  const int fd = connect_to(srv.port, 5);
  const std::string head = "POST /len HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n";
  ASSERT_EQ(send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
  char buf[256];
  const ssize_t n = read(fd, buf, sizeof buf);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, static_cast<std::size_t>(n)), "HTTP/1.1 100 Continue\r\n\r\n");
  close(fd);
  // HTTP/1.0: no 100 (RFC 9110 §10.1.1), the request is served as without Expect
  const auto got = exchange(srv.port, {"POST /len HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc"});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, 200);
  EXPECT_EQ(got[0].body, "3");
}

TEST_P(BoundedHttpServerLoop, AHeadTheClientLeavesUnfinishedIsMarkedIncomplete) {
  TestServer srv(GetParam());
  const auto got = exchange(srv.port, {"GET /echo HTTP/1.1\r\nX-Id: a\r\n"});  // then the client half-closes
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].body, "limit 4");
}

TEST_P(BoundedHttpServerLoop, AHeadTrickledPastItsDeadlineIsCutThere) {
  // One byte every 100 ms for 13 s (each read well within the read timeout): the head's 1.5 s end it.
  TestServer srv(GetParam());
  std::vector<std::string> bytes;
  for (char c : std::string("GET /echo HTTP/1.1\r\nX-Id: slow\r\nX-Pad: ") + std::string(100, 'p')) bytes.emplace_back(1, c);
  const auto t0 = std::chrono::steady_clock::now();
  const auto got = exchange(srv.port, bytes, std::chrono::milliseconds(100));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].body, "limit 4");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(8)) << "the head was read to its end (about 13 s)";
  // a head that arrives in time is served
  std::vector<std::string> quick;
  for (char c : std::string("GET /echo HTTP/1.1\r\nX-Id: ok\r\n\r\n")) quick.emplace_back(1, c);
  EXPECT_EQ(exchange(srv.port, quick, std::chrono::milliseconds(10)), (std::vector<Answer>{{200, "ok", false}}));
}

TEST_P(BoundedHttpServerLoop, EmptyLinesBeforeARequestAreSkipped) {
  TestServer srv(GetParam());
  EXPECT_EQ(exchange(srv.port, {"\r\nPOST /len HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc\r\n\nGET /echo HTTP/1.1\r\nX-Id: n\r\n\r\n"}),
            (std::vector<Answer>{{200, "3", false}, {200, "n", false}}));
}

TEST_P(BoundedHttpServerLoop, RequestsPastTheKeepAliveCountDoNotCostTheAnswersSent) {
  // The 100th answer ends the connection with 50 requests unread: closing at once would reset the
  // connection, and the client would lose the answers still in its receive buffer.
  TestServer srv(GetParam());
  std::string bytes;
  for (int i = 0; i < 150; ++i) bytes += "GET /echo HTTP/1.1\r\nX-Id: " + std::to_string(i) + "\r\n\r\n";
  const auto got = exchange(srv.port, {bytes});
  ASSERT_EQ(got.size(), 100u);
  EXPECT_EQ(got[99], (Answer{200, "99", true}));
}

TEST_P(BoundedHttpServerLoop, CloseAfterAnswerEndsTheConnectionAfterTheAnswer) {
  TestServer srv(GetParam());
  const auto got = exchange(srv.port, {"GET /close HTTP/1.1\r\nHost: x\r\n\r\nGET /echo HTTP/1.1\r\nX-Id: after\r\n\r\n"});
  EXPECT_EQ(got, (std::vector<Answer>{{200, "bye", true}}));
}

TEST_P(BoundedHttpServerLoop, HandlersSeeTheirOwnSocket) {
  TestServer srv(GetParam());
  EXPECT_EQ(exchange(srv.port, {"GET /socket HTTP/1.1\r\nHost: x\r\n\r\n"}), (std::vector<Answer>{{200, "same", false}}));
  EXPECT_EQ(BoundedHttpServer::current_socket(), -1) << "not a connection's thread";
}

TEST_P(BoundedHttpServerLoop, KeepAliveMaxCountEndsTheConnection) {
  TestServer srv(GetParam());
  srv.http.set_keep_alive_max_count(3);
  std::string bytes;
  for (int i = 0; i < 5; ++i) bytes += "GET /echo HTTP/1.1\r\nX-Id: " + std::to_string(i) + "\r\n\r\n";
  EXPECT_EQ(exchange(srv.port, {bytes}), (std::vector<Answer>{{200, "0", false}, {200, "1", false}, {200, "2", true}}));
}

INSTANTIATE_TEST_SUITE_P(, BoundedHttpServerLoop, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "Parked" : "WorkerWaits"; });


/// Reads one answer of these routes (its head, then its Content-Length bytes): "" at the end of the
/// connection or the receive timeout before any byte.
std::string read_answer(int fd) {
  std::string in;
  char c;
  while (in.find("\r\n\r\n") == std::string::npos && read(fd, &c, 1) == 1) in += c;
  const std::size_t cl = in.find("Content-Length: ");
  if (cl == std::string::npos) return in;
  for (std::size_t len = std::stoul(in.substr(cl + 16)); len > 0 && read(fd, &c, 1) == 1; --len) in += c;
  return in;
}

bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

TEST(BoundedHttpServerParking, WaitingConnectionsHoldNoWorker) {
  // Two workers, 60 connections waiting: 30 idle, 30 with half a head. Without parking each held
  // a worker (a new request waited for the keep-alive timeout or the head deadline of two of them).
  TestServer srv(true, 2, 256, std::chrono::seconds(20));
  std::vector<int> fds;
  for (int i = 0; i < 60; ++i) {
    fds.push_back(connect_to(srv.port));
    if (i % 2 == 1) {
      const std::string half = "GET /echo HTTP/1.1\r\nX-Id: w" + std::to_string(i) + "\r\n";
      ASSERT_EQ(send(fds.back(), half.data(), half.size(), MSG_NOSIGNAL), static_cast<ssize_t>(half.size()));
    }
  }
  EXPECT_TRUE(wait_until([&] { return srv.http.parked_connections() == 60; }, std::chrono::seconds(5)))
      << srv.http.parked_connections() << " parked";
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(exchange(srv.port, {"GET /echo HTTP/1.1\r\nX-Id: new\r\n\r\n"}), (std::vector<Answer>{{200, "new", false}}));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  // every waiting connection then makes (or finishes) its request and is answered, and waits again
  for (int i = 0; i < 60; ++i) {
    const std::string rest = i % 2 == 1 ? "\r\n" : "GET /echo HTTP/1.1\r\nX-Id: w" + std::to_string(i) + "\r\n\r\n";
    ASSERT_EQ(send(fds[static_cast<std::size_t>(i)], rest.data(), rest.size(), MSG_NOSIGNAL), static_cast<ssize_t>(rest.size()));
  }
  for (int i = 0; i < 60; ++i) {
    const std::string got = read_answer(fds[static_cast<std::size_t>(i)]);
    EXPECT_EQ(got.substr(0, 15), "HTTP/1.1 200 OK") << i;
    EXPECT_TRUE(got.ends_with("\r\n\r\nw" + std::to_string(i))) << i << ": " << got;
  }
  EXPECT_TRUE(wait_until([&] { return srv.http.parked_connections() == 60; }, std::chrono::seconds(5)));
  for (const int fd : fds) close(fd);
  EXPECT_TRUE(wait_until([&] { return srv.http.parked_connections() == 0; }, std::chrono::seconds(5)))
      << "closed connections stay parked";
}

/// Sends all of `bytes` on `fd`.
void send_all(int fd, const std::string& bytes) {
  ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

TEST(BoundedHttpServerParking, TrickledBodiesHoldNoWorker) {
  // Two workers, 40 clients that sent a head and part of its body (by Content-Length, or chunked),
  // then wait: each held a worker until its body was whole (each read within the read timeout, no
  // overall bound). Parked until their bodies are here, they leave the workers to a new request.
  TestServer srv(true, 2, 256, std::chrono::seconds(20));
  std::vector<int> fds;
  for (int i = 0; i < 40; ++i) {
    fds.push_back(connect_to(srv.port));
    send_all(fds.back(), i % 2 == 0 ? "POST /len HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n" + std::string(40000, 'a')
                                    : "POST /len HTTP/1.1\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n");
  }
  EXPECT_TRUE(wait_until([&] { return srv.http.parked_connections() == 40; }, std::chrono::seconds(5)))
      << srv.http.parked_connections() << " parked";
  // what the 20 bodies' buffers hold past 4 KiB is counted
  EXPECT_TRUE(wait_until([&] { return srv.http.read_ahead_bytes() >= 20u * (40000u - 4096u); }, std::chrono::seconds(5)))
      << srv.http.read_ahead_bytes();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(exchange(srv.port, {"GET /echo HTTP/1.1\r\nX-Id: new\r\n\r\n"}), (std::vector<Answer>{{200, "new", false}}));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  // the bodies, finished (in pieces), are read whole and answered; a request pipelined behind one
  // is answered after it
  for (int i = 0; i < 40; ++i) {
    const int fd = fds[static_cast<std::size_t>(i)];
    if (i % 2 == 0) {
      send_all(fd, std::string(30000, 'b'));
      send_all(fd, std::string(30000, 'c') + "GET /echo HTTP/1.1\r\nX-Id: after\r\n\r\n");
    } else {
      send_all(fd, "4\r\ndefg\r\n");
      send_all(fd, "0\r\n\r\n");
    }
  }
  for (int i = 0; i < 40; ++i) {
    const int fd = fds[static_cast<std::size_t>(i)];
    const std::string got = read_answer(fd);
    EXPECT_TRUE(got.starts_with("HTTP/1.1 200 OK")) << i << ": " << got;
    EXPECT_TRUE(got.ends_with(i % 2 == 0 ? "\r\n\r\n100000" : "\r\n\r\n7")) << i << ": " << got;
    if (i % 2 == 0) {
      EXPECT_TRUE(read_answer(fd).ends_with("\r\n\r\nafter")) << i;
    }
  }
  EXPECT_TRUE(wait_until([&] { return srv.http.parked_connections() == 40; }, std::chrono::seconds(5)));
  EXPECT_EQ(srv.http.read_ahead_bytes(), 0u) << "the bodies' buffers were not given back once read";
  for (const int fd : fds) close(fd);
  EXPECT_TRUE(wait_until([&] { return srv.http.parked_connections() == 0; }, std::chrono::seconds(5)));
}

TEST(BoundedHttpServerParking, ABodyPastTheReadAheadLimitIsReadByItsWorker) {
  // A 48 KiB limit on what bodies' buffers hold past 4 KiB: a 40000-byte body parks (its buffer
  // grows to its head + body, all but 4096 bytes counted); a second one then finds no room to grow
  // past 16 KiB and goes to a worker, which reads the rest as it comes. Never more than the limit
  // is read ahead; both are answered whole.
  TestServer srv(true, 2, 256, std::chrono::seconds(20), 48 << 10);
  const std::string head = "POST /len HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: 40000\r\n\r\n";
  const int first = connect_to(srv.port);
  send_all(first, head + std::string(35000, 'a'));
  ASSERT_TRUE(wait_until([&] { return srv.http.read_ahead_bytes() == head.size() + 40000 - 4096; }, std::chrono::seconds(5)))
      << srv.http.read_ahead_bytes();
  const int second = connect_to(srv.port);
  send_all(second, head + std::string(35000, 'b'));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(srv.http.parked_connections(), 1u) << "the second body was not handed to a worker";
  EXPECT_EQ(srv.http.read_ahead_bytes(), head.size() + 40000 - 4096);
  send_all(second, std::string(5000, 'b'));
  send_all(first, std::string(5000, 'a'));
  EXPECT_TRUE(read_answer(second).ends_with("\r\n\r\n40000"));
  EXPECT_TRUE(read_answer(first).ends_with("\r\n\r\n40000"));
  close(first);
  close(second);
  EXPECT_TRUE(wait_until([&] { return srv.http.read_ahead_bytes() == 0; }, std::chrono::seconds(5)));
}

TEST(BoundedHttpServerParking, ABodyThatFindsNoRoomWaitsForAnIdleWorkerBeyondTheReserve) {
  // Four workers, a quarter (1) kept for other requests; a 48 KiB read-ahead limit. Five clients
  // send 35000 of their 40000 body bytes and wait: the first parks within the limit, the next three
  // find no room and go to workers (which wait on them), the fifth finds no room and no idle worker
  // beyond the reserve: it stays parked, its bytes left in the kernel. A new request still gets the
  // reserved worker at once; once a worker is free again the fifth body goes to it.
  TestServer srv(true, 4, 256, std::chrono::seconds(20), 48 << 10);
  const std::string head = "POST /len HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: 40000\r\n\r\n";
  std::vector<int> fds;
  for (int i = 0; i < 5; ++i) {
    fds.push_back(connect_to(srv.port));
    send_all(fds.back(), head + std::string(35000, static_cast<char>('a' + i)));
    const std::size_t parked = i == 0 ? 1 : i < 4 ? 1 : 2;
    ASSERT_TRUE(wait_until([&] { return srv.http.parked_connections() == parked; }, std::chrono::seconds(5)))
        << "client " << i << ": " << srv.http.parked_connections() << " parked";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_EQ(srv.http.parked_connections(), parked) << "client " << i;
  }
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(exchange(srv.port, {"GET /echo HTTP/1.1\r\nX-Id: new\r\n\r\n"}), (std::vector<Answer>{{200, "new", false}}));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  EXPECT_EQ(srv.http.parked_connections(), 2u) << "the fifth body did not wait";
  // the second body ends: its worker answers and is free, and the fifth goes to a worker
  send_all(fds[1], std::string(5000, 'b'));
  EXPECT_TRUE(read_answer(fds[1]).ends_with("\r\n\r\n40000"));
  EXPECT_TRUE(wait_until([&] { return srv.http.parked_connections() <= 2; }, std::chrono::seconds(5)));
  for (const std::size_t i : {4u, 0u, 2u, 3u}) {
    send_all(fds[i], std::string(5000, static_cast<char>('a' + i)));
    EXPECT_TRUE(read_answer(fds[i]).ends_with("\r\n\r\n40000")) << "client " << i;
  }
  for (const int fd : fds) close(fd);
  EXPECT_TRUE(wait_until([&] { return srv.http.read_ahead_bytes() == 0; }, std::chrono::seconds(5)));
}

TEST(BoundedHttpServerParking, APausedBodyWhoseClientFallsSilentIsAnsweredAfterTheReadTimeout) {
  // Two workers (one kept in reserve), one of them held by a client that does not read its 16 MB
  // answer; a 48 KiB read-ahead limit and a 1 s read timeout. A first body parks within the limit,
  // a second finds no room and no worker to spare: paused, its last bytes waiting in the kernel, its
  // client silent (the first keeps trickling, so no room frees). Those waiting bytes kept it "not
  // silent" for ever; now only bytes that keep arriving do: it is answered 400 about 1 s after its
  // last byte.
  TestServer srv(true, 2, 256, std::chrono::seconds(20), 48 << 10);
  srv.http.set_read_timeout(1, 0);
  srv.http.set_write_timeout(10, 0);
  const int hog = connect_to(srv.port);
  const int rcvbuf = 4096;
  setsockopt(hog, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  send_all(hog, "GET /big HTTP/1.1\r\n\r\n");  // never read: its worker waits to write
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string head = "POST /len HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: 40000\r\n\r\n";
  const int first = connect_to(srv.port);
  send_all(first, head + std::string(35000, 'a'));
  ASSERT_TRUE(wait_until([&] { return srv.http.read_ahead_bytes() == head.size() + 40000 - 4096; }, std::chrono::seconds(5)));
  std::atomic<bool> trickle{true};
  std::thread trickler([&] {  // the first body stays alive (and keeps its room) a byte every 200 ms
    for (int i = 0; trickle && i < 40; ++i) {
      send(first, "a", 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  const int second = connect_to(srv.port);
  const auto t0 = std::chrono::steady_clock::now();
  send_all(second, head + std::string(35000, 'b'));
  const std::string got = read_answer(second);
  const auto took = std::chrono::steady_clock::now() - t0;
  trickle = false;
  trickler.join();
  EXPECT_TRUE(got.starts_with("HTTP/1.1 400")) << got;
  EXPECT_GT(took, std::chrono::milliseconds(800));
  EXPECT_LT(took, std::chrono::milliseconds(3000));
  close(first);
  close(second);
  close(hog);
}

TEST(BoundedHttpServerParking, ABodyRefusedUnreadIsDroppedWhileTheClientLingers) {
  // A 100000-byte body read ahead while parked, then refused before it is read: the connection ends
  // the lingering way (the client still sending, up to 30 s) without keeping the body's buffer.
  TestServer srv(true, 2);
  const int fd = connect_to(srv.port);
  send_all(fd, "POST /refuse HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n" + std::string(100000, 'r'));
  EXPECT_TRUE(read_answer(fd).starts_with("HTTP/1.1 405"));
  // (the worker parks the connection to linger just after writing the answer)
  ASSERT_TRUE(wait_until([&] { return srv.http.parked_connections() == 1; }, std::chrono::seconds(2)));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(srv.http.read_ahead_bytes(), 0u) << "the refused body's buffer is kept while the client lingers";
    EXPECT_EQ(srv.http.parked_connections(), 1u);  // lingering, parked
    send_all(fd, "x");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  close(fd);
}

TEST(BoundedHttpServerParking, ABodySilentForTheReadTimeoutIsRefusedThen) {
  // A 1 s read timeout: a body whose client goes silent is answered (400: cpp-httplib could not read
  // it) one read timeout after its last byte, not two (the parked wait, then the worker's read).
  TestServer srv(true, 2);
  srv.http.set_read_timeout(1, 0);
  const int fd = connect_to(srv.port);
  const auto t0 = std::chrono::steady_clock::now();
  send_all(fd, "POST /len HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n0123456789");
  const std::string got = read_answer(fd);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(got.starts_with("HTTP/1.1 400")) << got;
  EXPECT_GT(took, std::chrono::milliseconds(900));
  EXPECT_LT(took, std::chrono::milliseconds(1800));
  close(fd);
}

TEST(BoundedHttpServerParking, RefusedConnectionsLingerWithoutAWorker) {
  // A malformed head is answered and the connection ends the lingering way: the client's further
  // bytes are read and dropped for up to 2 s. Ten such clients that stay connected held both
  // workers for 2 s each without parking.
  TestServer srv(true, 2);
  std::vector<int> fds;
  for (int i = 0; i < 10; ++i) {
    fds.push_back(connect_to(srv.port));
    const std::string bad = "GET /echo HTTP/1.1\r\nNoColon\r\n\r\n";
    ASSERT_EQ(send(fds.back(), bad.data(), bad.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bad.size()));
  }
  for (const int fd : fds) EXPECT_NE(read_answer(fd).find("limit 3"), std::string::npos);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(exchange(srv.port, {"GET /echo HTTP/1.1\r\nX-Id: new\r\n\r\n"}), (std::vector<Answer>{{200, "new", false}}));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  // what they send meanwhile is dropped, never answered; then the server ends them
  const std::string more = "GET /echo HTTP/1.1\r\nX-Id: no\r\n\r\n";
  EXPECT_EQ(send(fds[0], more.data(), more.size(), MSG_NOSIGNAL), static_cast<ssize_t>(more.size()));
  for (const int fd : fds) EXPECT_EQ(read_answer(fd), "");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(4000));
  for (const int fd : fds) close(fd);
}

TEST(BoundedHttpServerParking, AnOverlongLineIsAnsweredWithoutWaitingForTheHeadsEnd) {
  // 9000 bytes of a header line, then the client waits: the line is over its bound, so the head
  // goes to a worker at once (400), not at its deadline (20 s here).
  TestServer srv(true, 2, 256, std::chrono::seconds(20));
  const int fd = connect_to(srv.port);
  const std::string part = "GET /echo HTTP/1.1\r\nX-Long: " + std::string(9000, 'h');
  ASSERT_EQ(send(fd, part.data(), part.size(), MSG_NOSIGNAL), static_cast<ssize_t>(part.size()));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(read_answer(fd).find("limit 1"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  close(fd);
}

TEST(BoundedHttpServerParking, AnAnswerToAClientThatStopsReadingEndsOneWriteTimeoutLater) {
  // One worker, a 1 s write timeout; a client asks for 16 MB and never reads. The worker is free
  // again (the next client answered) ~1 s after the socket's buffers filled: a blocking send had
  // waited the socket's own send timeout (also 1 s) on top.
  TestServer srv(true, 1);
  srv.http.set_write_timeout(1, 0);
  const int stalled = connect_to(srv.port);
  const int small = 4096;
  setsockopt(stalled, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  const std::string req = "GET /big HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(send(stalled, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the buffers fill
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(exchange(srv.port, {"GET /echo HTTP/1.1\r\nX-Id: next\r\n\r\n"}), (std::vector<Answer>{{200, "next", false}}));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1600));
  close(stalled);
}

TEST(BoundedHttpServerParking, AHeadThatCannotBeARequestIsAnsweredWithoutWaitingForItsEnd) {
  // Each sent with its head unfinished (the deadline is 20 s here): answered at once, as the worker
  // reading byte by byte would have.
  TestServer srv(true, 2, 256, std::chrono::seconds(20));
  const std::string tls_hello("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11);
  for (const std::string& start : {std::string("FOO /echo HTTP/1.1\r\n"), std::string("GET /echo\r\n"),
                                   std::string("GET /echo HTTP/2.0\r\n"), std::string("GET /echo HTTP/1.1\nX-A: b\r\n"),
                                   std::string("get /echo HTTP/1.1\r\n"), tls_hello,
                                   std::string("GET /echo HTTP/1.1\r\nX-A: a\0b\r\n", 30),
                                   std::string("GET /echo HTTP/1.1\r\nX-Id : a\r\n"),
                                   std::string("GET\t/echo\tHTTP/1.1\r\n"), std::string("GET /e\0cho HTTP/1.1\r\n", 22),
                                   std::string("GET /a b HTTP/1.1\r\n"), std::string("GET  HTTP/1.1\r\n"),
                                   std::string("GET /echo?a?b HTTP/1.1\r\n"), std::string("GET /e\rcho HTTP/1.1\r\n")}) {
    const int fd = connect_to(srv.port);
    ASSERT_EQ(send(fd, start.data(), start.size(), MSG_NOSIGNAL), static_cast<ssize_t>(start.size()));
    const auto t0 = std::chrono::steady_clock::now();
    const std::string got = read_answer(fd);
    EXPECT_EQ(got.substr(0, 10), "HTTP/1.1 4") << start;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2)) << start;
    close(fd);
  }
  // request lines cpp-httplib accepts, with spaces and tabs around their words or an empty '?'
  // piece, still wait for their heads, and are served
  for (const std::string& line : {std::string("\tGET  /echo   HTTP/1.1 \r\n"), std::string("GET \t/echo\t HTTP/1.1\t\r\n"),
                                  std::string("GET /echo??a HTTP/1.0\r\n")}) {
    const int fd = connect_to(srv.port);
    const std::string start = line + "X-Id: sp\r\n";
    ASSERT_EQ(send(fd, start.data(), start.size(), MSG_NOSIGNAL), static_cast<ssize_t>(start.size()));
    EXPECT_TRUE(wait_until([&] { return srv.http.parked_connections() == 1; }, std::chrono::seconds(2))) << line;
    ASSERT_EQ(send(fd, "\r\n", 2, MSG_NOSIGNAL), 2);
    EXPECT_TRUE(read_answer(fd).ends_with("\r\n\r\nsp")) << line;
    close(fd);
    EXPECT_TRUE(wait_until([&] { return srv.http.parked_connections() == 0; }, std::chrono::seconds(3)));
  }
}

TEST(BoundedHttpServerParking, AParkedConnectionEndsAtItsDeadline) {
  TestServer srv(true, 2);
  srv.http.set_keep_alive_timeout(1);
  // idle: ends after the keep-alive timeout, silently
  const int idle = connect_to(srv.port);
  // a head begun: answered 400 (incomplete) at the head deadline (1.5 s here), then ends
  const int begun = connect_to(srv.port);
  const std::string half = "GET /echo HTTP/1.1\r\n";
  ASSERT_EQ(send(begun, half.data(), half.size(), MSG_NOSIGNAL), static_cast<ssize_t>(half.size()));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(read_answer(idle), "");
  const auto idle_for = std::chrono::steady_clock::now() - t0;
  EXPECT_GT(idle_for, std::chrono::milliseconds(800));
  EXPECT_LT(idle_for, std::chrono::milliseconds(2500));
  const std::string got = read_answer(begun);
  EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 400") << got;
  EXPECT_NE(got.find("limit 4"), std::string::npos) << got;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(4000));
  close(idle);
  close(begun);
}

TEST(BoundedHttpServerParking, ConnectionsPastTheParkingLimitAreClosed) {
  TestServer srv(true, 2, 3);
  std::vector<int> fds;
  for (int i = 0; i < 3; ++i) fds.push_back(connect_to(srv.port));
  ASSERT_TRUE(wait_until([&] { return srv.http.parked_connections() == 3; }, std::chrono::seconds(5)));
  const int extra = connect_to(srv.port, 5);
  EXPECT_EQ(read_answer(extra), "") << "the fourth was kept";
  // the parked ones are still served
  const std::string req = "GET /echo HTTP/1.1\r\nX-Id: p\r\n\r\n";
  ASSERT_EQ(send(fds[0], req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  EXPECT_EQ(read_answer(fds[0]).substr(0, 15), "HTTP/1.1 200 OK");
  for (const int fd : fds) close(fd);
  close(extra);
}

TEST(BoundedHttpServerParking, StopEndsParkedConnections) {
  auto srv = std::make_unique<TestServer>(true, 2);
  const int idle = connect_to(srv->port), begun = connect_to(srv->port);
  const std::string half = "GET /echo HTTP/1.1\r\n";
  ASSERT_EQ(send(begun, half.data(), half.size(), MSG_NOSIGNAL), static_cast<ssize_t>(half.size()));
  ASSERT_TRUE(wait_until([&] { return srv->http.parked_connections() == 2; }, std::chrono::seconds(5)));
  const auto t0 = std::chrono::steady_clock::now();
  srv.reset();  // stop(): listen returns, the pool's shutdown closes what is parked
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  EXPECT_EQ(read_answer(idle), "");
  EXPECT_EQ(read_answer(begun), "");
  close(idle);
  close(begun);
}

}  // namespace
}  // namespace mamba::server
