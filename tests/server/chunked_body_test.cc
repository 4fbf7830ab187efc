// ChunkedBodyDecoder: chunked request bodies (RFC 9112 §7.1) decoded within bounds. The same bytes
// give the same body however they are split into feeds; next_read_size() never reaches past the
// body's end (a pipelined request after it stays unread); each fault and bound is named.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <string>
#include <string_view>

#include "server/chunked_body.h"

namespace mamba::server {
namespace {

using State = ChunkedBodyDecoder::State;

struct Decoded {
  State state;
  std::string body;
  std::string error;
  std::size_t consumed;  // bytes of the input the decoder took
};

/// Feeds `in` as a server reads it: at most next_read_size() bytes at a time, in pieces of at most
/// `piece` bytes.
Decoded decode(std::string_view in, std::size_t max_body = 1 << 20, std::size_t piece = 1 << 20) {
  ChunkedBodyDecoder d(max_body);
  std::string body;
  std::size_t at = 0;
  while (d.state() == State::kMore && at < in.size()) {
    const std::size_t n = std::min({d.next_read_size(), piece, in.size() - at});
    EXPECT_GE(n, 1u);
    const std::size_t used = d.feed(in.substr(at, n), body);
    at += used;
    if (used < n) break;  // ended or failed mid-piece
  }
  return {d.state(), body, d.error(), at};
}

TEST(ChunkedBody, DecodesChunksAndStopsAtTheBodysEnd) {
  const std::string next = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string in = "5\r\nhello\r\n1;name=value\r\n,\r\nA\r\n0123456789\r\n0\r\n\r\n" + next;
  for (std::size_t piece : {1u, 2u, 3u, 7u, 1000u}) {
    const Decoded d = decode(in, 1 << 20, piece);
    EXPECT_EQ(d.state, State::kDone) << d.error;
    EXPECT_EQ(d.body, "hello,0123456789");
    EXPECT_EQ(d.consumed, in.size() - next.size()) << "piece " << piece;  // the next request unread
  }
}

TEST(ChunkedBody, AcceptsUpperCaseHexLeadingZerosExtensionsAndTrailers) {
  Decoded d = decode("00B\r\nhello world\r\n000;last\r\nX-Checksum: 1\r\nX-Other: two\r\n\r\n");
  EXPECT_EQ(d.state, State::kDone) << d.error;
  EXPECT_EQ(d.body, "hello world");
  d = decode("3 ;ext\r\nabc\r\n0\t; a=\"q\"\r\n\r\n");  // whitespace before ';' (BWS)
  EXPECT_EQ(d.state, State::kDone) << d.error;
  EXPECT_EQ(d.body, "abc");
  d = decode("0\r\n\r\n");  // an empty body
  EXPECT_EQ(d.state, State::kDone) << d.error;
  EXPECT_EQ(d.body, "");
}

TEST(ChunkedBody, RandomSplitsGiveTheSameBody) {
  std::mt19937 rng(7);
  std::string in, want;
  for (int c = 0; c < 40; ++c) {
    const std::size_t n = rng() % 300 + 1;
    std::string data(n, '\0');
    for (char& ch : data) ch = static_cast<char>(rng());  // any bytes, CR / LF / NUL included
    in += fmt::format("{:x}", n) + "\r\n" + data + "\r\n";
    want += data;
  }
  in += "0\r\n\r\n";
  for (int round = 0; round < 20; ++round) {
    const Decoded d = decode(in, 1 << 20, rng() % 50 + 1);
    ASSERT_EQ(d.state, State::kDone) << d.error;
    EXPECT_EQ(d.body, want);
    EXPECT_EQ(d.consumed, in.size());
  }
}

TEST(ChunkedBody, BodyOverTheLimitIsRefusedAtTheSizeLine) {
  // 10 bytes allowed: 6 + 4 fit, one more does not; the refusal comes before the data is read.
  Decoded d = decode("6\r\nabcdef\r\n4\r\nghij\r\n0\r\n\r\n", 10);
  EXPECT_EQ(d.state, State::kDone) << d.error;
  d = decode("6\r\nabcdef\r\n5\r\nghijk\r\n0\r\n\r\n", 10);
  EXPECT_EQ(d.state, State::kTooLarge);
  EXPECT_EQ(d.error, "the chunked request body exceeds 10 bytes (chunk 2 declares more than the 4 bytes left)");
  EXPECT_EQ(d.body, "abcdef");
  EXPECT_EQ(d.consumed, std::string("6\r\nabcdef\r\n5").size());
  // A size past 2⁶⁴ is refused at its first digit over the limit (no overflow).
  d = decode("FFFFFFFFFFFFFFFFFFFFFFFF\r\n", 1 << 20);
  EXPECT_EQ(d.state, State::kTooLarge);
  EXPECT_EQ(d.consumed, 6u);  // 0xFFFFFF > 2²⁰
}

TEST(ChunkedBody, MalformedFramingIsNamed) {
  struct Case {
    std::string in;
    std::string error;
  };
  const Case cases[] = {
      {"zz\r\n", "chunk 1's size line begins with 'z', not a hexadecimal digit"},
      {"\r\n", "chunk 1's size line has no size (hexadecimal digits)"},
      {";x\r\n", "chunk 1's size line begins with ';', not a hexadecimal digit"},
      {"5x\r\nhello\r\n", "chunk 1's size is followed by 'x' (expected CRLF or a ';' extension)"},
      {"5 x\r\nhello\r\n", "chunk 1's size is followed by 'x' (expected CRLF or a ';' extension)"},
      {"-5\r\n", "chunk 1's size line begins with '-', not a hexadecimal digit"},
      {"5\nhello\r\n0\r\n\r\n", "a bare LF (without CR) ends the size line of chunk 1: lines of a chunked body end CRLF"},
      {"5\rhello", "chunk 1's size line has a CR not followed by LF"},
      {"5\r\nhelloX\r\n", "chunk 1's data is not followed by CRLF after the 5 bytes its size line declares ('X' there): the data is longer or shorter than declared"},
      // shorter than declared: the next chunk's bytes are read as its data
      {"a\r\nabc\r\n0\r\n\r\nXY", "chunk 1's data is not followed by CRLF after the 10 bytes its size line declares ('X' there): the data is longer or shorter than declared"},
      {"5\r\nhello\rX", "chunk 1's data is followed by a CR without LF"},
      {"5\r\nhello\r\n2;a\x01\r\n", "chunk 2's size line holds control character 0x01"},
      {"0\r\nX: 1\n\r\n", "a bare LF (without CR) ends a trailer line of the chunked body: lines of a chunked body end CRLF"},
      {"0\r\nX: \x7f\r\n\r\n", "a trailer line of the chunked body holds control character 0x7f"},
      {"0\r\n\rX", "a trailer line of the chunked body has a CR not followed by LF"},
      // trailer lines are field lines, as the head's (HeadChecker)
      {"0\r\ngarbage\r\n\r\n", "trailer line 1 of the chunked body has no ':' (a field line is NAME: VALUE)"},
      {"0\r\nGET /x HTTP/1.1\r\n\r\n", "trailer line 1 of the chunked body has ' ' in its field name"},
      {"0\r\nA: b\r\n c\r\n\r\n", "trailer line 2 of the chunked body has ' ' in its field name (a folded line)"},
      {"0\r\nX-A : b\r\n\r\n", "trailer line 1 of the chunked body has ' ' in its field name"},
      {"0\r\n: b\r\n\r\n", "trailer line 1 of the chunked body has no field name before its ':'"},
  };
  for (const Case& c : cases) {
    const Decoded d = decode(c.in);
    EXPECT_EQ(d.state, State::kMalformed) << c.in;
    EXPECT_EQ(d.error, c.error) << c.in;
  }
}

TEST(ChunkedBody, LinesAndTrailersAreBounded) {
  // A size line of exactly 4096 bytes with its CRLF is taken; one byte more is not.
  const std::string ext4096 = "1;" + std::string(ChunkedBodyDecoder::kMaxSizeLine - 4, 'e');
  EXPECT_EQ(decode(ext4096 + "\r\nx\r\n0\r\n\r\n").state, State::kDone);
  EXPECT_EQ(decode(ext4096 + "e\r\nx\r\n0\r\n\r\n").error, "chunk 1's size line is longer than 4096 bytes");
  // Extensions in all: 64 KiB.
  std::string many;
  for (int i = 0; i < 20; ++i) many += "1;" + std::string(4000, 'e') + "\r\nx\r\n";
  const Decoded ext = decode(many + "0\r\n\r\n");
  EXPECT_EQ(ext.state, State::kMalformed);
  EXPECT_EQ(ext.error, "the chunked body's chunk extensions are longer than 65536 bytes in all");
  Decoded d = decode("5;" + std::string(ChunkedBodyDecoder::kMaxSizeLine, 'e') + "\r\n");
  EXPECT_EQ(d.state, State::kMalformed);
  EXPECT_EQ(d.error, "chunk 1's size line is longer than 4096 bytes");
  EXPECT_EQ(d.consumed, ChunkedBodyDecoder::kMaxSizeLine + 1);  // stopped at the first byte over
  std::string trailers = "0\r\n";
  while (trailers.size() < ChunkedBodyDecoder::kMaxTrailer + 100) trailers += "X-T: 0123456789\r\n";
  d = decode(trailers + "\r\n");
  EXPECT_EQ(d.state, State::kMalformed);
  EXPECT_EQ(d.error, "the chunked body's trailer section is longer than 8192 bytes");
}

TEST(ChunkedBody, IncompleteBodyStaysMoreAndNothingIsTakenAfterTheEnd) {
  ChunkedBodyDecoder d(100);
  std::string body;
  EXPECT_EQ(d.feed("5\r\nhel", body), 6u);
  EXPECT_EQ(d.state(), State::kMore);
  EXPECT_EQ(d.next_read_size(), 4u);  // "lo" and the CRLF
  EXPECT_EQ(d.feed("lo\r\n0\r\n\r\nPOST", body), 9u);
  EXPECT_EQ(d.state(), State::kDone);
  EXPECT_EQ(d.next_read_size(), 0u);
  EXPECT_EQ(d.feed("more", body), 0u);
  EXPECT_EQ(body, "hello");
  EXPECT_EQ(d.body_bytes(), 5u);
}

}  // namespace
}  // namespace mamba::server
