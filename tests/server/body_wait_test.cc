// BodyWait: which parked requests wait for their body, and when a body is all here (then a worker
// reading it never waits on its client). ReadAheadBytes: the parked bodies' shared limit.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "server/body_wait.h"

namespace mamba::server {
namespace {

constexpr std::size_t kMax = 1000;

std::string head(std::string_view request_line, std::string_view fields) {
  return std::string(request_line) + "\r\nHost: x\r\n" + std::string(fields) + "\r\n";
}

TEST(BodyWait, ContentLengthWaitsForExactlyItsBytes) {
  BodyWait w(head("POST /generate HTTP/1.1", "Content-Length: 10\r\n"), kMax);
  ASSERT_TRUE(w.wanted());
  EXPECT_FALSE(w.decided());
  EXPECT_EQ(w.max_more(), 10u);
  EXPECT_FALSE(w.feed("0123"));
  EXPECT_EQ(w.max_more(), 6u);
  EXPECT_FALSE(w.feed("45678"));
  EXPECT_TRUE(w.feed("9GET / HTTP/1.1\r\n"));  // bytes past the body (a pipelined request) count too
  EXPECT_EQ(w.max_more(), 0u);
  EXPECT_EQ(w.fed(), 26u);
}

TEST(BodyWait, HeaderNamesAnyCaseValuesTrimmedEqualLengthsOne) {
  BodyWait w(head("PUT /x HTTP/1.0", "content-LENGTH: \t 3 \t\r\nContent-Length: 3\r\n"), kMax);
  ASSERT_TRUE(w.wanted());
  EXPECT_FALSE(w.feed("ab"));
  EXPECT_TRUE(w.feed("c"));
}

TEST(BodyWait, ChunkedWaitsForTheLastChunkAndTrailer) {
  BodyWait w(head("POST /v1/completions HTTP/1.1", "Transfer-Encoding:  Chunked \r\n"), kMax);
  ASSERT_TRUE(w.wanted());
  EXPECT_EQ(w.max_more(), kMax + BodyWait::kChunkedSlack);
  const std::string body = "5;ext=1\r\nhello\r\n3\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\n";
  for (std::size_t i = 0; i + 1 < body.size(); ++i) EXPECT_FALSE(w.feed(body.substr(i, 1))) << "at byte " << i;
  EXPECT_TRUE(w.feed(body.substr(body.size() - 1)));
  EXPECT_EQ(w.max_more(), 0u);
}

TEST(BodyWait, ALargeChunkFedWholeIsDecodedInSlices) {
  // One 4 MiB chunk fed at once: its data are decoded and dropped 16 KiB at a time (a parked
  // chunked body held a second copy of itself in the scratch buffer, uncounted).
  BodyWait w(head("POST /x HTTP/1.1", "Transfer-Encoding: chunked\r\n"), 8 << 20);
  const std::string chunk = "400000\r\n" + std::string(4 << 20, 'c') + "\r\n";
  EXPECT_FALSE(w.feed(chunk));
  EXPECT_LE(w.scratch_bytes(), 32u << 10);
  EXPECT_TRUE(w.feed("0\r\n\r\n"));
}

TEST(BodyWait, ChunkedDecidedAtAFaultOrOverTheLimit) {
  {
    BodyWait w(head("POST /x HTTP/1.1", "Transfer-Encoding: chunked\r\n"), kMax);
    EXPECT_FALSE(w.feed("4\r\nab"));
    EXPECT_TRUE(w.feed("cd\n"));  // a bare LF after the data: the worker answers 400 there
  }
  {
    BodyWait w(head("POST /x HTTP/1.1", "Transfer-Encoding: chunked\r\n"), kMax);
    EXPECT_TRUE(w.feed("3e9\r\n"));  // 1001 bytes > kMax: 413 before the data
  }
  {
    // 1-byte chunks: framing 6× the data; past max_body + kChunkedSlack raw bytes the worker reads on
    BodyWait w(head("POST /x HTTP/1.1", "Transfer-Encoding: chunked\r\n"), 1 << 20);
    std::string chunks;
    for (int i = 0; i < 1000; ++i) chunks += "0001\r\nx\r\n";
    std::uint64_t fed = 0;
    while (!w.decided()) {
      w.feed(chunks);
      fed += chunks.size();
      ASSERT_LE(fed, (1u << 20) + BodyWait::kChunkedSlack + chunks.size());
    }
    EXPECT_GE(fed, (1u << 20) + BodyWait::kChunkedSlack);
  }
}

TEST(BodyWait, NothingAwaitedWhereTheServerAnswersUnread) {
  const struct {
    const char* request_line;
    const char* fields;
  } cases[] = {
      {"POST /generate HTTP/1.1", ""},                                                // no body
      {"POST /generate HTTP/1.1", "Content-Length: 0\r\n"},                           // empty body
      {"GET /health HTTP/1.1", "Content-Length: 5\r\n"},                              // 400, unread
      {"HEAD / HTTP/1.1", "Content-Length: 5\r\n"},                                   // 400, unread
      {"POST /generate HTTP/1.1", "Content-Length: 5\r\nExpect: 100-continue\r\n"},   // body after "100 Continue"
      {"POST /generate HTTP/1.1", "Content-Length: 1001\r\n"},                        // 413, unread
      {"POST /generate HTTP/1.1", "Content-Length: 5\r\nContent-Length: 6\r\n"},      // conflicting: 400
      {"POST /generate HTTP/1.1", "Content-Length: 5x\r\n"},                          // not a number
      {"POST /generate HTTP/1.1", "Content-Length: 99999999999999999999\r\n"},        // 20 digits
      {"POST /generate HTTP/1.1", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"},  // both: 400
      {"POST /generate HTTP/1.1", "Transfer-Encoding: gzip, chunked\r\n"},            // 501
      {"POST /generate HTTP/1.1", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"},
      {"POST /generate HTTP/1.0", "Transfer-Encoding: chunked\r\n"},                  // 1.0 has no chunks
      {"PUT /generate HTTP/1.1", "Transfer-Encoding: chunked\r\n"},                   // POSTs only
  };
  for (const auto& c : cases) {
    BodyWait w(head(c.request_line, c.fields), kMax);
    EXPECT_FALSE(w.wanted()) << c.request_line << " / " << c.fields;
    EXPECT_TRUE(w.decided());
    EXPECT_EQ(w.max_more(), 0u);
    EXPECT_TRUE(w.feed("more"));
  }
}

TEST(ReadAheadBytes, TakesWithinItsLimitOnly) {
  ReadAheadBytes b(100);
  EXPECT_TRUE(b.take(60));
  EXPECT_FALSE(b.take(41));
  EXPECT_EQ(b.held(), 60u);
  EXPECT_TRUE(b.take(40));
  EXPECT_FALSE(b.take(1));
  b.release(60);
  EXPECT_FALSE(b.take(static_cast<std::size_t>(-1)));  // no wrap-around
  EXPECT_TRUE(b.take(60));
  EXPECT_EQ(b.held(), 100u);
}

}  // namespace
}  // namespace mamba::server
