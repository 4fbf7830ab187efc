// BoundedHttpServer: cpp-httplib 0.11's Server with a bound on the bytes of a request's head (its
// request line and header lines).
//
// cpp-httplib 0.11 (Debian 12) reads each line of the head whole before it checks the line's length
// (8 KiB), and reads header lines with no bound on their count: one client sending 200 MB of header
// lines grew the server by 380 MB, and a single endless line grows it as well (later cpp-httplib
// bounds the count, CPPHTTPLIB_HEADER_MAX_COUNT). httplib::Server's per-connection loop
// (process_and_close_socket, a private virtual) is replaced here by the same keep-alive loop over
// the same request processing (process_request), reading through a stream that ends the head's
// bytes at the limits: a line over kMaxHeadLine bytes reads as ended there (so cpp-httplib answers
// it as it does now: 414 for the request line, 400 for a header line), a head over the whole limit
// as ended after it (cpp-httplib answers 400, which the error handler turns into 431 by
// head_limit()). Either way the connection ends after that answer (the lingering way: the client's
// further bytes are read and discarded for at most 2 s), so the rest of the head is never read as a
// next request; handlers end it the same way after answers that leave bytes unread
// (close_after_answer()). The stream is kept across a connection's requests, so pipelined requests
// are all answered (cpp-httplib 0.11 dropped the bytes its per-request stream had read ahead).
#pragma once

#include <httplib.h>

#include <cstddef>

namespace mamba::server {

/// Ends the connection on `fd` after an answer already written to it, the lingering way (RFC 7230
/// §6.6): shutdown(SHUT_WR) so the client sees the answer end, then read and discard what it still
/// sends (a refused body or head) until it closes, for at most `max_ms` / `max_bytes`, then
/// shutdown(SHUT_RD). The descriptor stays open (its owner closes it).
void close_lingering(int fd, int max_ms, std::size_t max_bytes);

/// Which bound the head of the request being processed on this thread went past.
enum class HeadLimit {
  kNone,
  kLine,  ///< one line over kMaxHeadLine bytes (cpp-httplib answers 414 or 400 itself)
  kHead,  ///< the whole head over the server's max_head_bytes (answered 431)
};

class BoundedHttpServer : public httplib::Server {
 public:
  /// Bytes of one line of the head, CRLF included, cpp-httplib accepts (its
  /// CPPHTTPLIB_REQUEST_URI_MAX_LENGTH and CPPHTTPLIB_HEADER_MAX_LENGTH); one byte more is read, so
  /// that cpp-httplib sees the line as over its limit.
  static constexpr std::size_t kMaxHeadLine = 8192;

  /// `max_head_bytes` ≥ kMaxHeadLine + 1: the request line and all header lines together, CRLFs
  /// included (the body is not counted).
  explicit BoundedHttpServer(std::size_t max_head_bytes);

  std::size_t max_head_bytes() const { return max_head_bytes_; }

  /// The bound the head of the request now processed on the calling thread went past; kNone on a
  /// thread that processes no request. Read by the error handler (which is handed no stream).
  static HeadLimit head_limit();

  /// The socket of the connection whose request the calling thread processes (a handler's, a
  /// hook's, a content provider's); -1 on other threads. Not owned: open until the request's
  /// processing returns.
  static int current_socket();

  /// Called from a handler or hook (on the thread processing the request): once this request's
  /// answer is written, the connection ends, the lingering way (the client's further bytes — a body
  /// refused unread, the rest of a head not parsed — are read and discarded for at most 2 s, so
  /// they are never read as a next request and the client reads the answer rather than a reset).
  /// The answer should say "Connection: close". cpp-httplib 0.11 would keep the connection.
  static void close_after_answer();

 private:
  bool process_and_close_socket(socket_t sock) override;

  std::size_t max_head_bytes_;
};

}  // namespace mamba::server
